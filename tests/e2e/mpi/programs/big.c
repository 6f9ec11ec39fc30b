/* big: a 64 MiB message from rank 0 to the last rank and back (every word inverted), each
 * word checked; with one rank, to itself. Prints the achieved bandwidth (informational). */
#include "check.h"

#define kWords ((size_t)(64u << 20) / sizeof(unsigned))

/* Counts the words that differ from the pattern; on a mismatch also prints where the wrong
 * words are (first and last index, how many runs, the first wrong value), so that a failure
 * says whether whole chunks went missing or were misplaced. */
static size_t CheckWords(const unsigned* buf, uint32_t seed, unsigned xor_mask, const char* what) {
  size_t bad = 0, runs = 0, first = 0, last = 0;
  for (size_t i = 0; i < kWords; ++i) {
    if (buf[i] == (Pattern(seed, i) ^ xor_mask)) continue;
    if (bad == 0) first = i;
    if (bad == 0 || last != i - 1) ++runs;
    last = i;
    ++bad;
  }
  if (bad != 0) {
    printf(
        "big rank %d, %s: %zu wrong words in %zu runs, bytes %zu..%zu; word %zu is 0x%08x, "
        "expected 0x%08x\n",
        g_rank, what, bad, runs, first * sizeof(unsigned), last * sizeof(unsigned) + 3, first,
        buf[first], Pattern(seed, first) ^ xor_mask);
  }
  return bad;
}

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "big");
  const int a = 0, b = g_size - 1;
  if (g_rank == a || g_rank == b) {
    unsigned* buf = malloc(kWords * sizeof(unsigned));
    unsigned* in = malloc(kWords * sizeof(unsigned));
    if (buf == NULL || in == NULL) {
      printf("FAIL big rank %d: out of memory\n", g_rank);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Status st;
    int count = -1;
    if (a == b) {
      for (size_t i = 0; i < kWords; ++i) buf[i] = Pattern(1, i);
      MPI_Request r;
      MPI_Irecv(in, (int)kWords, MPI_UNSIGNED, a, 1, MPI_COMM_WORLD, &r);
      MPI_Send(buf, (int)kWords, MPI_UNSIGNED, a, 1, MPI_COMM_WORLD);
      MPI_Wait(&r, &st);
      MPI_Get_count(&st, MPI_BYTE, &count);
      CHECK(count == (int)(kWords * sizeof(unsigned)), "self: %d bytes", count);
      size_t bad = CheckWords(in, 1, 0, "self");
      CHECK(bad == 0, "self: %zu words wrong", bad);
    } else if (g_rank == a) {
      for (size_t i = 0; i < kWords; ++i) buf[i] = Pattern(1, i);
      const double t0 = MPI_Wtime();
      MPI_Send(buf, (int)kWords, MPI_UNSIGNED, b, 1, MPI_COMM_WORLD);
      MPI_Recv(in, (int)kWords, MPI_UNSIGNED, b, 2, MPI_COMM_WORLD, &st);
      const double t = MPI_Wtime() - t0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      CHECK(count == (int)(kWords * sizeof(unsigned)), "reply: %d bytes", count);
      size_t bad = CheckWords(in, 1, ~0u, "reply");
      CHECK(bad == 0, "reply: %zu words wrong", bad);
      printf("big: 2 x 64 MiB in %.3f s (%.0f MB/s)\n", t, 2.0 * 64 * 1048576 / t / 1e6);
    } else {
      MPI_Recv(in, (int)kWords, MPI_UNSIGNED, a, 1, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, MPI_UNSIGNED, &count);
      CHECK(count == (int)kWords, "received %d words", count);
      size_t bad = CheckWords(in, 1, 0, "message");
      CHECK(bad == 0, "%zu words wrong", bad);
      for (size_t i = 0; i < kWords; ++i) in[i] = ~in[i];
      MPI_Send(in, (int)kWords, MPI_UNSIGNED, a, 2, MPI_COMM_WORLD);
    }
    free(buf);
    free(in);
  }
  return FinishTest();
}
