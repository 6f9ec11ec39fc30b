// The Fortran bindings' conversions and sentinels, and the calls written by hand: MPI_INIT and
// MPI_INIT_THREAD (no argc/argv in Fortran), MPI_WTIME and MPI_WTICK (functions),
// MPI_COMM_GET_ATTR and MPI_ATTR_GET (the attribute's value, not a pointer to it) and
// MPI_BUFFER_DETACH (no address to give back). The rest is generated (gen_bindings.py).
#include "fortran.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "mpi.h"

// mpif.h's sentinels: a COMMON block each (gen_mpif.c), defined here, so that their addresses
// are known. gfortran names COMMON /GOS_MPIF_BOTTOM/ gos_mpif_bottom_; a program's own common
// definitions of them merge with these (aligned as gfortran aligns COMMON blocks).
extern "C" {
alignas(16) MPI_Fint gos_mpif_bottom_[1];
alignas(16) MPI_Fint gos_mpif_in_place_[1];
alignas(16) MPI_Fint gos_mpif_status_ignore_[MPI_F_STATUS_SIZE];
alignas(16) MPI_Fint gos_mpif_statuses_ignore_[MPI_F_STATUS_SIZE];
alignas(16) MPI_Fint gos_mpif_errcodes_ignore_[1];
alignas(16) MPI_Fint gos_mpif_unweighted_[1];
alignas(16) MPI_Fint gos_mpif_weights_empty_[1];
}

namespace gos::mpi::fortran {

void* Buf(void* p) {
  if (p == gos_mpif_bottom_) return MPI_BOTTOM;
  if (p == gos_mpif_in_place_) return MPI_IN_PLACE;
  return p;
}

bool IsStatusIgnore(const MPI_Fint* status) {
  return status == gos_mpif_status_ignore_ || status == gos_mpif_statuses_ignore_;
}

int* Weights(MPI_Fint* weights) {
  if (weights == gos_mpif_unweighted_) return MPI_UNWEIGHTED;
  if (weights == gos_mpif_weights_empty_) return MPI_WEIGHTS_EMPTY;
  return weights;
}

std::string FromFortran(const char* s, size_t len) {
  while (len > 0 && s[len - 1] == ' ') --len;
  return std::string(s, len);
}

void ToFortran(const char* c, char* f, size_t len) {
  const size_t n = std::min(std::strlen(c), len);
  std::memcpy(f, c, n);
  std::memset(f + n, ' ', len - n);
}

void StatusesToFortran(const MPI_Status* c, int n, MPI_Fint* f) {
  for (int i = 0; i < n; ++i)
    PMPI_Status_c2f(&c[i], f + static_cast<ptrdiff_t>(i) * MPI_F_STATUS_SIZE);
}

}  // namespace gos::mpi::fortran

namespace {

// MPI_COMM_GET_ATTR's value: a predefined attribute's integer (C gives a pointer to it), or
// the value a C program stored.
int GetAttr(MPI_Fint* comm, MPI_Fint* keyval, MPI_Aint* value, MPI_Fint* flag) {
  void* v = nullptr;
  int f = 0;
  const int err = PMPI_Comm_get_attr(*comm, *keyval, &v, &f);
  *flag = f != 0 ? 1 : 0;
  if (err == MPI_SUCCESS && f != 0) {
    const bool predefined = *keyval >= MPI_TAG_UB && *keyval <= MPI_LASTUSEDCODE;
    *value = predefined ? *static_cast<int*>(v) : reinterpret_cast<MPI_Aint>(v);
  }
  return err;
}

}  // namespace

extern "C" {

void pmpi_init_(MPI_Fint* ierr) { *ierr = PMPI_Init(nullptr, nullptr); }
GOS_MPIF_ALIASES(init)

void pmpi_init_thread_(MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierr) {
  *ierr = PMPI_Init_thread(nullptr, nullptr, *required, provided);
}
GOS_MPIF_ALIASES(init_thread)

double pmpi_wtime_() { return PMPI_Wtime(); }
GOS_MPIF_ALIASES(wtime)

double pmpi_wtick_() { return PMPI_Wtick(); }
GOS_MPIF_ALIASES(wtick)

void pmpi_comm_get_attr_(MPI_Fint* comm, MPI_Fint* keyval, MPI_Aint* value, MPI_Fint* flag,
                         MPI_Fint* ierr) {
  *ierr = GetAttr(comm, keyval, value, flag);
}
GOS_MPIF_ALIASES(comm_get_attr)

// MPI-1's MPI_ATTR_GET: the value in a default INTEGER.
void pmpi_attr_get_(MPI_Fint* comm, MPI_Fint* keyval, MPI_Fint* value, MPI_Fint* flag,
                    MPI_Fint* ierr) {
  MPI_Aint v = 0;
  *ierr = GetAttr(comm, keyval, &v, flag);
  if (*flag != 0) *value = static_cast<MPI_Fint>(v);
}
GOS_MPIF_ALIASES(attr_get)

void pmpi_buffer_detach_(void* /*buffer_addr*/, MPI_Fint* size, MPI_Fint* ierr) {
  void* addr = nullptr;
  *ierr = PMPI_Buffer_detach(&addr, size);
}
GOS_MPIF_ALIASES(buffer_detach)

}  // extern "C"
