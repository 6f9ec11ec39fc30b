/* reuse: large sends (512 KiB .. 8 MiB) from ONE buffer whose contents change between sends,
 * as programs reuse their buffers once a send completes. Every receiver must get the contents
 * the buffer had while its send was pending, never an earlier one: also after a truncated
 * receive (less moved than sent), after a cancelled send, and with one buffer sent to two
 * ranks at once. (A read-ahead of send data tried in the nodeagent, docs/benchmarks.md, had
 * to pass this; it is kept as a guard for any such change.) Rank 0 sends; ranks 1 and 2 (if
 * any) receive. */
#include "check.h"

#define MAXB (8 << 20)

static void Fill(uint64_t* w, size_t words, uint64_t seed) {
  for (size_t i = 0; i < words; ++i) w[i] = Pattern(seed, i);
}

static int Same(const uint64_t* w, size_t words, uint64_t seed) {
  for (size_t i = 0; i < words; ++i) {
    if (w[i] != Pattern(seed, i)) return 0;
  }
  return 1;
}

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "reuse");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  uint64_t* buf = malloc(MAXB);
  CHECK(buf != NULL, "malloc");
  const size_t sizes[] = {512 << 10, 1 << 20, 3 << 20, 8 << 20};
  uint64_t seed = 1;
  if (g_size < 2) return FinishTest();
  /* 1. Sizes and contents change at every send; blocking and synchronous sends. */
  for (int round = 0; round < 3; ++round) {
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s, ++seed) {
      const size_t words = sizes[s] / 8;
      if (g_rank == 0) {
        Fill(buf, words, seed);
        if (round == 1) {
          CHECK_MPI(MPI_Ssend(buf, (int)words, MPI_UINT64_T, 1, 1, MPI_COMM_WORLD));
        } else {
          CHECK_MPI(MPI_Send(buf, (int)words, MPI_UINT64_T, 1, 1, MPI_COMM_WORLD));
        }
      } else if (g_rank == 1) {
        memset(buf, 0, sizes[s]);
        CHECK_MPI(MPI_Recv(buf, (int)words, MPI_UINT64_T, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(Same(buf, words, seed), "round %d size %zu: stale or wrong data", round, sizes[s]);
      }
    }
  }
  /* 2. A truncated receive moves only part of a send; the buffer then changes and is sent
   * again in full. */
  ++seed;
  if (g_rank == 0) {
    Fill(buf, (2 << 20) / 8, seed);
    CHECK_MPI(MPI_Send(buf, (2 << 20) / 8, MPI_UINT64_T, 1, 2, MPI_COMM_WORLD));
    Fill(buf, (2 << 20) / 8, seed + 1);
    CHECK_MPI(MPI_Send(buf, (2 << 20) / 8, MPI_UINT64_T, 1, 3, MPI_COMM_WORLD));
  } else if (g_rank == 1) {
    MPI_Status st;
    int rc = MPI_Recv(buf, 1000, MPI_UINT64_T, 0, 2, MPI_COMM_WORLD, &st);
    CHECK(rc == MPI_ERR_TRUNCATE || st.MPI_ERROR == MPI_ERR_TRUNCATE, "rc %d", rc);
    CHECK(Same(buf, 1000, seed), "truncated receive: wrong data");
    memset(buf, 0, 2 << 20);
    CHECK_MPI(MPI_Recv(buf, (2 << 20) / 8, MPI_UINT64_T, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(Same(buf, (2 << 20) / 8, seed + 1), "after a truncated receive: stale data");
  }
  seed += 2;
  /* 3. A large send cancelled before any receive; the buffer changes and goes again. */
  if (g_rank == 0) {
    MPI_Request req;
    MPI_Status st;
    Fill(buf, (1 << 20) / 8, seed);
    CHECK_MPI(MPI_Isend(buf, (1 << 20) / 8, MPI_UINT64_T, 1, 4, MPI_COMM_WORLD, &req));
    CHECK_MPI(MPI_Cancel(&req));
    CHECK_MPI(MPI_Wait(&req, &st));
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    Fill(buf, (1 << 20) / 8, seed + (cancelled ? 1 : 0));
    CHECK_MPI(MPI_Send(&cancelled, 1, MPI_INT, 1, 5, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Send(buf, (1 << 20) / 8, MPI_UINT64_T, 1, 4, MPI_COMM_WORLD));
  } else if (g_rank == 1) {
    int cancelled = 0;
    CHECK_MPI(MPI_Recv(&cancelled, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    if (!cancelled) { /* the first send was not withdrawn: it comes first */
      CHECK_MPI(
          MPI_Recv(buf, (1 << 20) / 8, MPI_UINT64_T, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK(Same(buf, (1 << 20) / 8, seed), "uncancelled send: wrong data");
    }
    memset(buf, 0, 1 << 20);
    CHECK_MPI(MPI_Recv(buf, (1 << 20) / 8, MPI_UINT64_T, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(Same(buf, (1 << 20) / 8, seed + (cancelled ? 1 : 0)),
          "after a cancelled send: stale data");
  }
  seed += 2;
  /* 4. One buffer to two ranks at once, then new contents to both. */
  if (g_size >= 3) {
    for (int k = 0; k < 2; ++k, ++seed) {
      if (g_rank == 0) {
        MPI_Request r[2];
        Fill(buf, (2 << 20) / 8, seed);
        CHECK_MPI(MPI_Isend(buf, (2 << 20) / 8, MPI_UINT64_T, 1, 6, MPI_COMM_WORLD, &r[0]));
        CHECK_MPI(MPI_Isend(buf, (2 << 20) / 8, MPI_UINT64_T, 2, 6, MPI_COMM_WORLD, &r[1]));
        CHECK_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
      } else if (g_rank == 1 || g_rank == 2) {
        memset(buf, 0, 2 << 20);
        CHECK_MPI(
            MPI_Recv(buf, (2 << 20) / 8, MPI_UINT64_T, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(Same(buf, (2 << 20) / 8, seed), "two receivers, pass %d: wrong data", k);
      }
    }
  }
  free(buf);
  return FinishTest();
}
