/* waitfamily: MPI_Waitany, Waitsome, Testany, Testall, Test, Request_free. The partner sends
 * message B only after this rank told it to ("go"), so "not complete yet" is certain, not a
 * race: Testall must say false while B is missing; Waitany then returns A; after "go", B
 * completes. Also: completed requests become MPI_REQUEST_NULL; all-null arrays give
 * MPI_UNDEFINED (Waitany, Testany with flag true, Waitsome outcount). */
#include "check.h"

enum { kMany = 8 };

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "waitfamily");
  const int partner = Partner();
  const int self = partner == g_rank;
  int a = -1, b = -1, go = 1, out_a = 100 + g_rank, out_b = 200 + g_rank;
  MPI_Request r[2], sa, sb, sgo;
  MPI_Irecv(&a, 1, MPI_INT, partner, 1, MPI_COMM_WORLD, &r[0]);
  MPI_Irecv(&b, 1, MPI_INT, partner, 2, MPI_COMM_WORLD, &r[1]);
  MPI_Isend(&out_a, 1, MPI_INT, partner, 1, MPI_COMM_WORLD, &sa);
  int flag = 1, index = -1;
  MPI_Status st;
  if (!self) {
    MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE);
    CHECK(!flag, "Testall true although message B cannot have been sent");
    MPI_Waitany(2, r, &index, &st);
    CHECK(index == 0, "Waitany returned %d, only A can complete", index);
    CHECK(a == 100 + partner && st.MPI_TAG == 1, "A = %d tag %d", a, st.MPI_TAG);
    CHECK(r[0] == MPI_REQUEST_NULL, "completed request not MPI_REQUEST_NULL");
    /* Tell the partner to send B, and wait for its "go" before sending ours. */
    MPI_Isend(&go, 1, MPI_INT, partner, 3, MPI_COMM_WORLD, &sgo);
    int their_go = 0;
    MPI_Recv(&their_go, 1, MPI_INT, partner, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&sgo, MPI_STATUS_IGNORE);
  }
  MPI_Isend(&out_b, 1, MPI_INT, partner, 2, MPI_COMM_WORLD, &sb);
  do {
    MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE);
  } while (!flag);
  CHECK(a == 100 + partner && b == 200 + partner, "A = %d, B = %d", a, b);
  CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "Testall left requests");
  MPI_Waitany(2, r, &index, &st);
  CHECK(index == MPI_UNDEFINED, "Waitany on null requests: index %d", index);
  flag = 0;
  MPI_Testany(2, r, &index, &flag, &st);
  CHECK(flag && index == MPI_UNDEFINED, "Testany on null requests: flag %d index %d", flag, index);
  MPI_Test(&r[0], &flag, &st);
  CHECK(flag, "Test on MPI_REQUEST_NULL not complete");
  MPI_Wait(&sa, MPI_STATUS_IGNORE);
  MPI_Wait(&sb, MPI_STATUS_IGNORE);

  /* kMany messages with tags 0..kMany-1 sent in reverse; Waitsome and Testany collect each
   * index exactly once. */
  int in[kMany], outv[kMany], seen[kMany];
  MPI_Request rr[kMany], ss[kMany];
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kMany; ++i) {
      in[i] = -1;
      seen[i] = 0;
      outv[i] = g_rank * 100 + i;
      MPI_Irecv(&in[i], 1, MPI_INT, partner, i, MPI_COMM_WORLD, &rr[i]);
    }
    for (int i = kMany - 1; i >= 0; --i) {
      MPI_Isend(&outv[i], 1, MPI_INT, partner, i, MPI_COMM_WORLD, &ss[i]);
    }
    int done = 0;
    while (done < kMany) {
      if (round == 0) {
        int outcount = -1, idx[kMany];
        MPI_Status sts[kMany];
        MPI_Waitsome(kMany, rr, &outcount, idx, sts);
        CHECK(outcount >= 1 && outcount <= kMany - done, "Waitsome outcount %d", outcount);
        if (outcount < 1) break;
        for (int j = 0; j < outcount; ++j) {
          CHECK(idx[j] >= 0 && idx[j] < kMany && sts[j].MPI_TAG == idx[j],
                "Waitsome index %d tag %d", idx[j], sts[j].MPI_TAG);
          if (idx[j] >= 0 && idx[j] < kMany) seen[idx[j]]++;
        }
        done += outcount;
      } else {
        MPI_Testany(kMany, rr, &index, &flag, &st);
        if (!flag) continue;
        CHECK(index >= 0 && index < kMany && st.MPI_TAG == index, "Testany index %d tag %d", index,
              st.MPI_TAG);
        if (index < 0 || index >= kMany) break;
        seen[index]++;
        ++done;
      }
    }
    for (int i = 0; i < kMany; ++i) {
      CHECK(seen[i] == 1, "round %d: request %d reported %d times", round, i, seen[i]);
      CHECK(in[i] == partner * 100 + i, "round %d: message %d = %d", round, i, in[i]);
    }
    int outcount = 0;
    int idx[kMany];
    MPI_Waitsome(kMany, rr, &outcount, idx, MPI_STATUSES_IGNORE);
    CHECK(outcount == MPI_UNDEFINED, "Waitsome on null requests: outcount %d", outcount);
    MPI_Waitall(kMany, ss, MPI_STATUSES_IGNORE);
  }

  /* Request_free on a send: the message is still delivered. */
  int freed = 4242 + g_rank, got = -1;
  MPI_Request fr;
  MPI_Isend(&freed, 1, MPI_INT, partner, 7, MPI_COMM_WORLD, &fr);
  MPI_Request_free(&fr);
  CHECK(fr == MPI_REQUEST_NULL, "Request_free did not null the handle");
  MPI_Recv(&got, 1, MPI_INT, partner, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(got == 4242 + partner, "freed send delivered %d", got);
  /* The buffer of a freed send may be reused only once the peer has the message. */
  MPI_Barrier(MPI_COMM_WORLD);
  return FinishTest();
}
