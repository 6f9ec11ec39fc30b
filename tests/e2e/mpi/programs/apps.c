/* What outside MPI codes built unmodified with gos-cc needed (docs/mpi.md, "A check against
 * FFTW ..."): the Fortran handle conversions (MPI_Comm_f2c and the like, MPI_Fint), which
 * FFTW's MPI library calls in its Fortran 2003 wrappers; a communicator that went through them
 * still works. */
#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "apps");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rank = g_rank, size = g_size;

  /* Handles survive the round trip through their Fortran form. */
  {
    MPI_Comm dup = MPI_COMM_NULL;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    const MPI_Fint f = MPI_Comm_c2f(dup);
    MPI_Comm back = MPI_Comm_f2c(f);
    int cmp = -1;
    CHECK_MPI(MPI_Comm_compare(dup, back, &cmp));
    CHECK(cmp == MPI_IDENT, "MPI_Comm_f2c(MPI_Comm_c2f(dup)) compares %d to dup", cmp);
    int sum = 0, one = 1;
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, back));
    CHECK(sum == size, "allreduce on the converted communicator: %d, want %d", sum, size);
    CHECK(MPI_Comm_f2c(MPI_Comm_c2f(MPI_COMM_WORLD)) == MPI_COMM_WORLD, "MPI_COMM_WORLD changed");
    CHECK_MPI(MPI_Comm_free(&dup));

    MPI_Datatype pair = MPI_DATATYPE_NULL;
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
    CHECK_MPI(MPI_Type_commit(&pair));
    MPI_Datatype pair_back = MPI_Type_f2c(MPI_Type_c2f(pair));
    int bytes = 0;
    CHECK_MPI(MPI_Type_size(pair_back, &bytes));
    CHECK(bytes == 2 * (int)sizeof(int), "converted type has size %d", bytes);
    CHECK(MPI_Type_f2c(MPI_Type_c2f(MPI_DOUBLE)) == MPI_DOUBLE, "MPI_DOUBLE changed");
    CHECK_MPI(MPI_Type_free(&pair));

    MPI_Group group = MPI_GROUP_NULL;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &group));
    int group_size = -1;
    CHECK_MPI(MPI_Group_size(MPI_Group_f2c(MPI_Group_c2f(group)), &group_size));
    CHECK(group_size == size, "converted group has %d members", group_size);
    CHECK_MPI(MPI_Group_free(&group));

    int token = rank, got = -1;
    MPI_Request req = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &req));
    MPI_Request req_back = MPI_Request_f2c(MPI_Request_c2f(req));
    CHECK_MPI(MPI_Send(&token, 1, MPI_INT, 0, 5, MPI_COMM_SELF));
    CHECK_MPI(MPI_Wait(&req_back, MPI_STATUS_IGNORE));
    CHECK(got == rank, "received %d through the converted request", got);

    CHECK(MPI_Op_f2c(MPI_Op_c2f(MPI_MAX)) == MPI_MAX, "MPI_MAX changed");
    CHECK(MPI_Errhandler_f2c(MPI_Errhandler_c2f(MPI_ERRORS_RETURN)) == MPI_ERRORS_RETURN,
          "MPI_ERRORS_RETURN changed");
    MPI_Info info = MPI_INFO_NULL;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(MPI_Info_f2c(MPI_Info_c2f(info)), "key", "value"));
    int nkeys = -1;
    CHECK_MPI(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys == 1, "info set through its converted handle has %d keys", nkeys);
    CHECK_MPI(MPI_Info_free(&info));
  }

  return FinishTest();
}
