// What the parts of the MPI subset built on its own public calls (rma.cc) need from the rest
// of the library (defined in type.cc and errhandler.cc); the other files share mpi_impl.h.
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

#endif  // GOS_LIBGOS_MPI_INTERNAL_H_
