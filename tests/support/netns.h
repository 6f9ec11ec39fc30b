// Test support: several "hosts" on one machine, as network namespaces joined to a bridge
// in the root namespace by veth pairs. Created by the test, removed on destruction (and
// every name carries the creating pid, so parallel tests never collide).
//
//   root ns: bridge gb<pid> 198.18.<k>.1/24
//   host i:  netns gos-<pid>-h<i>, eth0 198.18.<k>.<10+i>/24, lo up
//
// 198.18.0.0/15 is reserved for network benchmarking (RFC 2544): nothing real lives there.
#ifndef GOS_TESTS_SUPPORT_NETNS_H_
#define GOS_TESTS_SUPPORT_NETNS_H_

#include <memory>
#include <string>
#include <vector>

#include "gos/status.h"

namespace gos::testing {

class NetnsHosts {
 public:
  // Returns why namespaces cannot be made here ("" if they can): not root, no `ip`, ...
  static std::string Unsupported();
  static StatusOr<std::unique_ptr<NetnsHosts>> Create(int hosts);
  ~NetnsHosts();

  int size() const { return static_cast<int>(names_.size()); }
  const std::string& name(int host) const { return names_[host]; }
  std::string ip(int host) const;
  // Address of the root namespace on the bridge (where in-process servers listen).
  std::string bridge_ip() const;
  // argv that runs `argv` inside host's namespace.
  std::vector<std::string> Wrap(int host, const std::vector<std::string>& argv) const;
  // Cuts a host off the network (its veth goes down) or reconnects it.
  Status SetLinkUp(int host, bool up);

 private:
  NetnsHosts() = default;
  std::string bridge_;
  std::vector<std::string> names_;
  std::vector<std::string> veths_;
  int subnet_ = 0;
};

// Runs a command, returning its exit status as a Status naming the command and its output.
Status RunCommand(const std::vector<std::string>& argv);

}  // namespace gos::testing

#endif  // GOS_TESTS_SUPPORT_NETNS_H_
