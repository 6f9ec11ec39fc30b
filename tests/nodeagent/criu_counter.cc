// A rank for the CRIU tests: counts, one line per step, with no fds beyond its stdio (and an
// optional MAP_SHARED mapping, like a BCS channel).
//
//   criu_counter STEPS DELAY_MS EXIT_CODE [SHM_FILE]
//
// For i = 1..STEPS: stores i (uint64, native-endian) at offset 0 of SHM_FILE's MAP_SHARED
// mapping if one is given, writes "step i\n" to stdout, then sleeps DELAY_MS. Exits EXIT_CODE.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: criu_counter STEPS DELAY_MS EXIT_CODE [SHM_FILE]\n");
    return 2;
  }
  const unsigned long steps = strtoul(argv[1], nullptr, 10);
  const long delay_ms = strtol(argv[2], nullptr, 10);
  const int exit_code = atoi(argv[3]);
  volatile uint64_t* shared = nullptr;
  if (argc == 5) {
    int fd = open(argv[4], O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      perror(argv[4]);
      return 2;
    }
    void* p = mmap(nullptr, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      perror("mmap");
      return 2;
    }
    close(fd);  // The mapping alone keeps the file: like a rank's channel.
    shared = static_cast<volatile uint64_t*>(p);
  }
  for (unsigned long i = 1; i <= steps; ++i) {
    if (shared != nullptr) *shared = i;
    std::string line = "step " + std::to_string(i) + "\n";
    // One write(2) per line (no stdio buffer), so a dump never holds half a line.
    if (write(STDOUT_FILENO, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return 3;
    }
    timespec ts{delay_ms / 1000, (delay_ms % 1000) * 1'000'000};
    // Interrupted by a freeze or a restore: the rest of the sleep does not matter.
    nanosleep(&ts, nullptr);
  }
  return exit_code;
}
