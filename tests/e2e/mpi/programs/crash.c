/* crash: rank 1 (rank 0 when alone) dies of a signal while every other rank waits in an
 * MPI_Recv that nothing will match: "segv" (default) by writing through a null pointer, "kill"
 * by raising SIGKILL. The whole job must end with a non-zero exit and leave no process. */
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include "check.h"

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "crash");
  const int victim = g_size > 1 ? 1 : 0;
  const int use_kill = argc > 1 && strcmp(argv[1], "kill") == 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == victim) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    struct timespec ts = {0, 100 * 1000 * 1000}; /* let the others block in MPI_Recv */
    nanosleep(&ts, NULL);
    printf("crash: rank %d dies of %s\n", g_rank, use_kill ? "SIGKILL" : "SIGSEGV");
    fflush(stdout);
    if (use_kill) raise(SIGKILL);
    volatile int* volatile nowhere = NULL;
    *nowhere = 1;
    printf("FAIL crash: rank %d survived\n", g_rank);
    return 1;
  }
  int v;
  MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  printf("FAIL crash: rank %d's MPI_Recv returned\n", g_rank);
  return 1;
}
