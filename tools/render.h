// Text rendering for gos-ps: the jobs and nodes tables and the showmesh-style mesh.
//
// Pure functions of their arguments (no I/O, no clocks, no globals); safe to call from any
// thread. Every returned string is a sequence of '\n'-terminated lines without trailing
// spaces. Control characters in user-supplied text (user names, hosts, commands, reasons) are
// shown as '?' so a hostile argv cannot break the table.
//
// Reference: showmesh (Brightwell et al., "Cplant", Parallel Computing 2000, §8.2 and Fig. 5).
// Cplant had two status tools. pingd printed one line per node (free/allocated, job, owner,
// run time), which the paper calls non-scalable: fine with a long scrollback, tedious at
// thousands of nodes. showmesh, a Perl script over pingd's output imitating the TFLOPS
// showmesh, "can display the status of several thousand nodes in a limited amount of textual
// space". Fig. 5 ("Current partition allocation:") shows a 324-node job just after launch as a
// 16-row by 24-column grid framed by '+' corners, with a two-line ruler giving the column
// number (tens digit over units digit) and the row number at the left of each line. Each node
// is one character: the job's letter ('a', all 324 nodes of job 310), ' ' free, 'X' dead,
// '~' stale, '?' non-existent, 'S' service node. Below the grid: a legend of those symbols,
// "Available Cplant nodes: 11", and a job table "Job ID User Size Time" with the line
// "310 a bright 324 00:00:10" mapping job 310 to letter 'a'.
//
// RenderMesh keeps that idea (one character per node, a letter per job, a ruler, row labels,
// a legend mapping letters to jobs, a count of available nodes) and adapts it to gos: rows are
// node ids in groups of 10 so that 1,000 nodes fit an 80x50 terminal, '.' marks an idle node
// (a blank is invisible), and nodes time-shared by gang rows show the job of the running row.
#ifndef GOS_TOOLS_RENDER_H_
#define GOS_TOOLS_RENDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gos/ids.h"
#include "gos/os/messages.h"

namespace gos::tools {

// The rows come straight from the coordinator's status reply (gos/os/messages.h). A node's
// load is its running ranks / cores.
using PsJob = os::PsJob;
using PsNode = os::PsNode;

// `gos-ps`: the jobs table, like squeue / flux jobs, one line per job in the given order:
//
//   JOBID  USER   STATE    RANKS  NODES  ELAPSED  COMMAND
//      12  alice  running     64  0-15      5:03  ./lu.B 64
//
// JOBID, RANKS and ELAPSED are right-aligned, the rest left-aligned; columns are separated by
// two spaces and sized to their widest cell. NODES is CompressIds(nodes) (gos/ids.h) ("-" if none),
// ELAPSED is FormatElapsed(elapsed_ms).
std::string FormatJobs(const std::vector<PsJob>& jobs);

// The nodes table, one line per node in the given order:
//
//   NODE  HOST   STATE                 CORES  MEM  LOAD  JOBS
//      0  n0     up                        8  16G  1.00  12,14
//      1  n1     down (heartbeat lost)     8  16G     -  12
//
// A down node's STATE carries its reason and its LOAD is "-". MEM is in binary units
// ("512M", "1.5G", "16G"). JOBS is the comma-separated job ids, "-" if none.
std::string FormatNodes(const std::vector<PsNode>& nodes);

// `gos-ps --mesh`: the showmesh-style grid. Example (4 nodes, job 10 in the running row 0 on
// nodes 0-1, job 11 in row 1 on node 2, node 3 idle):
//
//     0
//   0 AAB.
//
//   4 nodes: 4 up (1 idle), 0 down
//   . idle  X down  row 0 running: A
//     JOBID USER  RANKS NODES ELAPSED
//   A    10 alice     8     2    0:05
//   B    11 bob       4     1    1:02
//
// Grid: the ids from the first row's start (the smallest id rounded down to a row) to the
// largest id, one character per id. A row holds as many groups of 10 as fit in `width` (at
// most 100 ids; just the ids there are when they fit one row) and starts with its first id,
// right-aligned; the ruler above gives each group's offset in the row. Characters:
//   - a job letter: 'A'-'Z' except 'X', then 'a'-'z', then '0'-'9' for the first 61 jobs,
//     '#' for every further one (the key then says "# more jobs than letters (N)"). 'X' is
//     left out so that a job can never look like a down node;
//   - '.' an up node with no job, 'X' a down node (whatever it holds), '?' an id between
//     nodes that is not a node (only when there are gaps);
//   - a node holding several jobs (time sharing) shows the job of `running_row` if one is
//     there, else the job with the earliest letter.
// A job is on the mesh if a node lists it in PsNode::jobs, or if it is not final
// (exit_code == -1) and has nodes. Letters go first to the jobs of `running_row`, then to the
// others, each by ascending job id. Jobs neither on the mesh nor final are listed on one
// "queued (N): id id ..." line at the end; final jobs not on the mesh are omitted.
// Legend: "N nodes: U up (I idle), D down" (plus ", T time-shared" when T > 0), a "down:"
// line grouping down node ids by reason (when D > 0), a key line (with "row R running: A-F"
// when that row has jobs), then one entry per job on the mesh - letter, job id, user (at most
// 8 characters), ranks, node count, elapsed - one column for up to 10 jobs, else as many
// columns (filled downwards) as fit in `width`. With 1,000 nodes and 70 jobs at width 80 this
// is 15 grid rows of 70 and 55 lines in all. Grid lines fit in `width` (taken as at least 20);
// the down and queued lines are cut to it and the summary and key lines wrap, but a single
// phrase or legend entry wider than `width` stays whole.
std::string RenderMesh(const std::vector<PsNode>& nodes, const std::vector<PsJob>& jobs,
                       int32_t running_row, int width = 80);

// Slurm style: "0:05", "59:59", "1:02:03", "2-03:04:05". Whole seconds, truncated; a negative
// duration shows as "0:00".
std::string FormatElapsed(int64_t ms);

}  // namespace gos::tools

#endif  // GOS_TOOLS_RENDER_H_
