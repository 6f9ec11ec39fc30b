// Test-only hooks into the process-global state of gos_rank (libgos/bcs/client.cc). Not part
// of the public API: tests/libgos/bcs/client_test.cc uses them to run many init/finalize
// cycles in one process and to observe internal bookkeeping.
#ifndef GOS_LIBGOS_BCS_TESTING_H_
#define GOS_LIBGOS_BCS_TESTING_H_

#include <cstddef>
#include <cstdint>

namespace gos::bcs::testing {

// Forgets everything (unmaps the channel without touching it, frees every request and eager
// copy), as if the process had just started. Nothing else may run in the library meanwhile.
void Reset();

// Eager-send copies whose completion from the agent has not arrived yet.
size_t EagerCopies();

// Requests in the table (user-visible, internal and eager ones not yet completed).
size_t OpenRequests();

// Decisions (test/testany/waitany/iprobe outcomes, wtime values) taken so far, in any mode.
uint64_t DecisionsDone();

}  // namespace gos::bcs::testing

#endif  // GOS_LIBGOS_BCS_TESTING_H_
