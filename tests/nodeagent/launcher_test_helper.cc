// A rank for the launcher and freezer tests.
//
//   launcher_test_helper count FILE   rewrites FILE (atomically) with 1, 2, 3, ... every ~1 ms
//   launcher_test_helper fds          prints its open fds, e.g. "0 1 2"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <string>
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

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "count") == 0) return Count(argv[2]);
  if (argc == 2 && strcmp(argv[1], "fds") == 0) return Fds();
  fprintf(stderr, "usage: launcher_test_helper count FILE | fds\n");
  return 2;
}
