/* master_worker: rank 0 hands out T tasks (argument, default 20) to the other ranks, one at a
 * time, and takes results back in whatever order they finish (MPI_Recv from MPI_ANY_SOURCE).
 * A worker "works" for a random time (usleep(rand() % MAX_US), MAX_US the second argument,
 * default 20000, seeded by rank and time) and replies with result(task). The master prints the
 * completion order ("task 3 done by rank 2") and the sum of the results, which does not depend
 * on the order; it checks every task came back exactly once. With one rank the master does
 * the tasks itself. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { kTagTask = 1, kTagResult = 2, kTagStop = 3 };

static long long Result(int task) { return (long long)task * task + 1; }

static void Work(int max_us) {
  if (max_us > 0) usleep((useconds_t)(rand() % max_us));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int tasks = argc > 1 ? atoi(argv[1]) : 20;
  const int max_us = argc > 2 ? atoi(argv[2]) : 20000;
  srand((unsigned)rank * 7919u + (unsigned)time(NULL));

  int rc = 0;
  if (rank == 0) {
    long long sum = 0, expected = 0;
    int* done = calloc((size_t)(tasks > 0 ? tasks : 1), sizeof(int));
    for (int t = 0; t < tasks; ++t) expected += Result(t);
    if (size == 1) {
      for (int t = 0; t < tasks; ++t) {
        Work(max_us);
        sum += Result(t);
        done[t]++;
        printf("task %d done by rank 0\n", t);
      }
    } else {
      int next = 0, outstanding = 0;
      /* One task to each worker to start with; workers without one are told to stop. */
      for (int w = 1; w < size; ++w) {
        if (next < tasks) {
          MPI_Send(&next, 1, MPI_INT, w, kTagTask, MPI_COMM_WORLD);
          ++next;
          ++outstanding;
        } else {
          MPI_Send(&next, 1, MPI_INT, w, kTagStop, MPI_COMM_WORLD);
        }
      }
      while (outstanding > 0) {
        long long reply[2]; /* task, result */
        MPI_Status st;
        MPI_Recv(reply, 2, MPI_LONG_LONG, MPI_ANY_SOURCE, kTagResult, MPI_COMM_WORLD, &st);
        --outstanding;
        const int t = (int)reply[0];
        printf("task %d done by rank %d\n", t, st.MPI_SOURCE);
        if (t < 0 || t >= tasks || reply[1] != Result(t)) {
          printf("bad reply from rank %d: task %lld result %lld\n", st.MPI_SOURCE, reply[0],
                 reply[1]);
          rc = 1;
        } else {
          done[t]++;
          sum += reply[1];
        }
        if (next < tasks) {
          MPI_Send(&next, 1, MPI_INT, st.MPI_SOURCE, kTagTask, MPI_COMM_WORLD);
          ++next;
          ++outstanding;
        } else {
          MPI_Send(&next, 1, MPI_INT, st.MPI_SOURCE, kTagStop, MPI_COMM_WORLD);
        }
      }
    }
    for (int t = 0; t < tasks; ++t) {
      if (done[t] != 1) {
        printf("task %d came back %d times\n", t, done[t]);
        rc = 1;
      }
    }
    free(done);
    printf("master_worker: %d tasks on %d ranks, sum %lld, expected %lld: %s\n", tasks, size, sum,
           expected, sum == expected && rc == 0 ? "ok" : "MISMATCH");
    if (sum != expected) rc = 1;
  } else {
    for (;;) {
      int t;
      MPI_Status st;
      MPI_Recv(&t, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      if (st.MPI_TAG == kTagStop) break;
      Work(max_us);
      long long reply[2] = {t, Result(t)};
      MPI_Send(reply, 2, MPI_LONG_LONG, 0, kTagResult, MPI_COMM_WORLD);
    }
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
