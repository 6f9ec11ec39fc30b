#include "mpir.h"

#include <thread>
#include <vector>

#include "client.h"

// The interface's names and types, as debuggers look them up (C linkage, in the executable).
extern "C" {

struct MPIR_PROCDESC {
  char* host_name;
  char* executable_name;
  int pid;
};

enum { MPIR_NULL = 0, MPIR_DEBUG_SPAWNED = 1, MPIR_DEBUG_ABORTING = 2 };

__attribute__((used)) MPIR_PROCDESC* MPIR_proctable = nullptr;
__attribute__((used)) int MPIR_proctable_size = 0;
__attribute__((used)) volatile int MPIR_being_debugged = 0;
__attribute__((used)) volatile int MPIR_debug_state = MPIR_NULL;
__attribute__((used)) char* MPIR_debug_abort_string = nullptr;
// Their presence says: the ranks are not gos-run's children, and a debugger may attach to some.
__attribute__((used)) int MPIR_i_am_starter = 1;
__attribute__((used)) int MPIR_partial_attach_ok = 1;
__attribute__((used)) int MPIR_ignore_queues = 1;

// The debugger's breakpoint: must stay a real call.
__attribute__((noinline, used)) void MPIR_Breakpoint(void) { asm volatile("" ::: "memory"); }

}  // extern "C"

namespace gos::tools {
namespace {

// The table's strings, owned here for the life of gos-run.
std::vector<std::string> g_strings;
std::vector<MPIR_PROCDESC> g_table;

StatusOr<os::RankTable> QueryRanks(const std::string& address, uint64_t job) {
  GOS_ASSIGN_OR_RETURN(auto ch, ConnectCoordinator(address));
  GOS_RETURN_IF_ERROR(ch->Send(os::Frame::kRanks, os::EncodeU64(job)));
  GOS_ASSIGN_OR_RETURN(os::FrameIn f,
                       ch->Receive(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  if (f.type == os::Frame::kError) {
    auto text = os::DecodeText(f.payload);
    return FailedPreconditionError(text.ok() ? *text : "refused");
  }
  if (f.type != os::Frame::kRanksReply) return InternalError("unexpected answer to RANKS");
  return os::DecodeRankTable(f.payload);
}

}  // namespace

bool MpirBeingDebugged() { return MPIR_being_debugged != 0; }

StatusOr<os::RankTable> AcquireProcesses(const std::string& address, uint64_t job, uint32_t ntasks,
                                         std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  os::RankTable t;
  while (true) {
    auto got = QueryRanks(address, job);
    if (got.ok()) {
      t = std::move(*got);
      size_t started = 0;
      for (const auto& r : t.ranks) started += r.pid > 0 ? 1 : 0;
      if (t.ranks.size() == ntasks && started == ntasks) break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return DeadlineExceededError(
          "the ranks of job " + std::to_string(job) + " did not all start in " +
          std::to_string(timeout.count()) + " s" +
          (got.ok() ? "" : " (" + std::string(got.status().message()) + ")"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  g_strings.clear();
  g_strings.reserve(2 * t.ranks.size());
  for (const auto& r : t.ranks) {
    g_strings.push_back(r.host);
    g_strings.push_back(r.exe);
  }
  g_table.assign(t.ranks.size(), MPIR_PROCDESC{});
  for (size_t i = 0; i < t.ranks.size(); ++i) {
    g_table[i].host_name = g_strings[2 * i].data();
    g_table[i].executable_name = g_strings[2 * i + 1].data();
    g_table[i].pid = t.ranks[i].pid;
  }
  MPIR_proctable = g_table.data();
  MPIR_proctable_size = static_cast<int>(g_table.size());
  MPIR_debug_state = MPIR_DEBUG_SPAWNED;
  MPIR_Breakpoint();
  return t;
}

}  // namespace gos::tools
