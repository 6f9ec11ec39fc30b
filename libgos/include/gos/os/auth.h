// The cluster key and message authentication (DESIGN.md "Security").
//
// Nodeagents (and remote clients) prove they belong to the cluster with a shared key: every
// frame they exchange with the coordinator, and every strobe payload, carries an
// HMAC-SHA256 over its contents. The key file holds 32 random bytes as hex, is created on
// the coordinator's first start with mode 0600, and is refused if group or others can read it.
#ifndef GOS_OS_AUTH_H_
#define GOS_OS_AUTH_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gos/status.h"

namespace gos::os {

inline constexpr size_t kMacBytes = 32;
using Mac = std::array<uint8_t, kMacBytes>;

// Reads the key file; fails if missing, malformed, or readable by group/others.
StatusOr<std::vector<uint8_t>> LoadClusterKey(const std::string& path);
// Loads the key, creating it (0600, 32 bytes from getrandom) if the file does not exist.
StatusOr<std::vector<uint8_t>> LoadOrCreateClusterKey(const std::string& path);
// A short public name of the cluster derived from its key (8 hex digits: the upper half of a
// 64-bit FNV-1a of the key), for paths that must be the same on every node of the cluster
// and differ between clusters: BCS channel files, the ranks' init working directories.
std::string ClusterTag(std::span<const uint8_t> key);

// Where nodeagents put their ranks' init working dirs (gos-nodeagent --init-root's default).
inline constexpr char kDefaultInitRoot[] = "/run/gos/init";
// Removes what the nodeagents of the cluster with this key leave on this machine when they
// are killed: BCS channel files (/dev/shm/gos-<tag>-...) and the ranks' init working dirs
// (<init_root>/<tag>/). Only for a cluster none of whose nodeagents runs here any more.
void RemoveClusterFiles(std::span<const uint8_t> key,
                        const std::string& init_root = kDefaultInitRoot);

// HMAC-SHA256 over the concatenation of parts.
Mac Hmac(std::span<const uint8_t> key, std::initializer_list<std::span<const uint8_t>> parts);
// Constant-time comparison.
bool MacEqual(std::span<const uint8_t> a, std::span<const uint8_t> b);

}  // namespace gos::os

#endif  // GOS_OS_AUTH_H_
