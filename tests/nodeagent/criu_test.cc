// DumpRank and RestoreRank with real ranks (LaunchRank, gos-rank-init, criu_counter), real
// freezer cgroups and the real criu: a restored rank continues where it was dumped, on the new
// pipes, as the caller's child, inside the given cgroup and frozen until thawed; a restore next
// to the still-running original; a rank with a MAP_SHARED /dev/shm file; a dump written over
// the pages images of an earlier one; zero pages left out of a dump; and clear errors.
// Needs root.
#include "nodeagent/criu.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "nodeagent/freezer.h"
#include "tests/nodeagent/rank_harness.h"
#include "tests/support/temp_dir.h"

namespace gos::nodeagent {
namespace {

using namespace std::chrono_literals;
using ::gos::testing::DescribeWaitStatus;
using testing::InitPath;
using testing::Rank;

constexpr int kExitCode = 42;

std::string CounterPath() { return gos::testing::TestBinDir() + "/criu_counter"; }

// The "step N" lines of out, as numbers.
std::vector<int> Steps(const std::string& out) {
  std::vector<int> steps;
  std::istringstream in(out);
  std::string word;
  int n;
  while (in >> word >> n) steps.push_back(n);
  return steps;
}

std::string StepLine(int n) { return "step " + std::to_string(n) + "\n"; }

std::string StateOf(FreezerCgroup* cg) {
  auto s = cg->State();
  return s.ok() ? *s : s.status().ToString();
}

// SIGKILLs a rank's init (the kernel then kills the namespace) and reaps it through rank, so
// its destructor does not touch the pid again.
void KillRank(Rank* rank) {
  testing::ThawFreezerOf(rank->pid());
  ::kill(rank->pid(), SIGKILL);
  EXPECT_TRUE(rank->Wait().has_value());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

pid_t ParentOf(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  char state;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

class CriuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = testing::SkipReason();
    if (why.empty() && ::access(CriuPath().c_str(), X_OK) != 0) why = "no criu at " + CriuPath();
    if (why.empty() && ::access(CounterPath().c_str(), X_OK) != 0) {
      why = "criu_counter not built at " + CounterPath();
    }
    if (!why.empty()) GTEST_SKIP() << why;
    tmp_.emplace("gos-criu-test");
    dir_ = tmp_->path();
    cgroup_root_ = testing::TestCgroupRoot();
  }
  void TearDown() override {
    // Ranks first: their destructors thaw, kill and reap; then the cgroups can go.
    ranks_.clear();
    cgroups_.clear();
    ::rmdir(cgroup_root_.c_str());
    if (!shm_.empty()) ::unlink(shm_.c_str());
    tmp_.reset();
  }

  FreezerCgroup* MakeCgroup(const std::string& name) {
    auto cg = FreezerCgroup::Create(cgroup_root_, name);
    EXPECT_TRUE(cg.ok()) << cg.status().ToString();
    if (!cg.ok()) return nullptr;
    cgroups_.push_back(std::move(*cg));
    return cgroups_.back().get();
  }

  // A rank running `program` (in the test binary dir) with argv, in cg.
  Rank* LaunchIn(FreezerCgroup* cg, const std::string& program, std::vector<std::string> argv) {
    RankSpec s;
    s.program = gos::testing::TestBinDir() + "/" + program;
    s.argv = std::move(argv);
    s.cwd = dir_;
    s.init_path = InitPath();
    s.cgroup_procs = cg->procs_file();
    auto r = Rank::Launch(s);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return nullptr;
    ranks_.push_back(std::move(*r));
    return ranks_.back().get();
  }

  // A counter of `steps` steps, ~10 ms apart, in cg.
  Rank* LaunchCounter(FreezerCgroup* cg, int steps, const std::string& shm = "") {
    std::vector<std::string> argv = {"criu_counter", std::to_string(steps), "10",
                                     std::to_string(kExitCode)};
    if (!shm.empty()) argv.push_back(shm);
    return LaunchIn(cg, "criu_counter", std::move(argv));
  }

  Rank* Adopt(const RankProcess& p) {
    ranks_.push_back(std::make_unique<Rank>(p));
    return ranks_.back().get();
  }

  // Restores the rank dumped in images into cg (which it joins as it is) and adopts it.
  Rank* RestoreIn(FreezerCgroup* cg, const std::string& images) {
    auto rp = RestoreRank({.images_dir = images, .cgroup_procs = cg->procs_file()});
    EXPECT_TRUE(rp.ok()) << rp.status().ToString();
    return rp.ok() ? Adopt(*rp) : nullptr;
  }

  std::string NewImagesDir(const std::string& name) {
    std::string d = dir_ + "/" + name;
    EXPECT_EQ(::mkdir(d.c_str(), 0700), 0);
    return d;
  }

  // Lets rank count to `at`, freezes cg, collects what it wrote, dumps it into a new images
  // dir and checks the cgroup is still FROZEN. Returns the last step written before the dump
  // (0 on failure) and leaves cg FROZEN.
  int FreezeAndDump(Rank* rank, FreezerCgroup* cg, int at, std::string* images) {
    EXPECT_TRUE(rank->ReadUntilStdout(StepLine(at))) << rank->out() << rank->err();
    Status frozen = cg->Freeze();
    EXPECT_TRUE(frozen.ok()) << frozen.ToString();
    // Drain: a frozen rank writes nothing more, so this only collects what is in the pipe.
    rank->ReadUntilStdout("no such line", 100ms);
    std::vector<int> steps = Steps(rank->out());
    if (steps.empty()) return 0;
    *images = NewImagesDir("images");
    auto dumped =
        DumpRank({.init_pid = rank->pid(), .images_dir = *images, .freezer_cgroup = cg->path()});
    EXPECT_TRUE(dumped.ok()) << dumped.status().ToString();
    if (!dumped.ok()) return 0;
    EXPECT_GT(dumped->bytes, 0u);
    EXPECT_GE(dumped->ms, 0);
    EXPECT_EQ(StateOf(cg), "FROZEN") << "DumpRank must leave the cgroup frozen";
    EXPECT_TRUE(std::filesystem::exists(*images + "/gos-fds"));
    return steps.back();
  }

  std::optional<::gos::testing::TempDir> tmp_;
  std::string dir_;  // tmp_->path()
  std::string cgroup_root_;
  std::string shm_;
  std::vector<std::unique_ptr<FreezerCgroup>> cgroups_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

// Items 1 and 4: dump, let the original go on, kill it; restore frozen, nothing runs until the
// thaw, then the output continues right after the dump point and the exit code arrives.
TEST_F(CriuTest, RestoredRankContinuesAfterDumpPointAndExits) {
  FreezerCgroup* cg = MakeCgroup("orig");
  ASSERT_NE(cg, nullptr);
  constexpr int kSteps = 60;
  Rank* orig = LaunchCounter(cg, kSteps);
  ASSERT_NE(orig, nullptr);
  std::string images;
  const int last = FreezeAndDump(orig, cg, 5, &images);
  ASSERT_GE(last, 5);

  // The original is unharmed by the dump: it goes on from where it was.
  ASSERT_TRUE(cg->Thaw().ok());
  ASSERT_TRUE(orig->ReadUntilStdout(StepLine(last + 3))) << orig->out();
  KillRank(orig);

  FreezerCgroup* cg2 = MakeCgroup("restored");
  ASSERT_NE(cg2, nullptr);
  ASSERT_TRUE(cg2->Freeze().ok());
  Rank* restored = RestoreIn(cg2, images);
  ASSERT_NE(restored, nullptr);

  // The restored init is our child, and it and the rank are in the new cgroup.
  EXPECT_EQ(ParentOf(restored->pid()), ::getpid());
  std::vector<pid_t> pids = cg2->Pids();
  EXPECT_EQ(pids.size(), 2u);
  EXPECT_TRUE(std::find(pids.begin(), pids.end(), restored->pid()) != pids.end());

  // Frozen: no step is written.
  EXPECT_FALSE(restored->ReadUntilStdout("step", 300ms)) << restored->out();
  EXPECT_EQ(restored->out(), "");
  EXPECT_EQ(StateOf(cg2), "FROZEN");

  ASSERT_TRUE(cg2->Thaw().ok());
  ASSERT_TRUE(restored->ReadToEof()) << restored->out() << restored->err();
  std::vector<int> steps = Steps(restored->out());
  ASSERT_FALSE(steps.empty()) << restored->err();
  EXPECT_EQ(steps.front(), last + 1) << restored->out();
  EXPECT_EQ(steps.back(), kSteps);
  EXPECT_EQ(steps.size(), static_cast<size_t>(kSteps - last));
  auto init_status = restored->Wait();
  ASSERT_TRUE(init_status.has_value());
  int rank_status = restored->RankStatus();
  ASSERT_TRUE(WIFEXITED(rank_status)) << DescribeWaitStatus(rank_status);
  EXPECT_EQ(WEXITSTATUS(rank_status), kExitCode);
  EXPECT_TRUE(WIFEXITED(*init_status) && WEXITSTATUS(*init_status) == kExitCode)
      << DescribeWaitStatus(*init_status);
}

// Item 2: the original keeps running while its copy is restored (fresh PID namespace).
TEST_F(CriuTest, RestoreNextToRunningOriginal) {
  FreezerCgroup* cg = MakeCgroup("orig");
  ASSERT_NE(cg, nullptr);
  Rank* orig = LaunchCounter(cg, 1000);
  ASSERT_NE(orig, nullptr);
  std::string images;
  const int last = FreezeAndDump(orig, cg, 3, &images);
  ASSERT_GE(last, 3);
  ASSERT_TRUE(cg->Thaw().ok());

  FreezerCgroup* cg2 = MakeCgroup("copy");
  ASSERT_NE(cg2, nullptr);
  Rank* copy = RestoreIn(cg2, images);
  ASSERT_NE(copy, nullptr);
  EXPECT_NE(copy->pid(), orig->pid());

  // Both count on, each on its own pipe, from the same point.
  ASSERT_TRUE(copy->ReadUntilStdout(StepLine(last + 5))) << copy->out() << copy->err();
  ASSERT_TRUE(orig->ReadUntilStdout(StepLine(last + 5))) << orig->out();
  EXPECT_EQ(Steps(copy->out()).front(), last + 1);
  EXPECT_EQ(cg->Pids().size(), 2u);
  EXPECT_EQ(cg2->Pids().size(), 2u);
}

// Item 3: a rank mapping a /dev/shm file MAP_SHARED restores once the file is back at its path
// with its size, and the restored mapping is that file.
TEST_F(CriuTest, RankWithSharedMappingRestores) {
  shm_ = "/dev/shm/gos-criu-test-" + std::to_string(::getpid());
  {
    std::ofstream f(shm_, std::ios::binary);
    f << std::string(4096, '\0');
  }
  FreezerCgroup* cg = MakeCgroup("orig");
  ASSERT_NE(cg, nullptr);
  Rank* orig = LaunchCounter(cg, 1000, shm_);
  ASSERT_NE(orig, nullptr);
  std::string images;
  const int last = FreezeAndDump(orig, cg, 3, &images);
  ASSERT_GE(last, 3);
  const std::string saved = ReadFile(shm_);
  ASSERT_EQ(saved.size(), 4096u);
  uint64_t at_dump;
  std::memcpy(&at_dump, saved.data(), sizeof at_dump);
  // The rank stores a step just before it prints it.
  EXPECT_TRUE(at_dump == static_cast<uint64_t>(last) || at_dump == static_cast<uint64_t>(last) + 1)
      << at_dump << " in the file, last step printed " << last;

  // The node "fails": the rank and its channel file are gone; the file is recreated.
  KillRank(orig);
  ASSERT_EQ(::unlink(shm_.c_str()), 0);
  {
    std::ofstream f(shm_, std::ios::binary);
    f << saved;
  }

  FreezerCgroup* cg2 = MakeCgroup("restored");
  ASSERT_NE(cg2, nullptr);
  ASSERT_TRUE(cg2->Freeze().ok());
  Rank* restored = RestoreIn(cg2, images);
  ASSERT_NE(restored, nullptr);
  ASSERT_TRUE(cg2->Thaw().ok());
  ASSERT_TRUE(restored->ReadUntilStdout(StepLine(last + 3))) << restored->out() << restored->err();
  EXPECT_EQ(Steps(restored->out()).front(), last + 1);
  // The restored rank writes through its mapping into the recreated file.
  ASSERT_TRUE(cg2->Freeze().ok());
  std::ifstream in(shm_, std::ios::binary);
  uint64_t now = 0;
  in.read(reinterpret_cast<char*>(&now), sizeof now);
  EXPECT_GE(now, static_cast<uint64_t>(last + 3));
}

// Item 5: failures are errors that show criu's log, and come back promptly.
TEST_F(CriuTest, DumpOfMissingPidFailsWithLog) {
  pid_t missing = 4'000'000;
  while (::kill(missing, 0) == 0 || errno != ESRCH) ++missing;
  FreezerCgroup* cg = MakeCgroup("empty");
  ASSERT_NE(cg, nullptr);
  std::string images = NewImagesDir("images");
  auto start = testing::Clock::now();
  auto dumped = DumpRank({.init_pid = missing, .images_dir = images, .freezer_cgroup = cg->path()});
  EXPECT_LT(testing::Clock::now() - start, 30s);
  ASSERT_FALSE(dumped.ok());
  const std::string& msg = dumped.status().message();
  EXPECT_NE(msg.find(std::to_string(missing)), std::string::npos) << msg;
  EXPECT_NE(msg.find("dump.log"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Error"), std::string::npos) << "no criu error lines in: " << msg;
}

// on_running hands out criu's pidfd while criu runs: killing criu through it fails the dump at
// once (as the nodeagent does when a job is killed mid-dump), and the rank is unharmed.
TEST_F(CriuTest, DumpKilledThroughItsPidfdFails) {
  FreezerCgroup* cg = MakeCgroup("killed");
  ASSERT_NE(cg, nullptr);
  Rank* rank = LaunchCounter(cg, 1000);
  ASSERT_NE(rank, nullptr);
  ASSERT_TRUE(rank->ReadUntilStdout(StepLine(2))) << rank->out();
  ASSERT_TRUE(cg->Freeze().ok());
  std::vector<int> seen;
  DumpRequest req{
      .init_pid = rank->pid(), .images_dir = NewImagesDir("images"), .freezer_cgroup = cg->path()};
  req.on_running = [&](int pidfd) {
    seen.push_back(pidfd);
    if (pidfd >= 0) {
      EXPECT_EQ(::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0), 0);
    }
  };
  auto dumped = DumpRank(req);
  ASSERT_FALSE(dumped.ok());
  EXPECT_NE(dumped.status().message().find("killed by signal 9"), std::string::npos)
      << dumped.status().ToString();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_GE(seen[0], 0);
  EXPECT_EQ(seen[1], -1);
  // criu died before it touched the rank, or released it as it died: it counts on.
  ASSERT_TRUE(cg->Thaw().ok());
  const int last = Steps(rank->out()).back();
  EXPECT_TRUE(rank->ReadUntilStdout(StepLine(last + 2))) << rank->out();
}

// Whether the page at addr of this process is in memory (/proc/self/pagemap, bit 63).
bool PageMapped(const void* addr) {
  int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint64_t entry = 0;
  const off_t at = static_cast<off_t>(reinterpret_cast<uintptr_t>(addr) / 4096 * 8);
  const bool read = ::pread(fd, &entry, sizeof(entry), at) == sizeof(entry);
  ::close(fd);
  return read && (entry >> 63) != 0;
}

// gos's CRIU (scripts/criu-patches/0003) writes a pages image over a file of that name already
// in the images dir instead of truncating it: a shared mapping of that file keeps its pages
// (truncation would have unmapped them), the file ends where the dump does, and the rank
// restores from it.
TEST_F(CriuTest, DumpWritesOverPagesImagesLeftInItsDir) {
  FreezerCgroup* cg = MakeCgroup("twice");
  ASSERT_NE(cg, nullptr);
  Rank* orig = LaunchCounter(cg, 1000);
  ASSERT_NE(orig, nullptr);
  std::string first;
  ASSERT_GE(FreezeAndDump(orig, cg, 3, &first), 3);
  ASSERT_TRUE(cg->Thaw().ok());
  const int seen = Steps(orig->out()).back();
  ASSERT_TRUE(orig->ReadUntilStdout(StepLine(seen + 3))) << orig->out();
  ASSERT_TRUE(cg->Freeze().ok());
  orig->ReadUntilStdout("no such line", 100ms);
  const int last = Steps(orig->out()).back();

  // The first dump's pages images go into the second dump's dir, one of them mapped, with a
  // tail the second dump will not write.
  const std::string second = NewImagesDir("second");
  std::vector<std::string> moved;
  for (const auto& e : std::filesystem::directory_iterator(first)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("pages-", 0) != 0) continue;
    ASSERT_EQ(::rename(e.path().c_str(), (second + "/" + name).c_str()), 0);
    moved.push_back(second + "/" + name);
  }
  ASSERT_FALSE(moved.empty());
  std::sort(moved.begin(), moved.end());
  const std::string& target = moved.back();
  struct stat before {};
  ASSERT_EQ(::stat(target.c_str(), &before), 0);
  ASSERT_GE(before.st_size, 4096);
  ASSERT_EQ(::truncate(target.c_str(), before.st_size + (1 << 20)), 0);
  int fd = ::open(target.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(map, MAP_FAILED);
  volatile char first_byte = *static_cast<const char*>(map);
  (void)first_byte;
  ASSERT_TRUE(PageMapped(map));

  auto dumped =
      DumpRank({.init_pid = orig->pid(), .images_dir = second, .freezer_cgroup = cg->path()});
  ASSERT_TRUE(dumped.ok()) << dumped.status().ToString();
  EXPECT_TRUE(PageMapped(map)) << target << " was truncated, not written over";
  ::munmap(map, 4096);
  struct stat after {};
  ASSERT_EQ(::stat(target.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_size % 4096, 0);
  EXPECT_LT(after.st_size, before.st_size + (1 << 20)) << "the stale tail was not cut off";
  KillRank(orig);

  FreezerCgroup* cg2 = MakeCgroup("again");
  ASSERT_NE(cg2, nullptr);
  Rank* restored = RestoreIn(cg2, second);
  ASSERT_NE(restored, nullptr);
  ASSERT_TRUE(cg2->Thaw().ok());
  ASSERT_TRUE(restored->ReadUntilStdout(StepLine(last + 2))) << restored->out();
  EXPECT_EQ(Steps(restored->out()).front(), last + 1) << restored->out();
}

// gos's CRIU (scripts/criu-patches/0004) leaves pages of private anonymous memory that hold
// only zeros out of the dump; restored, they read as zero. criu_zeros has 8 MiB of data and
// 16 MiB of zeroed pages, and a copy-on-write child whose own copy differs from its parent's
// (zero where the parent has data, data on one zero page): the images hold about the 14 MiB
// of non-zero pages, not the 48 MiB resident, and both processes find every byte they had.
TEST_F(CriuTest, ZeroPagesAreLeftOutAndRestoreAsZero) {
  FreezerCgroup* cg = MakeCgroup("zeros");
  ASSERT_NE(cg, nullptr);
  const std::string go = dir_ + "/go";
  Rank* orig = LaunchIn(cg, "criu_zeros", {"criu_zeros", go});
  ASSERT_NE(orig, nullptr);
  ASSERT_TRUE(orig->ReadUntilStdout("ready\nready\n")) << orig->out() << orig->err();
  ASSERT_TRUE(cg->Freeze().ok());
  const std::string images = NewImagesDir("images");
  auto dumped =
      DumpRank({.init_pid = orig->pid(), .images_dir = images, .freezer_cgroup = cg->path()});
  ASSERT_TRUE(dumped.ok()) << dumped.status().ToString();
  uint64_t pages_bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(images)) {
    if (e.path().filename().string().rfind("pages-", 0) == 0) pages_bytes += e.file_size();
  }
  constexpr uint64_t kMiB = 1 << 20;
  EXPECT_GE(pages_bytes, 14 * kMiB) << "pages with data are missing";
  EXPECT_LT(pages_bytes, 20 * kMiB) << "zero pages were dumped";
  KillRank(orig);

  FreezerCgroup* cg2 = MakeCgroup("zeros-restored");
  ASSERT_NE(cg2, nullptr);
  Rank* restored = RestoreIn(cg2, images);
  ASSERT_NE(restored, nullptr);
  // Restored, the zero pages are not there at all (gos's CRIU faults in only the ranges its
  // images hold, scripts/criu-patches/0005): the parent's anonymous memory is its 8 MiB of
  // data and little more, not the 24 MiB it had resident.
  {
    std::ifstream kids("/proc/" + std::to_string(restored->pid()) + "/task/" +
                       std::to_string(restored->pid()) + "/children");
    pid_t parent = 0;
    ASSERT_TRUE(kids >> parent) << "the restored init has no child";
    std::ifstream status("/proc/" + std::to_string(parent) + "/status");
    uint64_t rss_kib = 0;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("RssAnon:", 0) == 0) rss_kib = std::stoull(line.substr(8));
    }
    EXPECT_GE(rss_kib, 8 * 1024u);
    EXPECT_LT(rss_kib, 12 * 1024u) << "zero pages were faulted in by the restore";
  }
  ASSERT_TRUE(cg2->Thaw().ok());
  std::ofstream(go).put('\n');
  ASSERT_TRUE(restored->ReadToEof()) << restored->out() << restored->err();
  EXPECT_EQ(restored->out(), "parent ok\nchild ok\n") << restored->err();
  restored->Wait();
  const int status = restored->RankStatus();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << DescribeWaitStatus(status);
}

TEST_F(CriuTest, RestoreWithoutImagesFails) {
  FreezerCgroup* cg = MakeCgroup("empty");
  ASSERT_NE(cg, nullptr);
  std::string images = NewImagesDir("images");
  // An empty dir is not a DumpRank image dir.
  auto rp = RestoreRank({.images_dir = images, .cgroup_procs = cg->procs_file()});
  ASSERT_FALSE(rp.ok());
  EXPECT_NE(rp.status().message().find("gos-fds"), std::string::npos) << rp.status().ToString();
  // Fds recorded but no criu images: criu itself fails, and its log is in the message.
  std::ofstream(images + "/gos-fds") << "0 pipe:[1]\n1 pipe:[2]\n2 pipe:[3]\n3 pipe:[4]\n";
  auto start = testing::Clock::now();
  rp = RestoreRank({.images_dir = images, .cgroup_procs = cg->procs_file()});
  EXPECT_LT(testing::Clock::now() - start, 30s);
  ASSERT_FALSE(rp.ok());
  const std::string& msg = rp.status().message();
  EXPECT_NE(msg.find("restore.log"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Error"), std::string::npos) << "no criu error lines in: " << msg;
  EXPECT_TRUE(cg->Pids().empty());
}

}  // namespace
}  // namespace gos::nodeagent
