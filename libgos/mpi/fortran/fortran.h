// The Fortran bindings' conversions (fortran.cc), shared with the generated wrappers
// (gen_bindings.py). Not installed.
#ifndef GOS_LIBGOS_MPI_FORTRAN_FORTRAN_H_
#define GOS_LIBGOS_MPI_FORTRAN_FORTRAN_H_

#include <cstddef>
#include <string>

#include "mpi.h"

namespace gos::mpi::fortran {

// A choice buffer: the addresses of mpif.h's MPI_BOTTOM and MPI_IN_PLACE become C's.
void* Buf(void* p);

// True for the addresses of MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE.
bool IsStatusIgnore(const MPI_Fint* status);

// A weights argument: the addresses of MPI_UNWEIGHTED and MPI_WEIGHTS_EMPTY become C's.
int* Weights(MPI_Fint* weights);

// A CHARACTER(len) argument as a C string: trailing blanks dropped.
std::string FromFortran(const char* s, size_t len);

// Copies C string `c` into CHARACTER(len) `f`, cut to len and padded with blanks.
void ToFortran(const char* c, char* f, size_t len);

// Converts n C statuses into the Fortran array `f` (MPI_STATUS_SIZE integers each); nothing
// for n <= 0 (MPI_UNDEFINED).
void StatusesToFortran(const MPI_Status* c, int n, MPI_Fint* f);

}  // namespace gos::mpi::fortran

// gfortran's names of call `name` (lowercase): pmpi_<name>_ is defined; mpi_<name>_ and, for
// programs compiled with -fsecond-underscore, mpi_<name>__ are weak aliases of it, so that a
// PMPI tool can define mpi_<name>_ and call pmpi_<name>_ (as for C, internal.h).
#define GOS_MPIF_ALIASES(name)                         \
  extern "C" decltype(pmpi_##name##_) mpi_##name##_    \
      __attribute__((weak, alias("pmpi_" #name "_"))); \
  extern "C" decltype(pmpi_##name##_) mpi_##name##__   \
      __attribute__((weak, alias("pmpi_" #name "_")));

#endif  // GOS_LIBGOS_MPI_FORTRAN_FORTRAN_H_
