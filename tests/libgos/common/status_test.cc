#include "gos/status.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <thread>

#include "gos/log.h"

namespace gos {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  GOS_ASSIGN_OR_RETURN(int h, Half(x));
  GOS_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  GOS_RETURN_IF_ERROR(Half(x).status());
  return OkStatus();
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(OkStatus().ok());
  Status s = UnavailableError("node 3 is down");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.ToString(), "UNAVAILABLE: node 3 is down");
  EXPECT_EQ(s.WithContext("CAW").message(), "CAW: node 3 is down");
}

TEST(StatusTest, MacrosPropagate) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd: 3");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), StatusCode::kInvalidArgument);
}

TEST(StatusTest, ErrnoMapping) {
  EXPECT_EQ(ErrnoError(ECONNREFUSED, "connect").code(), StatusCode::kUnavailable);
  EXPECT_EQ(ErrnoError(ENOENT, "open x").code(), StatusCode::kNotFound);
  EXPECT_NE(ErrnoError(ENOENT, "open x").message().find("open x: "), std::string::npos);
}

// The daemons name their threads; names longer than the kernel's 15 characters are cut.
TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  auto comm = [](pid_t tid) {
    std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::string name;
    std::getline(in, name);
    return name;
  };
  const std::string main_name = comm(gettid());
  std::string seen, seen_long;
  std::thread t([&] {
    SetThreadName("agent-strobe");
    seen = comm(gettid());
    SetThreadName("a-name-longer-than-fifteen");
    seen_long = comm(gettid());
  });
  t.join();
  EXPECT_EQ(seen, "agent-strobe");
  EXPECT_EQ(seen_long, "a-name-longer-t");
  EXPECT_EQ(comm(gettid()), main_name);
}

}  // namespace
}  // namespace gos
