// The MPIR process acquisition interface of gos-run (MPI Forum, "The MPIR Process Acquisition
// Interface", version 1.1; docs/debugging.md). gos-run is the starter: it defines
// MPIR_proctable, MPIR_proctable_size, MPIR_being_debugged, MPIR_debug_state,
// MPIR_debug_abort_string, MPIR_Breakpoint, MPIR_i_am_starter (the ranks are not its
// children), MPIR_partial_attach_ok and MPIR_ignore_queues (no message-queue library). A
// parallel debugger starts gos-run under its control (or attaches to it), sets
// MPIR_being_debugged, and stops at MPIR_Breakpoint to read the table; the ranks of
// `gos-run --debug` wait in MPI_Init until it sets MPIR_debug_gate in each of them.
#ifndef GOS_TOOLS_MPIR_H_
#define GOS_TOOLS_MPIR_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "gos/os/messages.h"
#include "gos/status.h"

namespace gos::tools {

// MPIR_being_debugged: a debugger set it.
bool MpirBeingDebugged();

// Asks the coordinator at `address` where job's ranks are until all `ntasks` have started (at
// most `timeout`), fills MPIR_proctable with them (host, executable, pid), sets
// MPIR_debug_state to MPIR_DEBUG_SPAWNED and calls MPIR_Breakpoint. Returns the table.
StatusOr<os::RankTable> AcquireProcesses(const std::string& address, uint64_t job, uint32_t ntasks,
                                         std::chrono::seconds timeout);

}  // namespace gos::tools

#endif  // GOS_TOOLS_MPIR_H_
