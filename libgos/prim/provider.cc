// Choosing a provider: pure functions, apart from fabric.cc so that a program that only
// names providers (gos-cluster, gos-run) does not load libfabric. Loading it costs ~0.2 s
// here: Debian's libfabric links the psm and psm2 libraries, whose constructors each spend
// 100 ms calibrating the CPU clock.
#include <cstdlib>
#include <string>

#include "gos/prim/prim.h"
#include "libgos/prim/fabric.h"

namespace gos::prim {

std::string ResolveProvider(const std::string& requested) {
  if (!requested.empty()) return requested;
  const char* env = std::getenv("GOS_FABRIC_PROVIDER");
  if (env != nullptr && *env != '\0') return env;
  return "tcp;ofi_rxm";
}

bool ProviderUsesIp(const std::string& provider) { return provider.rfind("shm", 0) != 0; }

}  // namespace gos::prim
