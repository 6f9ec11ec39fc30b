// gos-ps: jobs and nodes of the gos cluster (squeue / flux jobs), or the showmesh-style grid.
#include <unistd.h>

#include <cstdio>

#include "client.h"
#include "gos/coordinator/ps.h"
#include "gos/os/flags.h"
#include "gos/os/messages.h"
#include "gos/storage/tables.h"
#include "render.h"

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-ps [options]

Lists the jobs (id, user, state, ranks, nodes, elapsed, checkpoint interval and newest
committed epoch) and nodes (up/down, load) of the gos cluster. With no coordinator running, reads the job table the last local cluster left in the
state dir.

options:
  -a, --all        also list finished jobs (default: the last 20 finished and all live ones)
      --mesh       showmesh-style grid: a letter per job on every node, with a legend
      --nodes      only the node table
      --jobs       only the job table
  -w, --width N    terminal width for --mesh                    (default $COLUMNS or 80)
  -h, --help       this text
)";

StatusOr<os::PsReply> FromTables() {
  std::string dir = StateDir() + "/db";
  GOS_ASSIGN_OR_RETURN(auto tables, storage::Tables::Open(dir));
  GOS_ASSIGN_OR_RETURN(auto jobs, tables->ListJobs());
  GOS_ASSIGN_OR_RETURN(auto nodes, tables->ListNodes());
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  return coordinator::BuildPsReply(jobs, nodes, now, /*live=*/false, tables->checkpoints());
}

int Main(int argc, char** argv) {
  if (int rc = LoadToolConfig("gos-ps"); rc >= 0) return rc;
  bool all = false, mesh = false, only_nodes = false, only_jobs = false;
  uint32_t width = 0;
  os::Flags flags(argc, argv, kUsage);
  flags.Bool("-a|--all", &all);
  flags.Bool("--mesh", &mesh);
  flags.Bool("--nodes", &only_nodes);
  flags.Bool("--jobs", &only_jobs);
  flags.U32("-w|--width", &width);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  if (width == 0) {
    const char* cols = getenv("COLUMNS");
    width = cols && atoi(cols) > 20 ? static_cast<uint32_t>(atoi(cols)) : 80;
  }
  StatusOr<os::PsReply> reply = UnavailableError("no coordinator");
  std::string address = FindCoordinator();
  bool live = !address.empty();
  if (live) {
    reply = QueryPs(address, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  } else {
    reply = FromTables();
  }
  if (!reply.ok()) {
    std::fprintf(stderr, "gos-ps: %s\n", reply.status().ToString().c_str());
    return 1;
  }
  // Live jobs, and the last 20 finished ones unless --all (none on the mesh).
  std::vector<PsJob> jobs;
  size_t finished = 0;
  for (auto it = reply->jobs.rbegin(); it != reply->jobs.rend(); ++it) {
    bool final = it->exit_code >= 0;
    if (final && (mesh || (!all && ++finished > 20))) continue;
    jobs.insert(jobs.begin(), *it);
  }
  const std::vector<PsNode>& nodes = reply->nodes;
  if (!live) std::printf("(no coordinator running: job table of %s)\n", StateDir().c_str());
  if (mesh) {
    std::fputs(RenderMesh(nodes, jobs, reply->running_row, static_cast<int>(width)).c_str(),
               stdout);
    return 0;
  }
  if (!only_nodes) std::fputs(FormatJobs(jobs).c_str(), stdout);
  if (!only_nodes && !only_jobs) std::fputs("\n", stdout);
  if (!only_jobs) std::fputs(FormatNodes(nodes).c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
