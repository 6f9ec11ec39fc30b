// A rank for the incremental-dump tests: its memory changes between epochs in every way the
// written-page tracking must see (docs/specs/checkpoint.md, "Incremental dumps").
//
//   criu_pages DIR
//
// Sets up, each filled with a known pattern: 16 MiB of private anonymous memory ("main"),
// 8 MiB of transparent huge pages, a private mapping of DIR/private (1 MiB), 1 MiB of shared
// anonymous memory it shares with a child it forks, 256 KiB whose protection it flips, and a
// 512 KiB region it grows and moves. The child holds main copy-on-write. Prints "ready", then
// on each SIGUSR1 takes step k = 1, 2, ... and prints "step k":
//
//   - rewrites 1% of main; MADV_DONTNEED of 8 pages of main; read(2) of 3 pages from a pipe
//     into main (written by the kernel);
//   - grows the heap with sbrk and writes the new part and a page of the old;
//   - maps a new region and writes it, unmaps half of the previous step's;
//   - grows the movable region with mremap and writes its new tail (step 2: moves it to a
//     new address first);
//   - flips the protection of the 256 KiB (odd steps: writable, written; even: read-only);
//   - writes a byte into a huge page, two pages of the private file mapping, a page of the
//     shared memory;
//   - has the child write a page of its copy of main and a page of the shared memory.
//
// The test compares every page of the tree with what it held at each epoch; the program
// itself only changes memory.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kMain = 16 * kMiB;
constexpr size_t kThp = 8 * kMiB;
constexpr size_t kFile = 1 * kMiB;
constexpr size_t kShared = 1 * kMiB;
constexpr size_t kFlip = 256 * 1024;
constexpr size_t kMovable = 512 * 1024;
constexpr size_t kGrow = 64 * 1024;

[[noreturn]] void Die(const char* what) {
  perror(what);
  _exit(2);
}

void Say(const std::string& s) {
  std::string line = s + "\n";
  if (write(STDOUT_FILENO, line.data(), line.size()) < 0) _exit(3);
}

// Page i of a region tagged `tag`, at step k: a pattern no other page has.
void Fill(unsigned char* p, size_t bytes, uint64_t tag, uint64_t k) {
  for (size_t off = 0; off < bytes; off += 8) {
    uint64_t w = (tag << 48) ^ (k << 32) ^ (off / 8) * 0x9e3779b97f4a7c15ull;
    memcpy(p + off, &w, sizeof w);
  }
}

void* Map(size_t bytes, int prot, int flags, int fd = -1) {
  void* m = mmap(nullptr, bytes, prot, flags, fd, 0);
  if (m == MAP_FAILED) Die("mmap");
  return m;
}

unsigned char* main_mem;
unsigned char* thp;
unsigned char* file_mem;
unsigned char* shared;
unsigned char* flip;
unsigned char* movable;
size_t movable_len = kMovable;
unsigned char* last_new;  // the previous step's new region
size_t last_new_len;
unsigned char* heap_first;  // the heap as it was before the first step

void ChildStep(uint64_t k) {
  Fill(main_mem + (100 + k) * kPage, kPage, 11, k);  // copy-on-write of the parent's page
  Fill(shared + (200 + k) * kPage, kPage, 12, k);
}

void Step(uint64_t k, int data_pipe[2]) {
  for (size_t page = k; page < kMain / kPage; page += 97)
    Fill(main_mem + page * kPage, kPage, 1, k);
  if (madvise(main_mem + (512 + 64 * k) * kPage, 8 * kPage, MADV_DONTNEED) != 0) Die("madvise");
  // Written by the kernel: read(2) from a pipe.
  unsigned char buf[3 * kPage];
  Fill(buf, sizeof buf, 2, k);
  if (write(data_pipe[1], buf, sizeof buf) != static_cast<ssize_t>(sizeof buf)) Die("write");
  if (read(data_pipe[0], main_mem + (1000 + 3 * k) * kPage, sizeof buf) !=
      static_cast<ssize_t>(sizeof buf)) {
    Die("read");
  }
  // Heap growth.
  auto* grown = static_cast<unsigned char*>(sbrk(static_cast<intptr_t>(40 * 1024 * k)));
  if (grown == reinterpret_cast<unsigned char*>(-1)) Die("sbrk");
  Fill(grown, 40 * 1024 * k, 3, k);
  Fill(heap_first, kPage, 3, k);
  // New mapping; half of the last one goes.
  auto* fresh = static_cast<unsigned char*>(
      Map(kGrow * k, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS));
  Fill(fresh, kGrow * k, 4, k);
  if (last_new != nullptr && munmap(last_new, last_new_len / 2) != 0) Die("munmap");
  last_new = fresh;
  last_new_len = kGrow * k;
  // Grown (and at step 2 moved) with mremap.
  if (k == 2) {
    auto* to = static_cast<unsigned char*>(
        Map(movable_len + 16 * kMiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE));
    void* moved =
        mremap(movable, movable_len, movable_len, MREMAP_MAYMOVE | MREMAP_FIXED, to + 8 * kMiB);
    if (moved == MAP_FAILED) Die("mremap move");
    munmap(to, 8 * kMiB);
    munmap(to + 8 * kMiB + movable_len, 8 * kMiB);
    movable = static_cast<unsigned char*>(moved);
  }
  void* grown_map = mremap(movable, movable_len, movable_len + kGrow, MREMAP_MAYMOVE);
  if (grown_map == MAP_FAILED) Die("mremap grow");
  movable = static_cast<unsigned char*>(grown_map);
  Fill(movable + movable_len, kGrow, 5, k);
  movable_len += kGrow;
  // Protection flips.
  if (k % 2 == 1) {
    if (mprotect(flip, kFlip, PROT_READ | PROT_WRITE) != 0) Die("mprotect");
    Fill(flip + k * kPage, kPage, 6, k);
  } else if (mprotect(flip, kFlip, PROT_READ) != 0) {
    Die("mprotect");
  }
  thp[k * 2 * kMiB + 123] = static_cast<unsigned char>(k);
  Fill(file_mem + 8 * k * kPage, 2 * kPage, 7, k);
  Fill(shared + k * kPage, kPage, 8, k);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: criu_pages DIR\n");
    return 2;
  }
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigprocmask(SIG_BLOCK, &usr1, nullptr);

  main_mem =
      static_cast<unsigned char*>(Map(kMain, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS));
  Fill(main_mem, kMain, 1, 0);
  // 2 MiB aligned, so that huge pages fit.
  auto* raw = static_cast<unsigned char*>(
      Map(kThp + 2 * kMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS));
  thp = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(raw) + 2 * kMiB - 1) &
                                         ~(2 * kMiB - 1));
  madvise(thp, kThp, MADV_HUGEPAGE);
  Fill(thp, kThp, 9, 0);
  const std::string path = std::string(argv[1]) + "/private";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) Die("open");
  {
    static unsigned char block[kFile];
    Fill(block, kFile, 10, 0);
    if (write(fd, block, kFile) != static_cast<ssize_t>(kFile)) Die("write file");
  }
  file_mem = static_cast<unsigned char*>(Map(kFile, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd));
  close(fd);
  Fill(file_mem, 4 * kPage, 10, 1);  // some pages copied on write, the rest the file's
  shared =
      static_cast<unsigned char*>(Map(kShared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS));
  Fill(shared, kShared, 12, 0);
  flip =
      static_cast<unsigned char*>(Map(kFlip, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS));
  Fill(flip, kFlip, 6, 0);
  mprotect(flip, kFlip, PROT_READ);
  movable = static_cast<unsigned char*>(
      Map(kMovable, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS));
  Fill(movable, kMovable, 5, 0);
  heap_first = static_cast<unsigned char*>(sbrk(static_cast<intptr_t>(kPage)));
  Fill(heap_first, kPage, 3, 0);
  int data_pipe[2], to_child[2], from_child[2];
  if (pipe(data_pipe) != 0 || pipe(to_child) != 0 || pipe(from_child) != 0) Die("pipe");

  pid_t child = fork();
  if (child < 0) Die("fork");
  if (child == 0) {
    for (uint64_t k = 1;; ++k) {
      char c;
      if (read(to_child[0], &c, 1) != 1) _exit(0);
      ChildStep(k);
      if (write(from_child[1], &c, 1) != 1) _exit(4);
    }
  }
  Say("ready");
  for (uint64_t k = 1;; ++k) {
    int sig = 0;
    if (sigwait(&usr1, &sig) != 0) Die("sigwait");
    Step(k, data_pipe);
    char c = 's';
    if (write(to_child[1], &c, 1) != 1 || read(from_child[0], &c, 1) != 1) Die("child step");
    Say("step " + std::to_string(k));
  }
}
