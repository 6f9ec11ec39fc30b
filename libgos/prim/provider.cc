// Choosing a provider, and cleaning up after shm: apart from fabric.cc so that a program that
// only names providers (gos-cluster, gos-run) does not load libfabric. Loading it costs ~0.2 s
// here: Debian's libfabric links the psm and psm2 libraries, whose constructors each spend
// 100 ms calibrating the CPU clock.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fabric.h"
#include "gos/prim/prim.h"

namespace gos::prim {

std::string ResolveProvider(const std::string& requested) {
  if (!requested.empty()) return requested;
  const char* env = std::getenv("GOS_FABRIC_PROVIDER");
  if (env != nullptr && *env != '\0') return env;
  return "tcp;ofi_rxm";
}

bool ProviderUsesIp(const std::string& provider) { return provider.rfind("shm", 0) != 0; }

void SweepDeadShmRegions(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    unsigned long pid = 0, a = 0, b = 0;
    int end = 0;
    if (std::sscanf(e->d_name, "%lu:%lu:%lu%n", &pid, &a, &b, &end) != 3 ||
        e->d_name[end] != '\0' || pid == 0) {
      continue;
    }
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      ::unlinkat(::dirfd(d), e->d_name, 0);
    }
  }
  ::closedir(d);
}

}  // namespace gos::prim
