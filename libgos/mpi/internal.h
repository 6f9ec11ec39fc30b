// What the parts of the MPI subset built on its own public calls (rma.cc) need from the rest
// of the library (defined in type.cc and errhandler.cc), and the macro every file defining MPI
// calls uses (GOS_MPI_WEAK_ALIAS); the other files share mpi_impl.h too.
// Not installed; the same threading rules as mpi.h (one thread at a time).
#ifndef GOS_LIBGOS_MPI_INTERNAL_H_
#define GOS_LIBGOS_MPI_INTERNAL_H_

#include <memory>

#include "datatype.h"
#include "mpi.h"

namespace gos::mpi {

// The layout of `datatype` when it may be used in a transfer (basic, or derived, committed
// and not freed); nullptr otherwise.
std::shared_ptr<const TypeNode> TransferLayout(MPI_Datatype datatype);

// MPI's error path for call `fn`: applies the error handler of `comm` (MPI_COMM_WORLD's when
// comm is not a communicator). Returns `code` under MPI_ERRORS_RETURN; otherwise prints why
// and ends the job. MPI_SUCCESS passes through.
int FailCall(MPI_Comm comm, const char* fn, int code);

}  // namespace gos::mpi

// The profiling interface (MPI 4.1, 15.2): each call is defined as PMPI_<name>, preceded by
// GOS_MPI_WEAK_ALIAS(<name>), which makes MPI_<name> a weak alias of it. A tool's own
// MPI_<name>, linked before libgos_mpi.a, then wins without a duplicate definition and calls
// PMPI_<name>. The alias takes PMPI_<name>'s type (gos_pmpi.h), so an MPI_<name> of mpi.h
// with another signature does not compile. Calls from one MPI function to another use the
// PMPI_ names, as MPICH's do, so that a tool counts only the program's own calls (the sends
// of MPI_Win_fence are not MPI_Isend calls). tests/libgos/mpi/pmpi_check.sh checks the archive.
#define GOS_MPI_WEAK_ALIAS(name) \
  extern "C" decltype(PMPI_##name) MPI_##name __attribute__((weak, alias("PMPI_" #name)))

#endif  // GOS_LIBGOS_MPI_INTERNAL_H_
