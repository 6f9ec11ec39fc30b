// CrashWatch with real processes: a crash is held at the faulting instruction (stopped, traced
// by nobody, re-executing the fault when continued), signals the program handles go through,
// a crashing thread holds its whole process, and Release lets stopped ranks go. Each "rank"
// is the only child of an "init" process, as under gos-rank-init.
#include "nodeagent/crash_watch.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gos::nodeagent {
namespace {

using namespace std::chrono_literals;

bool PollUntil(const std::function<bool()>& f, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return f();
}

std::string StatusField(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) {
      size_t v = line.find_first_not_of(" \t", field.size() + 1);
      return v == std::string::npos ? "" : line.substr(v);
    }
  }
  return "";
}

char State(pid_t pid) {
  std::string s = StatusField(pid, "State");
  return s.empty() ? '?' : s[0];
}

// Waits (in the child) until a tracer has seized this process.
void WaitTraced() {
  while (StatusField(getpid(), "TracerPid") == "0") usleep(1000);
}

__attribute__((noinline)) void WriteNull() {
  volatile int* volatile p = nullptr;
  *p = 1;
}

std::atomic<int> g_usr1{0};
void OnUsr1(int) { g_usr1++; }
void OnSegv(int) { _exit(42); }

// "init": forks the rank, which runs body; reports the rank's pid on a pipe, waits for it and
// exits with its status's code (128 + signal if it was killed).
struct Family {
  pid_t init = -1;
  pid_t rank = -1;
};

Family Spawn(void (*body)()) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  Family f;
  f.init = fork();
  if (f.init == 0) {
    pid_t r = fork();
    if (r == 0) {
      body();
      _exit(0);
    }
    ssize_t n = write(fds[1], &r, sizeof r);
    (void)n;
    int st = 0;
    while (waitpid(r, &st, 0) < 0) {
    }
    _exit(WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st));
  }
  close(fds[1]);
  if (read(fds[0], &f.rank, sizeof f.rank) != sizeof f.rank) f.rank = -1;
  close(fds[0]);
  return f;
}

int WaitInit(pid_t init) {
  int st = 0;
  if (waitpid(init, &st, 0) != init) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

class CrashWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (or ptrace rights over the children)";
    watch_ = std::make_unique<CrashWatch>([this](const Crash& c) {
      std::lock_guard<std::mutex> lock(mu_);
      crashes_.push_back(c);
    });
  }
  std::optional<Crash> WaitCrash(std::chrono::milliseconds limit = 10s) {
    std::optional<Crash> out;
    PollUntil(
        [&] {
          std::lock_guard<std::mutex> lock(mu_);
          if (!crashes_.empty()) out = crashes_.front();
          return out.has_value();
        },
        limit);
    return out;
  }
  size_t Crashes() {
    std::lock_guard<std::mutex> lock(mu_);
    return crashes_.size();
  }

  std::unique_ptr<CrashWatch> watch_;
  std::mutex mu_;
  std::vector<Crash> crashes_;
};

TEST_F(CrashWatchTest, SegfaultIsHeldAtTheFaultAndReexecutedOnContinue) {
  Family f = Spawn([] {
    WaitTraced();
    WriteNull();
  });
  ASSERT_GT(f.rank, 0);
  watch_->Watch(7, 3, f.init, getuid(), getgid());
  auto c = WaitCrash();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->job, 7u);
  EXPECT_EQ(c->rank, 3u);
  EXPECT_EQ(c->pid, f.rank);
  EXPECT_EQ(c->signo, SIGSEGV);
  EXPECT_EQ(c->code, SEGV_MAPERR);
  EXPECT_EQ(c->addr, 0u);
  EXPECT_NE(c->pc, 0u);
  EXPECT_NE(DescribeCrash(*c).find("SIGSEGV (Segmentation fault, SEGV_MAPERR) at address 0x0"),
            std::string::npos)
      << DescribeCrash(*c);
  // Stopped, traced by nobody: a debugger can take it.
  EXPECT_TRUE(PollUntil([&] { return State(f.rank) == 'T'; }));
  EXPECT_EQ(StatusField(f.rank, "TracerPid"), "0");
  // gdb shows the faulting function, and leaves the rank stopped.
  std::string frames = TopFrames(f.rank, getuid(), getgid(), 4, 20s);
  if (frames.find("gdb is not installed") == std::string::npos) {
    EXPECT_NE(frames.find("WriteNull"), std::string::npos) << frames;
  }
  EXPECT_TRUE(PollUntil([&] { return State(f.rank) == 'T'; }));  // gdb's detach re-stops it
  // Continued, it executes the faulting instruction again, and dies of it (nobody holds it).
  watch_->Forget(7);
  ::kill(f.rank, SIGCONT);
  EXPECT_EQ(WaitInit(f.init), 128 + SIGSEGV);
}

TEST_F(CrashWatchTest, SignalsTheProgramHandlesGoThrough) {
  Family f = Spawn([] {
    signal(SIGUSR1, OnUsr1);
    signal(SIGSEGV, OnSegv);
    WaitTraced();
    raise(SIGUSR1);
    raise(SIGUSR1);
    if (g_usr1 != 2) _exit(1);
    WriteNull();  // its handler exits 42
  });
  ASSERT_GT(f.rank, 0);
  watch_->Watch(1, 0, f.init, getuid(), getgid());
  EXPECT_EQ(WaitInit(f.init), 42);
  EXPECT_EQ(Crashes(), 0u);
}

TEST_F(CrashWatchTest, ACrashingThreadHoldsItsWholeProcess) {
  Family f = Spawn([] {
    pthread_t t;
    pthread_create(
        &t, nullptr,
        [](void*) -> void* {
          for (;;) pause();
        },
        nullptr);
    WaitTraced();
    // Both threads must be traced before the crash (the second is seized after the first).
    usleep(50 * 1000);
    pthread_t crasher;
    pthread_create(
        &crasher, nullptr,
        [](void*) -> void* {
          WriteNull();
          return nullptr;
        },
        nullptr);
    for (;;) pause();
  });
  ASSERT_GT(f.rank, 0);
  watch_->Watch(2, 1, f.init, getuid(), getgid());
  auto c = WaitCrash();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->pid, f.rank);
  EXPECT_NE(c->tid, f.rank);  // the third thread, made after the seize: followed by the clone
  // Every thread is stopped and traced by nobody.
  EXPECT_TRUE(PollUntil([&] { return State(f.rank) == 'T'; }));
  int threads = 0;
  std::string dir = "/proc/" + std::to_string(f.rank) + "/task";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const pid_t tid = std::atoi(e.path().filename().c_str());
    ++threads;
    EXPECT_TRUE(PollUntil([&] { return State(tid) == 'T'; })) << "thread " << tid;
    EXPECT_EQ(StatusField(tid, "TracerPid"), "0") << "thread " << tid;
  }
  EXPECT_EQ(threads, 3);
  ::kill(f.init, SIGKILL);
  ::kill(f.rank, SIGKILL);
  WaitInit(f.init);
}

TEST_F(CrashWatchTest, ReleaseLetsStoppedRanksGo) {
  Family f = Spawn([] {
    for (;;) pause();
  });
  ASSERT_GT(f.rank, 0);
  watch_->Watch(5, 0, f.init, getuid(), getgid());
  ASSERT_TRUE(PollUntil([&] { return StatusField(f.rank, "TracerPid") != "0"; }));
  ::kill(f.rank, SIGSTOP);
  std::promise<void> released;
  watch_->Release(5, [&] { released.set_value(); });
  ASSERT_EQ(released.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_EQ(StatusField(f.rank, "TracerPid"), "0");
  EXPECT_TRUE(PollUntil([&] { return State(f.rank) == 'T'; }));
  EXPECT_EQ(Crashes(), 0u);
  ::kill(f.rank, SIGKILL);
  EXPECT_EQ(WaitInit(f.init), 128 + SIGKILL);
}

TEST(DescribeCrashTest, NamesSignalCodeAddressAndPc) {
  Crash c;
  c.signo = SIGBUS;
  c.code = BUS_ADRERR;
  c.addr = 0x7f0000001000;
  c.pc = 0x401136;
  EXPECT_EQ(DescribeCrash(c),
            "SIGBUS (Bus error, BUS_ADRERR) at address 0x7f0000001000, pc 0x401136");
  c.signo = SIGABRT;
  c.code = SI_TKILL;
  c.addr = 0;
  EXPECT_EQ(DescribeCrash(c), "SIGABRT (Aborted, SI_TKILL), pc 0x401136");
}

}  // namespace
}  // namespace gos::nodeagent
