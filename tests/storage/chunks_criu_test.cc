// Pages cut on real CRIU dumps: a process with 32 MiB of memory is dumped (--leave-running)
// before and after it rewrites 5% of that memory; the second dump's pages image must share
// all but about that 5% of its chunk bytes with the first.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "gos/storage/chunks.h"
#include "tests/support/chunk_test_util.h"

extern char** environ;

namespace gos::storage {
namespace {

namespace fs = std::filesystem;
using testing::ChunkAll;
using testing::TempDir;

constexpr char kCriu[] = "/usr/local/sbin/criu";

std::string TestBinDir() {
  const char* d = std::getenv("GOS_TEST_BIN_DIR");
  if (d != nullptr && *d != '\0') return d;
  return fs::read_symlink("/proc/self/exe").parent_path().string();
}

// Runs argv to completion; its exit status.
int RunToExit(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execve(argv[0], argv.data(), environ);
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Waits (with a deadline) until the state file holds gen.
bool WaitState(const std::string& path, int gen) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream f(path);
    int v = 0;
    if (f >> v && v == gen) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// The memproc child, in a session of its own (CRIU then needs no --shell-job); killed and
// reaped on destruction.
class MemProc {
 public:
  MemProc(const std::string& state, size_t mib, size_t off, size_t len) {
    const std::string bin = TestBinDir() + "/storage_test_memproc";
    std::vector<std::string> args = {bin, state, std::to_string(mib), std::to_string(off),
                                     std::to_string(len)};
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setsid();
      ::execve(argv[0], argv.data(), environ);
      ::_exit(127);
    }
  }
  ~MemProc() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// The one pages-<id>.img of a single-process dump.
std::string PagesImage(const std::string& dir) {
  std::string found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.starts_with("pages-") && n.ends_with(".img")) {
      EXPECT_TRUE(found.empty()) << "two pages images in " << dir;
      found = n;
    }
  }
  return found;
}

TEST(ChunkCriuTest, SecondDumpSharesAllButTheDirtiedPages) {
  if (::geteuid() != 0 || ::access(kCriu, X_OK) != 0) GTEST_SKIP() << "needs root and " << kCriu;
  TempDir tmp;
  constexpr size_t kMiB = 32;
  constexpr size_t kDirtyOff = (8u << 20) + 3 * 4096;  // not 64 KiB-aligned
  constexpr size_t kDirtyLen = 410 * 4096;             // 5% of 32 MiB, contiguous
  const std::string state = tmp.Sub("state");
  MemProc proc(state, kMiB, kDirtyOff, kDirtyLen);
  ASSERT_TRUE(WaitState(state, 1));

  const std::string d1 = tmp.Sub("d1"), d2 = tmp.Sub("d2");
  ASSERT_EQ(::mkdir(d1.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(d2.c_str(), 0700), 0);
  const std::string pid = std::to_string(proc.pid());
  ASSERT_EQ(RunToExit({kCriu, "dump", "-t", pid, "-D", d1, "--leave-running", "-o", "dump.log"}), 0)
      << "criu dump failed; see " << d1 << "/dump.log";
  ASSERT_EQ(::kill(proc.pid(), SIGUSR1), 0);
  ASSERT_TRUE(WaitState(state, 2));
  ASSERT_EQ(RunToExit({kCriu, "dump", "-t", pid, "-D", d2, "--leave-running", "-o", "dump.log"}), 0)
      << "criu dump failed; see " << d2 << "/dump.log";

  const std::string p1 = PagesImage(d1), p2 = PagesImage(d2);
  ASSERT_FALSE(p1.empty());
  ASSERT_FALSE(p2.empty());
  const FileEntry a = ChunkAll(d1, p1);
  const FileEntry b = ChunkAll(d2, p2);
  ASSERT_GE(b.size, kMiB << 20);

  // Cut by the pagemap, not by content: no chunk over 64 KiB, and single pages of small
  // mappings are chunks of their own (content cuts are never under 16 KiB but at the end).
  size_t small = 0;
  for (const ChunkRef& c : b.chunks) {
    EXPECT_LE(c.raw_len, 64u << 10);
    EXPECT_EQ(c.raw_len % 4096, 0u);
    if (c.raw_len < (16u << 10)) ++small;
  }
  EXPECT_GT(small, 1u);

  std::set<ChunkHash> old;
  for (const ChunkRef& c : a.chunks) old.insert(c.hash);
  uint64_t fresh = 0;
  for (const ChunkRef& c : b.chunks) {
    if (!old.count(c.hash)) fresh += c.raw_len;
  }
  // The dirtied range, rounded out to 64 KiB at both ends, plus the pages the process and
  // the dump itself touch (stack, libc data): well under a MiB.
  EXPECT_GE(fresh, kDirtyLen);
  EXPECT_LE(fresh, kDirtyLen + 2 * (64u << 10) + (512u << 10));
  std::printf("pages image %llu bytes, %zu chunks; %llu bytes in new chunks (dirtied %zu)\n",
              static_cast<unsigned long long>(b.size), b.chunks.size(),
              static_cast<unsigned long long>(fresh), kDirtyLen);

  // Every other image file chunks by content and round-trips too.
  for (const auto& e : fs::directory_iterator(d2)) {
    const std::string n = e.path().filename().string();
    if (n != p2 && e.is_regular_file()) ChunkAll(d2, n);
  }
}

}  // namespace
}  // namespace gos::storage
