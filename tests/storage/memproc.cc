// A process with a known memory image, for the chunker test's CRIU dumps:
//   storage_test_memproc <state-file> <mib> <dirty-offset-bytes> <dirty-bytes>
// maps <mib> MiB of anonymous memory filled with pseudo-random bytes and writes "1" to
// <state-file>. On each SIGUSR1 it overwrites [dirty-offset, +dirty-bytes) of that memory with
// new pseudo-random bytes and writes the next generation number. Exits on SIGTERM.
#include <signal.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

volatile sig_atomic_t g_dirty = 0;

void OnUsr1(int) { g_dirty = 1; }

void Fill(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<uint8_t>(x >> 24);
  }
}

// Written to a temporary name and renamed, so the reader never sees a partial number.
void WriteState(const std::string& path, int gen) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) std::exit(2);
  std::fprintf(f, "%d", gen);
  std::fclose(f);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  const std::string state = argv[1];
  const size_t bytes = std::strtoull(argv[2], nullptr, 10) << 20;
  const size_t off = std::strtoull(argv[3], nullptr, 10);
  const size_t len = std::strtoull(argv[4], nullptr, 10);
  if (off + len > bytes) return 2;
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 3;
  auto* p = static_cast<uint8_t*>(mem);
  Fill(p, bytes, 1);

  sigset_t usr1, old;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigprocmask(SIG_BLOCK, &usr1, &old);
  struct sigaction sa = {};
  sa.sa_handler = OnUsr1;
  sigaction(SIGUSR1, &sa, nullptr);
  int gen = 1;
  WriteState(state, gen);
  for (;;) {
    sigsuspend(&old);
    if (g_dirty) {
      g_dirty = 0;
      Fill(p + off, len, static_cast<uint64_t>(++gen));
      WriteState(state, gen);
    }
  }
}
