// The bootstrap service over real TCP sockets: group formation, id assignment, rejection of
// malformed and oversized frames, DOWN notices when a member's connection dies, and a node
// that was down joining again (UP to every member, WELCOME once all acknowledged).
#include "gos/prim/bootstrap.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libgos/prim/bootstrap_proto.h"

namespace gos::prim {
namespace {

using namespace std::chrono_literals;

class RawClient {
 public:
  explicit RawClient(const std::string& addr) {
    auto fd = bootstrap::ConnectTcp(addr, std::chrono::steady_clock::now() + 5s);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    fd_ = fd.ok() ? *fd : -1;
  }
  ~RawClient() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void SendRaw(const std::vector<uint8_t>& b) { ASSERT_TRUE(bootstrap::WriteAll(fd_, b).ok()); }
  void Join(NodeId want, const std::string& provider = "tcp;ofi_rxm") {
    bootstrap::Join j;
    j.requested_id = want;
    j.provider = provider;
    j.global_memory_bytes = 1 << 20;
    j.self.pid = getpid();
    j.self.host = "test";
    j.self.fabric_name = {1, 2, 3, 4};
    SendRaw(bootstrap::EncodeFrame(bootstrap::FrameType::kJoin, bootstrap::EncodeJoin(j)));
  }
  // UP_ACK: this member can reach node `id` again.
  void AckUp(NodeId id) {
    SendRaw(bootstrap::EncodeFrame(bootstrap::FrameType::kUpAck, bootstrap::EncodeUpAck(id)));
  }
  // Next frame within the timeout; false on timeout or EOF.
  bool Read(bootstrap::Frame* f, std::chrono::milliseconds timeout = 5s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      auto got = in_.Next(f);
      if (!got.ok()) return false;
      if (*got) return true;
      int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
      if (ms <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, ms) <= 0) return false;
      uint8_t buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return false;
      in_.Append(buf, static_cast<size_t>(n));
    }
  }

 private:
  int fd_ = -1;
  bootstrap::FrameBuffer in_;
};

// A new connection's JOIN asking for `want`: the reason of the REJECT it gets, or a failure
// naming what came instead.
::testing::AssertionResult JoinIsRejected(const std::string& address, NodeId want,
                                          std::string* reason,
                                          const std::string& provider = "tcp;ofi_rxm") {
  RawClient c(address);
  c.Join(want, provider);
  bootstrap::Frame f;
  if (!c.Read(&f)) return ::testing::AssertionFailure() << "no answer to JOIN " << want;
  if (f.type != bootstrap::FrameType::kReject) {
    return ::testing::AssertionFailure()
           << "JOIN " << want << " got frame type " << static_cast<int>(f.type);
  }
  auto text = bootstrap::DecodeText(f.payload);
  if (!text.ok()) return ::testing::AssertionFailure() << text.status().ToString();
  *reason = *text;
  return ::testing::AssertionSuccess();
}

std::unique_ptr<BootstrapServer> StartServer(uint32_t size,
                                             std::chrono::milliseconds timeout = 2s) {
  BootstrapOptions o;
  o.group_size = size;
  o.failure_timeout = timeout;
  auto s = BootstrapServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

TEST(BootstrapTest, GroupFormsWithRequestedAndAssignedIds) {
  auto server = StartServer(3);
  RawClient a(server->address()), b(server->address()), c(server->address());
  a.Join(2);
  b.Join(kNoNode);
  c.Join(kNoNode);
  for (RawClient* cl : {&a, &b, &c}) {
    bootstrap::Frame f;
    ASSERT_TRUE(cl->Read(&f));
    ASSERT_EQ(f.type, bootstrap::FrameType::kWelcome);
    auto w = bootstrap::DecodeWelcome(f.payload);
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(w->peers.size(), 3u);
    if (cl == &a) {
      EXPECT_EQ(w->id, 2u);
    }
  }
}

TEST(BootstrapTest, ClosedMemberIsAnnouncedDown) {
  auto server = StartServer(2);
  RawClient a(server->address()), b(server->address());
  a.Join(0);
  b.Join(1);
  bootstrap::Frame f;
  ASSERT_TRUE(a.Read(&f));
  ASSERT_TRUE(b.Read(&f));
  b.Close();
  ASSERT_TRUE(a.Read(&f));
  ASSERT_EQ(f.type, bootstrap::FrameType::kDown);
  auto d = bootstrap::DecodeDown(f.payload);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->node, 1u);
  EXPECT_NE(d->reason.find("closed"), std::string::npos) << d->reason;
  EXPECT_EQ(server->down_count(), 1u);
}

TEST(BootstrapTest, SilentMemberIsAnnouncedDownAfterTimeout) {
  auto server = StartServer(2, 300ms);
  RawClient a(server->address()), b(server->address());
  a.Join(0);
  b.Join(1);
  bootstrap::Frame f;
  ASSERT_TRUE(a.Read(&f));
  ASSERT_TRUE(b.Read(&f));
  auto t0 = std::chrono::steady_clock::now();
  // a keeps beating; b says nothing.
  bool down = false;
  while (!down && std::chrono::steady_clock::now() - t0 < 5s) {
    a.SendRaw(bootstrap::EncodeFrame(bootstrap::FrameType::kHeartbeat, {}));
    if (a.Read(&f, 50ms)) {
      ASSERT_EQ(f.type, bootstrap::FrameType::kDown);
      auto d = bootstrap::DecodeDown(f.payload);
      ASSERT_TRUE(d.ok());
      EXPECT_EQ(d->node, 1u);
      EXPECT_NE(d->reason.find("no heartbeat"), std::string::npos) << d->reason;
      down = true;
    }
  }
  EXPECT_TRUE(down);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
}

TEST(BootstrapTest, MalformedAndOversizedFramesAreRejected) {
  auto server = StartServer(2);
  std::vector<std::vector<uint8_t>> bad = {
      {0xff, 0xff, 0xff, 0x7f, 1, 0, 1, 0},  // Oversized length.
      {2, 0, 0, 0, 1, 0},                    // Length below minimum.
      bootstrap::EncodeFrame(bootstrap::FrameType::kJoin,
                             std::vector<uint8_t>{1, 2}),          // Truncated JOIN.
      bootstrap::EncodeFrame(bootstrap::FrameType::kWelcome, {}),  // Not accepted from nodes.
      {4, 0, 0, 0, 9, 0, 1, 0},                                    // Unknown version.
      {4, 0, 0, 0, 1, 0, 99, 0},                                   // Unknown type.
  };
  for (const auto& b : bad) {
    RawClient c(server->address());
    c.SendRaw(b);
    bootstrap::Frame f;
    // Either an explicit REJECT, or (for an unparseable stream) just closed.
    if (c.Read(&f, 2s)) {
      EXPECT_EQ(f.type, bootstrap::FrameType::kReject);
    }
  }
  EXPECT_EQ(server->rejected_frames(), bad.size());
  // Wrong provider / duplicate id / id outside the group.
  RawClient a(server->address());
  a.Join(0);
  std::string why;
  EXPECT_TRUE(JoinIsRejected(server->address(), 0, &why));
  EXPECT_TRUE(JoinIsRejected(server->address(), 1, &why, "shm"));
  EXPECT_NE(why.find("provider"), std::string::npos) << why;
  EXPECT_TRUE(JoinIsRejected(server->address(), 7, &why));
  // The service still forms the group.
  bootstrap::Frame f;
  RawClient b(server->address());
  b.Join(1);
  ASSERT_TRUE(a.Read(&f));
  EXPECT_EQ(f.type, bootstrap::FrameType::kWelcome);
}

// A node that died joins again under its id: every member gets UP with its new record and
// must acknowledge before the joiner's WELCOME, which lists the members still down without
// an address. Ids of members that are up, and joins when no node is down, are refused.
TEST(BootstrapTest, DownNodeJoinsAgainOnceEveryMemberAcknowledged) {
  auto server = StartServer(3);
  RawClient a(server->address()), b(server->address()), c(server->address());
  a.Join(0);
  b.Join(1);
  c.Join(2);
  bootstrap::Frame f;
  for (RawClient* cl : {&a, &b, &c}) ASSERT_TRUE(cl->Read(&f));
  c.Close();
  for (RawClient* cl : {&a, &b}) {
    ASSERT_TRUE(cl->Read(&f));
    ASSERT_EQ(f.type, bootstrap::FrameType::kDown);
  }
  // An id that is up is refused, naming why.
  std::string why;
  ASSERT_TRUE(JoinIsRejected(server->address(), 1, &why));
  EXPECT_NE(why.find("node 1 of the group of 3 is up"), std::string::npos) << why;

  RawClient again(server->address());
  again.Join(kNoNode);  // Any id: the one that is down.
  for (RawClient* cl : {&a, &b}) {
    ASSERT_TRUE(cl->Read(&f));
    ASSERT_EQ(f.type, bootstrap::FrameType::kUp);
    auto up = bootstrap::DecodeUp(f.payload);
    ASSERT_TRUE(up.ok());
    EXPECT_EQ(up->id, 2u);
    EXPECT_EQ(up->fabric_name, (std::vector<uint8_t>{1, 2, 3, 4}));
  }
  // No WELCOME until both members acknowledged.
  a.AckUp(2);
  EXPECT_FALSE(again.Read(&f, 300ms));
  b.AckUp(2);
  ASSERT_TRUE(again.Read(&f));
  ASSERT_EQ(f.type, bootstrap::FrameType::kWelcome);
  auto w = bootstrap::DecodeWelcome(f.payload);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->id, 2u);
  ASSERT_EQ(w->peers.size(), 3u);
  for (const auto& p : w->peers) EXPECT_FALSE(p.fabric_name.empty()) << "node " << p.id;

  // Now nobody is down: another join is refused.
  ASSERT_TRUE(JoinIsRejected(server->address(), kNoNode, &why));
  EXPECT_NE(why.find("no node is down"), std::string::npos) << why;

  // A member down while another joins again: the joiner's WELCOME lists it without an
  // address, and nobody waits for its acknowledgement.
  b.Close();
  ASSERT_TRUE(a.Read(&f));
  ASSERT_EQ(f.type, bootstrap::FrameType::kDown);
  ASSERT_TRUE(again.Read(&f));
  ASSERT_EQ(f.type, bootstrap::FrameType::kDown);
  again.Close();
  ASSERT_TRUE(a.Read(&f));
  ASSERT_EQ(f.type, bootstrap::FrameType::kDown);
  RawClient third(server->address());
  third.Join(2);
  ASSERT_TRUE(a.Read(&f));
  ASSERT_EQ(f.type, bootstrap::FrameType::kUp);
  a.AckUp(2);
  ASSERT_TRUE(third.Read(&f));
  ASSERT_EQ(f.type, bootstrap::FrameType::kWelcome);
  w = bootstrap::DecodeWelcome(f.payload);
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->peers[0].fabric_name.empty());
  EXPECT_TRUE(w->peers[1].fabric_name.empty());
  EXPECT_FALSE(w->peers[2].fabric_name.empty());
}

}  // namespace
}  // namespace gos::prim
