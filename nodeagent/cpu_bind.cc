#include "cpu_bind.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>

#include <cstdlib>
#include <fstream>

#include "gos/ids.h"

namespace gos::nodeagent {
namespace {

// Thread ids of pid (from /proc/PID/task); empty if the process is gone.
std::vector<pid_t> Threads(pid_t pid) {
  std::vector<pid_t> tids;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return tids;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') tids.push_back(std::atoi(e->d_name));
  }
  ::closedir(d);
  return tids;
}

}  // namespace

cpu_set_t CpuSetOf(std::span<const int> cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  return set;
}

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::vector<int> RankCpus(std::span<const int> cpus, uint32_t index, uint32_t count) {
  const size_t n = cpus.size();
  if (count == 0 || index >= count || n == 0) return {cpus.begin(), cpus.end()};
  if (count >= n) return {cpus[index * n / count]};
  const size_t first = index * n / count, end = (index + 1) * n / count;
  return {cpus.begin() + static_cast<ptrdiff_t>(first), cpus.begin() + static_cast<ptrdiff_t>(end)};
}

std::string CpuListText(std::span<const int> cpus) {
  return CompressIds(std::vector<uint32_t>(cpus.begin(), cpus.end()));
}

Status BindProcessTree(pid_t root, std::span<const int> cpus) {
  const cpu_set_t set = CpuSetOf(cpus);
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    for (pid_t tid : Threads(pid)) {
      if (::sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH) {
        return ErrnoError(errno, "bind thread " + std::to_string(tid) + " of process " +
                                     std::to_string(pid) + " to CPUs " + CpuListText(cpus));
      }
      // Children of each thread (a process's children hang off the thread that forked them).
      std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) +
                       "/children");
      pid_t child;
      while (in >> child) todo.push_back(child);
    }
  }
  return OkStatus();
}

}  // namespace gos::nodeagent
