// Gang scheduling logic of the coordinator: the Ousterhout matrix (rows = time slots, columns =
// nodes), the node allocator that places a job in one row, and the FCFS job queue with EASY
// backfill. The rules are written down in docs/gang-scheduling.md.
//
// Pure logic: no I/O, no clock, no threads. Not thread-safe; the coordinator calls it under its
// own lock. Times are absolute milliseconds on the caller's clock.
#ifndef GOS_COORDINATOR_GANG_H_
#define GOS_COORDINATOR_GANG_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gos/status.h"

namespace gos::coordinator {

using JobId = uint64_t;  // 0 is "no job".
using NodeId = uint32_t;

// A time that is not known (a job without a time limit has no expected end).
inline constexpr int64_t kUnknownTime = std::numeric_limits<int64_t>::max();

struct JobRequest {
  JobId job = 0;                // != 0
  uint32_t ntasks = 0;          // ranks, >= 1
  uint32_t nodes = 0;           // nodes wanted (-N), <= ntasks. 0 = choose: min(ntasks, up nodes)
                                //   when ranks_per_node == 0, else ceil(ntasks / ranks_per_node).
  uint32_t ranks_per_node = 0;  // 0 = balanced block distribution (see Placement::rank_nodes).
  int64_t time_limit_ms = 0;    // 0 = none (unknown runtime). Used by backfill, which relies on
                                //   the coordinator killing a job at its limit.
  std::vector<NodeId> exclude;  // nodes the job must not use (gos-restart --exclude); ascending
  // Where each rank would rather be (empty, or size ntasks; 0 = anywhere): a restart's ranks
  // restore fastest on the node that dumped them. Their nodes are taken first, and a rank goes
  // to its node when that node's share of the block distribution has room.
  std::vector<NodeId> rank_home;
};

struct Placement {
  JobId job = 0;
  uint32_t row = 0;
  std::vector<NodeId> nodes;       // Ascending, the job's nodes; each holds >= 1 rank.
  std::vector<NodeId> rank_nodes;  // Node of each rank (size ntasks), block distribution:
                                   // consecutive ranks share a node, nodes[0] first. With
                                   // ranks_per_node k each node gets k ranks, the last one the
                                   // rest; with 0 the first ntasks % N nodes get ceil(ntasks / N)
                                   // ranks and the others floor(ntasks / N). With rank_home,
                                   // each node keeps its number of ranks but homed ranks are
                                   // moved to their nodes (the rest fill up in rank order).

  friend bool operator==(const Placement&, const Placement&) = default;
};

// Where and when a job that does not fit now is expected to start (EASY reservation).
struct Reservation {
  JobId job = 0;
  uint32_t row = 0;
  std::vector<NodeId> nodes;   // Ascending: the cells (row, node) the job is going to get.
  int64_t start_ms = 0;        // kUnknownTime if a job without a time limit holds a needed cell.
  uint32_t unknown_cells = 0;  // Cells of `nodes` held by jobs whose end is unknown.
};

class GangMatrix {
 public:
  // mpl = rows (multiprogramming level); 0 is taken as 1.
  explicit GangMatrix(uint32_t mpl);

  // Adds a node column (up or down) or marks a known one up/down. A down node gets no new job;
  // jobs already on it stay until removed (the failure policy decides what happens to them).
  void SetNode(NodeId node, bool up);
  uint32_t mpl() const { return static_cast<uint32_t>(rows_.size()); }
  // Known columns, ascending; and how many of them are up.
  std::vector<NodeId> Nodes() const;
  uint32_t UpNodes() const { return up_count_; }
  bool IsUp(NodeId node) const;

  // Validates a request against the whole cluster (ignoring current load). Errors:
  // InvalidArgument for a request no cluster could run ("--ranks-per-node 3 with -N 2 cannot
  // hold 8 ranks"), ResourceExhausted when this cluster has too few up nodes ("needs 9 nodes,
  // the cluster has 4 up").
  Status Check(const JobRequest& r) const;
  // The node count r resolves to on this cluster now (see JobRequest::nodes), or Check's error.
  StatusOr<uint32_t> NodesFor(const JobRequest& r) const;

  // Places r now if some row has enough free up node columns: lowest row first, inside a row the
  // lowest free node ids. nullopt if it does not fit now, if Check(r) fails, or if r.job is
  // already placed. With `avoid`, the cells of that reservation are not used (backfill).
  std::optional<Placement> TryPlace(const JobRequest& r, const Reservation* avoid = nullptr);
  // Re-inserts a known placement (the coordinator recovering its tables). Its nodes need not be
  // up; unknown node columns are added as down. Errors: InvalidArgument for a malformed
  // placement (job 0, row >= mpl, nodes not ascending, a rank on a node not in nodes, a node
  // without ranks), AlreadyExists if the job or any of its cells is taken. Nothing changes on
  // error.
  Status Restore(const Placement& p);
  // Frees the job's cells. Unknown jobs are ignored.
  void Remove(JobId job);

  bool Has(JobId job) const { return jobs_.contains(job); }
  // The job's placement, or nullptr. Valid until the next non-const call.
  const Placement* Find(JobId job) const;
  size_t size() const { return jobs_.size(); }

  // Jobs with a rank on node (any row), ascending.
  std::vector<JobId> JobsOnNode(NodeId node) const;
  // Jobs placed in row, ascending.
  std::vector<JobId> JobsInRow(uint32_t row) const;
  // The row to run in the next timeslice after `current`: the next non-empty row in round-robin
  // order; `current` again if it is the only non-empty row; 0 if all rows are empty.
  uint32_t NextRow(uint32_t current) const;
  // Job holding (row, node), or 0.
  JobId At(uint32_t row, NodeId node) const;

  // The EASY reservation of r: the earliest time some row will have enough free up cells for r,
  // assuming every placed job ends at end_ms[job] (clamped to >= now_ms; a job missing from the
  // map has an unknown end) and a free cell is free from now_ms. Ties go to the row with fewer
  // unknown-end cells, then to the lowest row; the nodes are the lowest ids free by that time,
  // i.e. those TryPlace would pick then. start_ms == now_ms if r fits now. nullopt if Check(r)
  // fails.
  std::optional<Reservation> Reserve(const JobRequest& r, int64_t now_ms,
                                     const std::map<JobId, int64_t>& end_ms) const;

  // Debug picture, one line per row, columns in node order: "row 0: 17 17 . 18\n". A free cell
  // is "." on an up node and "x" on a down node.
  std::string ToString() const;

 private:
  void Insert(const Placement& p);

  std::map<NodeId, bool> up_;  // Column -> up.
  uint32_t up_count_ = 0;
  std::vector<std::map<NodeId, JobId>> rows_;  // Per row: occupied cells only.
  std::vector<std::set<JobId>> row_jobs_;      // Per row: the jobs in it.
  std::map<JobId, Placement> jobs_;
};

// FCFS queue with EASY backfill.
class JobQueue {
 public:
  // Appends r at the tail. A job id already queued is not added again.
  void Push(const JobRequest& r);
  // Removes a queued job (e.g. killed while queued). False if it was not queued.
  bool Remove(JobId job);
  bool Contains(JobId job) const;
  // The queued request, or nullptr. Valid until the next non-const call.
  const JobRequest* Find(JobId job) const;
  size_t size() const { return queue_.size(); }
  std::vector<JobId> Ids() const;  // Queue order.

  // The head: the first queued job that passes matrix.Check and is not already placed. Jobs
  // failing Check (e.g. too few nodes up) stay queued but neither start nor block others.
  const JobRequest* Head(const GangMatrix& matrix) const;

  // Starts what it can, in queue order: the head while it fits; then, once the head does not fit,
  // later jobs (backfill) only if they fit now and cannot delay the head's reservation
  // (GangMatrix::Reserve with running_end_ms plus the ends of jobs started in this call): a later
  // job starts if it has a time limit and now_ms + limit <= the head's known reserved start, or
  // else if it fits without using any reserved cell. Started jobs leave the queue. Returns the
  // placements made (already inserted into matrix), in start order.
  std::vector<Placement> Schedule(GangMatrix& matrix, int64_t now_ms,
                                  const std::map<JobId, int64_t>& running_end_ms);

 private:
  std::vector<JobRequest> queue_;
};

}  // namespace gos::coordinator

#endif  // GOS_COORDINATOR_GANG_H_
