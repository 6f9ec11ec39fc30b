// Saving and restoring a job's BCS state (BcsEngine: Quiescent, Flush, SaveMatcher,
// SaveChannel, Hold, AddJob with a BcsRestore) on a real one-node primitives group.
//
// The test plays the ranks itself: it maps their channel files as a rank would, posts
// descriptors and reads completions. Zero-byte messages keep the engine from needing rank
// processes to copy data into (process_vm_writev); everything else is the real engine: real
// channel files in /dev/shm, the real matcher, the real bell thread reporting to the
// coordinator's blocked table (this node is node 0, so the report comes back here).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gos/bcs/channel.h"
#include "gos/os/layout.h"
#include "gos/prim/bootstrap.h"
#include "gos/prim/prim.h"
#include "nodeagent/bcs_engine.h"

namespace gos::nodeagent {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kJob = 7;

// A rank's side of its channel.
class RankView {
 public:
  explicit RankView(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    EXPECT_GE(fd, 0) << path;
    if (fd < 0) return;
    base_ = ::mmap(nullptr, bcs::kChannelBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    EXPECT_NE(base_, MAP_FAILED);
    if (base_ == MAP_FAILED) base_ = nullptr;
  }
  ~RankView() {
    if (base_ != nullptr) ::munmap(base_, bcs::kChannelBytes);
  }
  RankView(const RankView&) = delete;
  RankView& operator=(const RankView&) = delete;

  bcs::ChannelHeader* h() { return static_cast<bcs::ChannelHeader*>(base_); }

  void Post(bcs::Op op, uint64_t req, int32_t peer, int32_t tag, uint32_t flags = 0) {
    bcs::Descriptor d;
    d.req = req;
    d.context = 1;
    d.op = static_cast<uint32_t>(op);
    d.peer = peer;
    d.tag = tag;
    d.flags = flags;
    const uint64_t head = h()->desc_head.load();
    bcs::DescRing(base_)[head % bcs::kDescSlots] = d;
    h()->desc_head.store(head + 1, std::memory_order_release);
  }
  // Published completions, consumed or not.
  std::vector<bcs::Completion> Published() {
    std::vector<bcs::Completion> out;
    for (uint64_t i = 0; i < h()->compl_head.load(); ++i) {
      out.push_back(bcs::ComplRing(base_)[i % bcs::kComplSlots]);
    }
    return out;
  }

 private:
  void* base_ = nullptr;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

class BcsStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    prim::BootstrapOptions bo;
    bo.group_size = 1;
    auto server = prim::BootstrapServer::Start(bo);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    prim::NodeOptions no;
    no.bootstrap = server_->address();
    no.global_memory_bytes = os::kGlobalMemoryBytes;
    auto node = prim::Node::Join(no);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    node_ = std::move(*node);
    prefix_ = "/dev/shm/gos-bcsstate-" + std::to_string(::getpid());
    engine_ = std::make_unique<BcsEngine>(node_.get(), BcsEngineOptions{0, prefix_, 1500ms});
    spec_.job = kJob;
    spec_.uid = ::getuid();
    spec_.gid = ::getgid();
    spec_.rank_node = {0, 0};
    spec_.local = {0, 1};
  }
  void TearDown() override {
    engine_.reset();  // removes its jobs' channel files
    for (uint32_t r = 0; r < 2; ++r) EXPECT_FALSE(Exists(Path(r))) << Path(r);
    if (node_) node_->Leave();
    if (server_) server_->Stop();
  }
  std::string Path(uint32_t rank) const {
    return prefix_ + "-j" + std::to_string(kJob) + "-r" + std::to_string(rank);
  }

  // Rank 1 posts a receive from rank 0 (matched later), rank 0 an iprobe (answered at once);
  // one strobe drains them; then rank 0 posts the matching send, which stays in its ring.
  // Checkpoints the job as the agent does and returns what it saved.
  BcsRestore RunAndCheckpoint() {
    auto paths = engine_->AddJob(spec_);
    EXPECT_TRUE(paths.ok()) << paths.status().ToString();
    BcsRestore saved;
    {
      RankView r0(Path(0)), r1(Path(1));
      r1.Post(bcs::Op::kRecv, 11, 0, 5);
      r0.Post(bcs::Op::kProbe, 21, 1, 3, bcs::kFlagNonBlocking);
      engine_->OnStrobe(1, 0);
      EXPECT_EQ(r0.h()->desc_tail.load(), 1u);
      EXPECT_EQ(r1.h()->desc_tail.load(), 1u);
      r0.Post(bcs::Op::kSend, 22, 1, 5);

      EXPECT_TRUE(engine_->Quiescent(kJob));
      EXPECT_FALSE(engine_->Quiescent(kJob + 1));
      // The probe's "not found", published at the end of the slice that decided it.
      EXPECT_EQ(r0.h()->compl_head.load(), 1u);
      engine_->Flush(kJob);  // nothing left to publish
      EXPECT_EQ(r0.h()->compl_head.load(), 1u);
      auto matcher = engine_->SaveMatcher(kJob);
      EXPECT_TRUE(matcher.ok()) << matcher.status().ToString();
      if (matcher.ok()) saved.matcher = *matcher;
      for (uint32_t r = 0; r < 2; ++r) {
        auto ch = engine_->SaveChannel(kJob, r);
        EXPECT_TRUE(ch.ok()) << ch.status().ToString();
        if (ch.ok()) saved.channels[r] = *ch;
        EXPECT_EQ(saved.channels[r], ReadFile(Path(r)));
      }
      EXPECT_EQ(engine_->SaveChannel(kJob, 2).status().code(), StatusCode::kNotFound);
      EXPECT_EQ(engine_->SaveMatcher(kJob + 1).status().code(), StatusCode::kNotFound);

      // Held: the next strobe leaves the job alone (the send stays undrained).
      engine_->Hold(kJob, true);
      engine_->OnStrobe(2, 0);
      EXPECT_EQ(r0.h()->desc_tail.load(), 1u);
      EXPECT_EQ(r1.h()->compl_head.load(), 0u);
    }
    // The node dies: its state and channels are gone.
    engine_->RemoveJob(kJob);
    EXPECT_FALSE(Exists(Path(0)));
    return saved;
  }

  std::unique_ptr<prim::BootstrapServer> server_;
  std::unique_ptr<prim::Node> node_;
  std::string prefix_;
  std::unique_ptr<BcsEngine> engine_;
  BcsJob spec_;
};

TEST_F(BcsStateTest, RestoredJobContinuesWhereItWasCheckpointed) {
  const BcsRestore saved = RunAndCheckpoint();
  auto paths = engine_->AddJob(spec_, &saved);
  ASSERT_TRUE(paths.ok()) << paths.status().ToString();
  for (uint32_t r = 0; r < 2; ++r) {
    EXPECT_EQ(paths->at(r), Path(r));
    EXPECT_EQ(ReadFile(Path(r)), saved.channels.at(r));
    struct stat st {};
    ASSERT_EQ(::stat(Path(r).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(st.st_uid, spec_.uid);
  }
  RankView r0(Path(0)), r1(Path(1));
  // A restored job starts held: nothing moves until every node has it back.
  engine_->OnStrobe(3, 0);
  EXPECT_EQ(r0.h()->desc_tail.load(), 1u);
  engine_->Hold(kJob, false);
  // The strobe counter may start over after a restart.
  engine_->OnStrobe(1, 0);
  EXPECT_EQ(r0.h()->desc_tail.load(), 2u);  // the send posted before the checkpoint
  engine_->OnStrobe(2, 0);                  // publishes the match decided at strobe 1

  // Rank 1's receive, posted and drained before the checkpoint, met the send.
  std::vector<bcs::Completion> c1 = r1.Published();
  ASSERT_EQ(c1.size(), 1u);
  EXPECT_EQ(c1[0].req, 11u);
  EXPECT_EQ(c1[0].source, 0);
  EXPECT_EQ(c1[0].tag, 5);
  EXPECT_EQ(c1[0].error, bcs::kOk);
  // Rank 0 still has the probe's completion it had not consumed, then the send's.
  std::vector<bcs::Completion> c0 = r0.Published();
  ASSERT_EQ(c0.size(), 2u);
  EXPECT_EQ(c0[0].req, 21u);
  EXPECT_EQ(c0[0].flags, 0u);
  EXPECT_EQ(c0[1].req, 22u);
  EXPECT_EQ(c0[1].error, bcs::kOk);
}

TEST_F(BcsStateTest, RestoreRejectsStateOfAnotherJobOrLayout) {
  const BcsRestore saved = RunAndCheckpoint();
  auto expect_rejected = [&](const BcsRestore& bad, StatusCode code, const BcsJob& spec) {
    auto paths = engine_->AddJob(spec, &bad);
    ASSERT_FALSE(paths.ok());
    EXPECT_EQ(paths.status().code(), code) << paths.status().ToString();
    for (uint32_t r = 0; r < 2; ++r) EXPECT_FALSE(Exists(Path(r))) << "left behind: " << Path(r);
  };
  BcsRestore bad = saved;
  bad.channels[1].pop_back();
  expect_rejected(bad, StatusCode::kInvalidArgument, spec_);
  bad = saved;
  std::swap(bad.channels[0], bad.channels[1]);  // rank 0's file given as rank 1's
  expect_rejected(bad, StatusCode::kInvalidArgument, spec_);
  bad = saved;
  bad.channels[0][0] ^= 1;  // magic
  expect_rejected(bad, StatusCode::kInvalidArgument, spec_);
  bad = saved;
  bad.channels.erase(1);
  expect_rejected(bad, StatusCode::kInvalidArgument, spec_);
  bad = saved;
  bad.matcher[bad.matcher.size() / 2] ^= 1;
  expect_rejected(bad, StatusCode::kDataLoss, spec_);
  // Another job id: the channels' headers name job 7.
  BcsJob other = spec_;
  other.job = kJob + 1;
  auto paths = engine_->AddJob(other, &saved);
  ASSERT_FALSE(paths.ok());
  EXPECT_EQ(paths.status().code(), StatusCode::kInvalidArgument);
  // A world of another size: the matcher and the channels say 2 ranks.
  BcsJob bigger = spec_;
  bigger.rank_node = {0, 0, 0};
  expect_rejected(saved, StatusCode::kInvalidArgument, bigger);
  // A channel whose rank has not drained what it never posted.
  bad = saved;
  const uint64_t tail = 5;
  std::memcpy(bad.channels[0].data() + offsetof(bcs::ChannelHeader, desc_tail), &tail, 8);
  expect_rejected(bad, StatusCode::kInvalidArgument, spec_);

  // The intact state is still accepted after all that.
  ASSERT_TRUE(engine_->AddJob(spec_, &saved).ok());
}

// The bell thread reports "every local rank blocked" to the coordinator (node 0: here) for the
// running row's job, but never for a held one.
TEST_F(BcsStateTest, HeldJobIsNotReportedBlocked) {
  ASSERT_TRUE(engine_->AddJob(spec_).ok());
  engine_->Hold(kJob, true);
  RankView r0(Path(0)), r1(Path(1));
  for (RankView* r : {&r0, &r1}) {
    r->h()->state.store(bcs::kStateBlocked);
    r->h()->bell.fetch_add(1);
  }
  auto got = node_->WaitEvent(os::kEventBlocked, 500ms);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(*got) << "a held job was reported blocked";
  engine_->Hold(kJob, false);
  got = node_->WaitEvent(os::kEventBlocked, 5s);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got) << "the released job was never reported blocked";
}

}  // namespace
}  // namespace gos::nodeagent
