// Stopping a node's users promptly: prim::Node::CancelWaits ends TEST-EVENTs under way and to
// come, and NodeOptions::cancel ends a Join that waits for a group that will not form. Real
// bootstrap service, real libfabric endpoint (one node in this process).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "gos/prim/bootstrap.h"
#include "gos/prim/prim.h"

namespace gos::prim {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::unique_ptr<BootstrapServer> Server(uint32_t size) {
  BootstrapOptions o;
  o.group_size = size;
  auto s = BootstrapServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(PrimCancelTest, CancelWaitsEndsEveryWaitAtOnce) {
  auto server = Server(1);
  ASSERT_NE(server, nullptr);
  NodeOptions o;
  o.bootstrap = server->address();
  o.global_memory_bytes = 1 << 20;
  auto node = Node::Join(o);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  // Two threads wait for events nobody will signal, with long timeouts.
  auto wait = [&](EventId e) {
    return std::async(std::launch::async, [&node, e] {
      const auto start = Clock::now();
      auto got = (*node)->WaitEvent(e, 60s);
      return std::make_pair(got.ok() ? Status() : got.status(), Clock::now() - start);
    });
  };
  auto a = wait(3), b = wait(4);
  std::this_thread::sleep_for(100ms);
  (*node)->CancelWaits();
  for (auto* f : {&a, &b}) {
    ASSERT_EQ(f->wait_for(5s), std::future_status::ready) << "a wait outlived CancelWaits";
    auto [status, took] = f->get();
    EXPECT_EQ(status.code(), StatusCode::kCancelled) << status.ToString();
    EXPECT_LT(took, 5s);
  }
  // And every later one, even a poll.
  auto later = (*node)->TestEvent(5);
  EXPECT_EQ(later.status().code(), StatusCode::kCancelled);
  (*node)->Leave();
}

TEST(PrimCancelTest, CancelFlagEndsAJoinThatWouldWait) {
  auto server = Server(2);  // a second member never comes
  ASSERT_NE(server, nullptr);
  std::atomic<bool> cancel{false};
  NodeOptions o;
  o.bootstrap = server->address();
  o.global_memory_bytes = 1 << 20;
  o.join_timeout = 60s;
  o.cancel = &cancel;
  auto join = std::async(std::launch::async, [&] {
    const auto start = Clock::now();
    auto node = Node::Join(o);
    return std::make_pair(node.ok() ? Status() : node.status(), Clock::now() - start);
  });
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(join.wait_for(0s), std::future_status::timeout) << "the group formed with 1 of 2";
  cancel = true;
  ASSERT_EQ(join.wait_for(5s), std::future_status::ready) << "Join ignored its cancel flag";
  auto [status, took] = join.get();
  EXPECT_EQ(status.code(), StatusCode::kCancelled) << status.ToString();
  EXPECT_LT(took, 5s);
}

}  // namespace
}  // namespace gos::prim
