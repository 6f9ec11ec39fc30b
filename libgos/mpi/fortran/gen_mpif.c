/* Writes the Fortran constants of the gos MPI subset from mpi.h itself, so that they cannot
 * differ from C's: run at build time (libgos/mpi/fortran/CMakeLists.txt).
 *
 *   gen_mpif mpif FILE        mpif.h: the constants, the sentinels' COMMON blocks and the types of
 *                        the functions (MPI_WTIME ...), for `include 'mpif.h'`
 *   gen_mpif constants FILE   the constants and COMMON blocks only, for the mpi module, whose
 *                        interfaces declare the functions
 *
 * The output is both fixed and free form Fortran: statements from column 7, no continuation
 * lines, comments with '!' in column 1. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static void Constant(const char* name, long long value) {
  printf("      INTEGER %s\n      PARAMETER (%s=%lld)\n", name, name, value);
}

#define C(name) Constant(#name, (long long)(name));

/* A sentinel: a variable in a COMMON block of its own, whose address the bindings know
 * (libgos/mpi/fortran/fortran.cc defines the block gos_mpif_<lowercase>_). */
static void Sentinel(const char* name, const char* block, const char* dims) {
  printf("      INTEGER %s%s\n      COMMON /%s/ %s\n      SAVE /%s/\n", name, dims, block, name,
         block);
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "mpif") != 0 && strcmp(argv[1], "constants") != 0)) {
    fprintf(stderr, "usage: gen_mpif mpif|constants FILE\n");
    return 2;
  }
  if (freopen(argv[2], "w", stdout) == NULL) {
    perror(argv[2]);
    return 1;
  }
  const int with_functions = strcmp(argv[1], "mpif") == 0;
  printf("! The gos MPI subset for Fortran (docs/mpi.md). Generated from mpi.h by\n");
  printf("! libgos/mpi/fortran/gen_mpif.c at build time: do not edit.\n");
  C(MPI_VERSION)
  C(MPI_SUBVERSION)
  /* Status, kinds. */
  Constant("MPI_STATUS_SIZE", MPI_F_STATUS_SIZE);
  Constant("MPI_SOURCE", MPI_F_SOURCE + 1);
  Constant("MPI_TAG", MPI_F_TAG + 1);
  Constant("MPI_ERROR", MPI_F_ERROR + 1);
  Constant("MPI_ADDRESS_KIND", (long long)sizeof(MPI_Aint));
  Constant("MPI_OFFSET_KIND", (long long)sizeof(MPI_Offset));
  Constant("MPI_COUNT_KIND", (long long)sizeof(MPI_Count));
  Constant("MPI_INTEGER_KIND", (long long)sizeof(MPI_Fint));
  /* Errors. */
  C(MPI_SUCCESS)
  C(MPI_ERR_BUFFER)
  C(MPI_ERR_COUNT) C(MPI_ERR_TYPE) C(MPI_ERR_TAG) C(MPI_ERR_COMM) C(MPI_ERR_RANK) C(MPI_ERR_ROOT)
      C(MPI_ERR_GROUP) C(MPI_ERR_OP) C(MPI_ERR_ARG) C(MPI_ERR_UNKNOWN) C(MPI_ERR_TRUNCATE)
          C(MPI_ERR_OTHER) C(MPI_ERR_INTERN) C(MPI_ERR_IN_STATUS) C(MPI_ERR_PENDING)
              C(MPI_ERR_REQUEST) C(MPI_ERR_TOPOLOGY) C(MPI_ERR_DIMS) C(MPI_ERR_NO_MEM)
                  C(MPI_ERR_KEYVAL) C(MPI_ERR_WIN) C(MPI_ERR_SIZE) C(MPI_ERR_DISP)
                      C(MPI_ERR_RMA_RANGE) C(MPI_ERR_LASTCODE)
      /* Limits, thread levels, special values. */
      C(MPI_MAX_PROCESSOR_NAME) C(MPI_MAX_ERROR_STRING) C(MPI_MAX_LIBRARY_VERSION_STRING)
          C(MPI_MAX_OBJECT_NAME) C(MPI_MAX_INFO_KEY) C(MPI_MAX_INFO_VAL) C(MPI_THREAD_SINGLE)
              C(MPI_THREAD_FUNNELED) C(MPI_THREAD_SERIALIZED) C(MPI_THREAD_MULTIPLE)
                  C(MPI_UNDEFINED) C(MPI_PROC_NULL) C(MPI_ANY_SOURCE) C(MPI_ANY_TAG)
                      C(MPI_BSEND_OVERHEAD) C(MPI_IDENT) C(MPI_CONGRUENT) C(MPI_SIMILAR)
                          C(MPI_UNEQUAL) C(MPI_ORDER_C) C(MPI_ORDER_FORTRAN) C(MPI_COMM_TYPE_SHARED)
                              C(MPI_TAG_UB) C(MPI_HOST) C(MPI_IO) C(MPI_WTIME_IS_GLOBAL)
                                  C(MPI_UNIVERSE_SIZE) C(MPI_APPNUM) C(MPI_LASTUSEDCODE)
                                      C(MPI_KEYVAL_INVALID) C(MPI_GRAPH) C(MPI_CART)
                                          C(MPI_DIST_GRAPH) C(MPI_MODE_NOCHECK) C(MPI_MODE_NOSTORE)
                                              C(MPI_MODE_NOPUT) C(MPI_MODE_NOPRECEDE)
                                                  C(MPI_MODE_NOSUCCEED)
      /* Handles. */
      C(MPI_COMM_NULL) C(MPI_COMM_WORLD) C(MPI_COMM_SELF) C(MPI_GROUP_NULL) C(MPI_GROUP_EMPTY)
          C(MPI_REQUEST_NULL) C(MPI_INFO_NULL) C(MPI_WIN_NULL) C(MPI_ERRHANDLER_NULL)
              C(MPI_ERRORS_ARE_FATAL) C(MPI_ERRORS_RETURN) C(MPI_ERRORS_ABORT) C(MPI_OP_NULL)
                  C(MPI_SUM) C(MPI_PROD) C(MPI_MIN) C(MPI_MAX) C(MPI_LAND) C(MPI_LOR) C(MPI_LXOR)
                      C(MPI_BAND) C(MPI_BOR) C(MPI_BXOR) C(MPI_MINLOC) C(MPI_MAXLOC) C(MPI_REPLACE)
      /* Datatypes: Fortran's, then C's (a Fortran program may exchange data with C code). */
      C(MPI_DATATYPE_NULL) C(MPI_CHARACTER) C(MPI_LOGICAL) C(MPI_INTEGER) C(MPI_REAL)
          C(MPI_DOUBLE_PRECISION) C(MPI_COMPLEX) C(MPI_DOUBLE_COMPLEX) C(MPI_2INTEGER) C(MPI_2REAL)
              C(MPI_2DOUBLE_PRECISION) C(MPI_INTEGER1) C(MPI_INTEGER2) C(MPI_INTEGER4)
                  C(MPI_INTEGER8) C(MPI_REAL4) C(MPI_REAL8) C(MPI_COMPLEX8) C(MPI_COMPLEX16)
                      C(MPI_BYTE) C(MPI_PACKED) C(MPI_AINT) C(MPI_OFFSET) C(MPI_COUNT) C(MPI_CHAR)
                          C(MPI_SIGNED_CHAR) C(MPI_UNSIGNED_CHAR) C(MPI_SHORT) C(MPI_UNSIGNED_SHORT)
                              C(MPI_INT) C(MPI_UNSIGNED) C(MPI_LONG) C(MPI_UNSIGNED_LONG)
                                  C(MPI_LONG_LONG) C(MPI_LONG_LONG_INT) C(MPI_UNSIGNED_LONG_LONG)
                                      C(MPI_INT8_T) C(MPI_UINT8_T) C(MPI_INT16_T) C(MPI_UINT16_T)
                                          C(MPI_INT32_T) C(MPI_UINT32_T) C(MPI_INT64_T)
                                              C(MPI_UINT64_T) C(MPI_FLOAT) C(MPI_DOUBLE)
                                                  C(MPI_LONG_DOUBLE) C(MPI_C_BOOL) C(MPI_WCHAR)
                                                      C(MPI_FLOAT_INT) C(MPI_DOUBLE_INT)
                                                          C(MPI_LONG_INT) C(MPI_2INT)
                                                              C(MPI_SHORT_INT)
                                                                  C(MPI_LONG_DOUBLE_INT)
      /* Sentinels, recognized by their address. */
      Sentinel("MPI_BOTTOM", "GOS_MPIF_BOTTOM", "");
  Sentinel("MPI_IN_PLACE", "GOS_MPIF_IN_PLACE", "");
  Sentinel("MPI_STATUS_IGNORE", "GOS_MPIF_STATUS_IGNORE", "(MPI_STATUS_SIZE)");
  Sentinel("MPI_STATUSES_IGNORE", "GOS_MPIF_STATUSES_IGNORE", "(MPI_STATUS_SIZE,1)");
  Sentinel("MPI_ERRCODES_IGNORE", "GOS_MPIF_ERRCODES_IGNORE", "(1)");
  Sentinel("MPI_UNWEIGHTED", "GOS_MPIF_UNWEIGHTED", "(1)");
  Sentinel("MPI_WEIGHTS_EMPTY", "GOS_MPIF_WEIGHTS_EMPTY", "(1)");
  if (with_functions) {
    printf("      DOUBLE PRECISION MPI_WTIME, MPI_WTICK, PMPI_WTIME, PMPI_WTICK\n");
    printf("      EXTERNAL MPI_WTIME, MPI_WTICK, PMPI_WTIME, PMPI_WTICK\n");
  }
  return fclose(stdout) == 0 ? 0 : 1;
}
