// Files a test cluster's nodeagents leave outside its state dir when they are killed: the
// BCS channel files (/dev/shm/gos-<tag>-j<job>-r<rank>) and the ranks' namespace-init working
// directories (/run/gos/init/<tag>/...), where <tag> is os::ClusterTag of the cluster key.
#ifndef GOS_TESTS_SUPPORT_CLUSTER_FILES_H_
#define GOS_TESTS_SUPPORT_CLUSTER_FILES_H_

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gos/os/auth.h"

namespace gos::testing {

// The tag of the cluster whose key is in key_file ("no-key", which matches nothing, if none).
inline std::string ClusterTag(const std::string& key_file) {
  auto key = os::LoadClusterKey(key_file);
  return key.ok() ? os::ClusterTag(*key) : "no-key";
}

// The start of the channel files' paths (<prefix><job>-r<rank>) of the cluster whose state dir
// (holding cluster.key) is state_dir.
inline std::string ChannelFilePrefix(const std::string& state_dir) {
  return "/dev/shm/gos-" + ClusterTag(state_dir + "/cluster.key") + "-j";
}

// Removes those files of the cluster whose state dir is state_dir.
inline void RemoveClusterFiles(const std::string& state_dir) {
  std::error_code ec;
  std::filesystem::remove_all("/run/gos/init/" + ClusterTag(state_dir + "/cluster.key"), ec);
  const std::string prefix = ChannelFilePrefix(state_dir);
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (e.path().string().rfind(prefix, 0) == 0) ::unlink(e.path().c_str());
  }
}

}  // namespace gos::testing

#endif  // GOS_TESTS_SUPPORT_CLUSTER_FILES_H_
