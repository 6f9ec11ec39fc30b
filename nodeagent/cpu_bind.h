// CPU binding of a job's ranks on a node (gos-run --cpu-bind): which CPUs each local rank
// gets, and binding a whole process tree (a restored rank: CRIU does not restore affinity).
//
// A node's ranks of one job share its CPUs in blocks, like Slurm's block distribution: with
// at least as many ranks as CPUs, consecutive ranks share a CPU and the CPUs' loads differ
// by at most one rank; with fewer ranks, each rank gets a block of consecutive CPUs for its
// threads. Only one job runs on a node at a time (a gang-matrix cell holds one job), so the
// jobs of other rows reuse the same CPUs without colliding.
#ifndef GOS_NODEAGENT_CPU_BIND_H_
#define GOS_NODEAGENT_CPU_BIND_H_

#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gos/status.h"

namespace gos::nodeagent {

// The CPUs this process may run on (its affinity), ascending. Empty if it cannot be read.
std::vector<int> AllowedCpus();

// The CPUs of local rank `index` (0-based) of `count` ranks sharing `cpus`: with count >=
// cpus.size(), one CPU, cpus[index * cpus.size() / count]; otherwise the block
// cpus[index * C / count .. (index + 1) * C / count). All of `cpus` if count is 0 or
// index >= count (not a rank of this split).
std::vector<int> RankCpus(std::span<const int> cpus, uint32_t index, uint32_t count);

// The set of `cpus` (those outside 0 .. CPU_SETSIZE-1 are left out).
cpu_set_t CpuSetOf(std::span<const int> cpus);

// "0-3,6" for {0, 1, 2, 3, 6}; "" for none (CompressIds, gos/ids.h).
std::string CpuListText(std::span<const int> cpus);

// Binds every thread of `root` and of all its descendants to `cpus`. Processes that exit
// meanwhile are skipped; an error names the thread that could not be bound.
Status BindProcessTree(pid_t root, std::span<const int> cpus);

}  // namespace gos::nodeagent

#endif  // GOS_NODEAGENT_CPU_BIND_H_
