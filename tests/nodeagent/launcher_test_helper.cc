// A rank for the launcher and freezer tests.
//
//   launcher_test_helper count FILE   rewrites FILE (atomically) with 1, 2, 3, ... every ~1 ms
//   launcher_test_helper fds          prints its open fds, e.g. "0 1 2"
//   launcher_test_helper threads      forks a child; each of the two starts two more threads;
//                                     prints "ready" when all six run, then waits forever
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

namespace {

int Count(const std::string& file) {
  const std::string tmp = file + ".tmp";
  for (unsigned long n = 1;; ++n) {
    FILE* f = fopen(tmp.c_str(), "w");
    if (f == nullptr) {
      perror(tmp.c_str());
      return 1;
    }
    fprintf(f, "%lu\n", n);
    fclose(f);
    if (rename(tmp.c_str(), file.c_str()) != 0) {
      perror("rename");
      return 1;
    }
    timespec ts{0, 1'000'000};
    nanosleep(&ts, nullptr);
  }
}

int Fds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) {
    perror("/proc/self/fd");
    return 1;
  }
  std::vector<int> fds;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    if (fd != dirfd(d)) fds.push_back(fd);
  }
  closedir(d);
  std::sort(fds.begin(), fds.end());
  for (size_t i = 0; i < fds.size(); ++i) printf(i == 0 ? "%d" : " %d", fds[i]);
  printf("\n");
  return 0;
}

[[noreturn]] void SleepForever() {
  for (;;) pause();
}

int Threads() {
  int ready[2];
  if (pipe(ready) != 0) {
    perror("pipe");
    return 1;
  }
  const pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  for (int i = 0; i < 2; ++i) std::thread(SleepForever).detach();
  if (child == 0) {
    if (write(ready[1], "r", 1) != 1) _exit(1);
    SleepForever();
  }
  char c;
  if (read(ready[0], &c, 1) != 1) return 1;
  printf("ready\n");
  fflush(stdout);
  SleepForever();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "count") == 0) return Count(argv[2]);
  if (argc == 2 && strcmp(argv[1], "fds") == 0) return Fds();
  if (argc == 2 && strcmp(argv[1], "threads") == 0) return Threads();
  fprintf(stderr, "usage: launcher_test_helper count FILE | fds | threads\n");
  return 2;
}
