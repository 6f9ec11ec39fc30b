// Files a test cluster's nodeagents leave outside its state dir when they are killed: the
// BCS channel files (/dev/shm/gos-<tag>-j<job>-r<rank>) and the ranks' namespace-init working
// directories (/run/gos/init/<tag>/...), where <tag> is os::ClusterTag of the cluster key.
#ifndef GOS_TESTS_SUPPORT_CLUSTER_FILES_H_
#define GOS_TESTS_SUPPORT_CLUSTER_FILES_H_

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

// Removes those files of the cluster whose state dir is state_dir (as gos-run and gos-cluster
// down do for their local clusters).
inline void RemoveClusterFiles(const std::string& state_dir) {
  auto key = os::LoadClusterKey(state_dir + "/cluster.key");
  if (key.ok()) os::RemoveClusterFiles(*key);
}

}  // namespace gos::testing

#endif  // GOS_TESTS_SUPPORT_CLUSTER_FILES_H_
