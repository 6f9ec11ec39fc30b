// Network-namespace "hosts" for a local cluster (gos-cluster up --netns): each nodeagent in
// a namespace of its own, joined to a bridge in the root namespace by a veth pair, so that
// the nodes talk over IP exactly as separate hosts would.
//
//   root namespace: bridge gosbr<k>, 198.19.<k>.1/24 (the coordinator listens there)
//   node i:         netns gos-c<k>-n<i>, eth0 198.19.<k>.<10+i>/24, lo up
//
// 198.18.0.0/15 is reserved for network benchmarking (RFC 2544); the tests use 198.18/16,
// local clusters 198.19/16, and <k> is the first number whose bridge does not exist yet.
// What was made is recorded in the state dir (file `netns`: "bridge B", then "netns N" and
// "veth V" per node), so that `gos-cluster down` removes it after the daemons stopped, or
// `up` after a cluster of that state dir that died without `down`.
#ifndef GOS_TOOLS_NETNS_H_
#define GOS_TOOLS_NETNS_H_

#include <string>
#include <vector>

#include "gos/status.h"

namespace gos::tools {

struct NetnsHosts {
  std::string bridge;
  std::string bridge_ip;
  std::vector<std::string> names;  // per node, in node order
};

// Why namespaces cannot be made here ("" if they can): not root, no `ip` or `nsenter`.
std::string NetnsUnsupported();

// Makes `nodes` namespaces and records them in state_dir/netns. On error removes what it
// made and names the failing `ip` command.
StatusOr<NetnsHosts> CreateNetnsHosts(const std::string& state_dir, uint32_t nodes);

// Removes what state_dir/netns records (nothing if there is no record) and the record.
void RemoveNetnsHosts(const std::string& state_dir);

// argv that runs argv in the namespace `name` (network namespace only: `ip netns exec`
// would also remount /sys, hiding the cgroup hierarchy from a nodeagent).
std::vector<std::string> InNetns(const std::string& name, const std::vector<std::string>& argv);

}  // namespace gos::tools

#endif  // GOS_TOOLS_NETNS_H_
