// Files a test cluster's nodeagents leave outside its state dir when they are killed: the
// BCS channel files (/dev/shm/gos-<tag>-j<job>-r<rank>) and the ranks' namespace-init working
// directories (/run/gos/init/<tag>/...), where <tag> is the nodeagent's ClusterTag
// (nodeagent/agent.cc): a 64-bit FNV-1a of the cluster key's bytes, upper half in hex.
#ifndef GOS_TESTS_SUPPORT_CLUSTER_FILES_H_
#define GOS_TESTS_SUPPORT_CLUSTER_FILES_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "gos/os/auth.h"

namespace gos::testing {

// The tag of the cluster whose key is in key_file ("no-key", which matches nothing, if none).
inline std::string ClusterTag(const std::string& key_file) {
  auto key = os::LoadClusterKey(key_file);
  if (!key.ok()) return "no-key";
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : *key) h = (h ^ b) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(h >> 32));
  return buf;
}

// Removes those files of the cluster whose state dir (holding cluster.key) is state_dir.
inline void RemoveClusterFiles(const std::string& state_dir) {
  const std::string tag = ClusterTag(state_dir + "/cluster.key");
  std::error_code ec;
  std::filesystem::remove_all("/run/gos/init/" + tag, ec);
  const std::string prefix = "/dev/shm/gos-" + tag + "-j";
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (e.path().string().rfind(prefix, 0) == 0) ::unlink(e.path().c_str());
  }
}

}  // namespace gos::testing

#endif  // GOS_TESTS_SUPPORT_CLUSTER_FILES_H_
