#include "gos/bcs/matcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace gos::nodeagent {
namespace {

using bcs::Op;

constexpr uint64_t kCtx = 7;

// req = 1000 * rank + seq + 1: unique, non-zero, and readable in failures.
Posted Make(uint32_t rank, uint64_t seq, Op op, int32_t peer, int32_t tag, uint64_t len,
            uint64_t ctx = kCtx) {
  Posted p;
  p.rank = rank;
  p.seq = seq;
  p.d.req = 1000 * rank + seq + 1;
  p.d.context = ctx;
  p.d.addr = 0x10000 * (rank + 1) + 0x100 * seq;
  p.d.len = len;
  p.d.op = static_cast<uint32_t>(op);
  p.d.peer = peer;
  p.d.tag = tag;
  return p;
}
Posted Send(uint32_t rank, uint64_t seq, int32_t dest, int32_t tag, uint64_t len,
            uint64_t ctx = kCtx) {
  return Make(rank, seq, Op::kSend, dest, tag, len, ctx);
}
Posted Recv(uint32_t rank, uint64_t seq, int32_t source, int32_t tag, uint64_t len,
            uint64_t ctx = kCtx) {
  return Make(rank, seq, Op::kRecv, source, tag, len, ctx);
}
Posted Probe(uint32_t rank, uint64_t seq, int32_t source, int32_t tag, bool nonblocking) {
  Posted p = Make(rank, seq, Op::kProbe, source, tag, 0);
  p.d.flags = nonblocking ? bcs::kFlagNonBlocking : 0;
  return p;
}
Posted Collective(Op op, uint32_t rank, uint64_t seq, int32_t instance, uint32_t group,
                  int32_t root = 0, uint64_t len = 0) {
  Posted p = Make(rank, seq, op, root, instance, len);
  p.d.group_size = group;
  return p;
}

uint64_t Req(uint32_t rank, uint64_t seq) { return 1000 * rank + seq + 1; }

std::string Str(const RankCompletion& rc) {
  std::ostringstream o;
  o << "C{r" << rc.rank << " req" << rc.c.req << " len" << rc.c.len << " src" << rc.c.source
    << " tag" << rc.c.tag << " err" << rc.c.error << " fl" << rc.c.flags << "}";
  return o.str();
}

// Every field, so that two results compare equal only if they are the same.
std::string Serialize(const StepResult& r) {
  std::ostringstream o;
  for (const Transfer& t : r.transfers) {
    o << "T{" << t.id << " r" << t.src_rank << "@" << t.src_addr << " len" << t.len << " ->";
    for (const auto& d : t.dests) o << " r" << d.rank << "@" << d.addr;
    o << " done:";
    for (const auto& c : t.on_done) o << Str(c);
    o << "}\n";
  }
  for (const auto& c : r.completions) o << Str(c) << "\n";
  for (const auto& m : r.matches) {
    o << "M{" << m.recv_rank << "." << m.recv_seq << "<-" << m.send_rank << "." << m.send_seq
      << "}\n";
  }
  return o.str();
}

bool HasCompletion(const std::vector<RankCompletion>& cs, uint32_t rank, uint64_t req) {
  return std::any_of(cs.begin(), cs.end(),
                     [&](const RankCompletion& c) { return c.rank == rank && c.c.req == req; });
}

// The completion for (rank, req); a failure (and an all-zero completion) if there is none.
RankCompletion FindCompletion(const std::vector<RankCompletion>& cs, uint32_t rank, uint64_t req) {
  for (const auto& c : cs) {
    if (c.rank == rank && c.c.req == req) return c;
  }
  ADD_FAILURE() << "no completion for rank " << rank << " req " << req;
  return RankCompletion{.rank = ~0u, .c = {}};
}

// ---------------------------------------------------------------- point to point

TEST(MatcherTest, SendThenRecvMakesOneTransfer) {
  Matcher m(2);
  std::vector<Posted> s1 = {Send(0, 0, 1, 5, 100)};
  StepResult r1 = m.Step(1, s1);
  EXPECT_TRUE(r1.transfers.empty());
  EXPECT_EQ(m.pending(), 1u);
  std::vector<Posted> s2 = {Recv(1, 0, 0, 5, 100)};
  StepResult r2 = m.Step(2, s2);
  ASSERT_EQ(r2.transfers.size(), 1u);
  const Transfer& t = r2.transfers[0];
  EXPECT_EQ(t.id, 1u);
  EXPECT_EQ(t.src_rank, 0u);
  EXPECT_EQ(t.src_addr, s1[0].d.addr);
  EXPECT_EQ(t.len, 100u);
  ASSERT_EQ(t.dests.size(), 1u);
  EXPECT_EQ(t.dests[0].rank, 1u);
  EXPECT_EQ(t.dests[0].addr, s2[0].d.addr);
  ASSERT_EQ(t.on_done.size(), 2u);
  const RankCompletion send_done = FindCompletion(t.on_done, 0, Req(0, 0));
  const RankCompletion recv_done = FindCompletion(t.on_done, 1, Req(1, 0));
  EXPECT_EQ(send_done.c.len, 100u);
  EXPECT_EQ(recv_done.c.len, 100u);
  EXPECT_EQ(recv_done.c.source, 0);
  EXPECT_EQ(recv_done.c.tag, 5);
  EXPECT_EQ(recv_done.c.error, bcs::kOk);
  ASSERT_EQ(r2.matches.size(), 1u);
  EXPECT_EQ(r2.matches[0].recv_rank, 1u);
  EXPECT_EQ(r2.matches[0].send_rank, 0u);
  EXPECT_TRUE(r2.completions.empty());
  EXPECT_EQ(m.pending(), 0u);
}

TEST(MatcherTest, AnySourceTakesEarlierStrobeThenLowerRankThenSeq) {
  Matcher m(4);
  // Strobe 1: rank 3 sends. Strobe 2: ranks 1 and 2 send (2 twice), given out of order.
  std::vector<Posted> s1 = {Send(3, 0, 0, 1, 8)};
  m.Step(1, s1);
  std::vector<Posted> s2 = {Send(2, 1, 0, 1, 8), Send(2, 0, 0, 1, 8), Send(1, 0, 0, 1, 8)};
  m.Step(2, s2);
  std::vector<Posted> s3;
  for (uint64_t i = 0; i < 4; ++i) s3.push_back(Recv(0, i, bcs::kAnySource, bcs::kAnyTag, 8));
  StepResult r = m.Step(3, s3);
  ASSERT_EQ(r.matches.size(), 4u);
  // Arrival order: strobe 1's rank 3; then strobe 2's rank 1; then rank 2 seq 0, seq 1.
  std::vector<std::pair<uint32_t, uint64_t>> got;
  for (const auto& mr : r.matches) got.emplace_back(mr.send_rank, mr.send_seq);
  std::vector<std::pair<uint32_t, uint64_t>> want = {{3, 0}, {1, 0}, {2, 0}, {2, 1}};
  EXPECT_EQ(got, want);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(r.matches[i].recv_seq, i);
}

TEST(MatcherTest, SendsFromOneSenderDoNotOvertake) {
  Matcher m(2);
  std::vector<Posted> in = {Send(0, 0, 1, 4, 10), Send(0, 1, 1, 4, 20), Recv(1, 0, 0, 4, 64),
                            Recv(1, 1, 0, 4, 64)};
  StepResult r = m.Step(1, in);
  ASSERT_EQ(r.transfers.size(), 2u);
  EXPECT_EQ(r.transfers[0].len, 10u);
  EXPECT_EQ(r.transfers[0].dests[0].addr, in[2].d.addr);
  EXPECT_EQ(r.transfers[1].len, 20u);
  EXPECT_EQ(r.transfers[1].dests[0].addr, in[3].d.addr);
  EXPECT_EQ(r.transfers[1].id, r.transfers[0].id + 1);
}

TEST(MatcherTest, TagsAndContextsSeparateMessages) {
  Matcher m(2);
  // Receives posted first for tag 2 then tag 1; a receive on another context matches nothing.
  std::vector<Posted> in = {
      Send(0, 0, 1, 1, 11),
      Send(0, 1, 1, 2, 22),              // tag 1 then tag 2
      Recv(1, 0, 0, 3, 64, /*ctx=*/99),  // other context: no match
      Recv(1, 1, 0, 2, 64),
      Recv(1, 2, 0, 1, 64),  // out of tag order
  };
  StepResult r = m.Step(1, in);
  ASSERT_EQ(r.matches.size(), 2u);
  EXPECT_EQ(r.matches[0].recv_seq, 1u);
  EXPECT_EQ(r.matches[0].send_seq, 1u);  // tag 2
  EXPECT_EQ(r.matches[1].recv_seq, 2u);
  EXPECT_EQ(r.matches[1].send_seq, 0u);  // tag 1
  EXPECT_EQ(m.pending(), 1u);            // the other-context receive waits

  // The same tag on another context does not match either.
  std::vector<Posted> in2 = {Send(0, 2, 1, 3, 5, /*ctx=*/98)};
  EXPECT_TRUE(m.Step(2, in2).matches.empty());
  std::vector<Posted> in3 = {Send(0, 3, 1, 3, 5, /*ctx=*/99)};
  StepResult r3 = m.Step(3, in3);
  ASSERT_EQ(r3.matches.size(), 1u);
  EXPECT_EQ(r3.matches[0].send_seq, 3u);
  EXPECT_EQ(m.pending(), 1u);  // the ctx 98 send
}

TEST(MatcherTest, UnmatchedReceiveDoesNotStopLaterOnes) {
  Matcher m(3);
  std::vector<Posted> in = {Recv(0, 0, 2, 0, 8), Recv(0, 1, 1, 0, 8), Send(1, 0, 0, 0, 8)};
  StepResult r = m.Step(1, in);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].recv_seq, 1u);
  // The waiting receive still matches once its sender posts.
  std::vector<Posted> in2 = {Send(2, 0, 0, 0, 8)};
  StepResult r2 = m.Step(2, in2);
  ASSERT_EQ(r2.matches.size(), 1u);
  EXPECT_EQ(r2.matches[0].recv_seq, 0u);
  EXPECT_EQ(m.pending(), 0u);
}

// A cancel (req = the receive's) posted by the receive's rank.
Posted Cancel(uint32_t rank, uint64_t seq, uint64_t target) {
  Posted p = Make(rank, seq, Op::kCancel, 0, 0, 0);
  p.d.req = target;
  return p;
}

TEST(MatcherTest, CancelWithdrawsAnUnmatchedReceiveOnly) {
  Matcher m(2);
  // Rank 1 posts two wildcard receives; nothing matches them.
  std::vector<Posted> in = {Recv(1, 0, bcs::kAnySource, 5, 8), Recv(1, 1, bcs::kAnySource, 5, 8)};
  StepResult r = m.Step(1, in);
  EXPECT_TRUE(r.completions.empty());
  // The second is cancelled: it completes cancelled, moving nothing; the first stays posted.
  std::vector<Posted> in2 = {Cancel(1, 2, Req(1, 1))};
  StepResult r2 = m.Step(2, in2);
  ASSERT_EQ(r2.completions.size(), 1u);
  const RankCompletion c = FindCompletion(r2.completions, 1, Req(1, 1));
  EXPECT_NE(c.c.flags & bcs::kComplCancelled, 0u);
  EXPECT_EQ(c.c.len, 0u);
  EXPECT_EQ(m.pending(), 1u);
  // A cancel and a matching send in one strobe: the cancel is taken first, the send waits.
  std::vector<Posted> in3 = {Send(0, 0, 1, 5, 8), Cancel(1, 3, Req(1, 0))};
  StepResult r3 = m.Step(3, in3);
  ASSERT_EQ(r3.completions.size(), 1u);
  EXPECT_NE(FindCompletion(r3.completions, 1, Req(1, 0)).c.flags & bcs::kComplCancelled, 0u);
  EXPECT_TRUE(r3.matches.empty());
  // A new receive gets that send; cancelling it afterwards (and an unknown req) does nothing.
  std::vector<Posted> in4 = {Recv(1, 4, 0, 5, 8)};
  StepResult r4 = m.Step(4, in4);
  ASSERT_EQ(r4.matches.size(), 1u);
  std::vector<Posted> in5 = {Cancel(1, 5, Req(1, 4)), Cancel(1, 6, 424242),
                             Cancel(0, 1, Req(1, 4))};
  StepResult r5 = m.Step(5, in5);
  EXPECT_TRUE(r5.completions.empty());
  EXPECT_TRUE(r5.transfers.empty());
  EXPECT_EQ(m.pending(), 0u);
}

TEST(MatcherTest, CancelWithdrawsTheRanksOwnUnmatchedSendOnly) {
  Matcher m(3);
  // Rank 0 sends twice to rank 1 and once to rank 2; nobody receives yet.
  std::vector<Posted> in = {Send(0, 0, 1, 5, 8), Send(0, 1, 1, 5, 16), Send(0, 2, 2, 5, 4)};
  EXPECT_TRUE(m.Step(1, in).completions.empty());
  // The second send to rank 1 is cancelled by its rank (the same req posted by rank 2 is not
  // rank 0's and does nothing); it completes cancelled and moves nothing.
  std::vector<Posted> in2 = {Cancel(2, 0, Req(0, 1)), Cancel(0, 3, Req(0, 1))};
  StepResult r2 = m.Step(2, in2);
  ASSERT_EQ(r2.completions.size(), 1u);
  const RankCompletion c = FindCompletion(r2.completions, 0, Req(0, 1));
  EXPECT_NE(c.c.flags & bcs::kComplCancelled, 0u);
  EXPECT_EQ(c.c.len, 0u);
  EXPECT_EQ(m.pending(), 2u);
  // A cancel and a matching receive in one strobe: the cancel is taken first, so the receive
  // gets the next send in order (the first one), not the withdrawn one.
  std::vector<Posted> in3 = {Recv(2, 1, 0, 5, 64), Cancel(0, 4, Req(0, 2)), Recv(1, 0, 0, 5, 64),
                             Recv(1, 1, 0, 5, 64)};
  StepResult r3 = m.Step(3, in3);
  EXPECT_NE(FindCompletion(r3.completions, 0, Req(0, 2)).c.flags & bcs::kComplCancelled, 0u);
  ASSERT_EQ(r3.transfers.size(), 1u);
  EXPECT_EQ(r3.transfers[0].len, 8u);
  EXPECT_EQ(m.pending(), 2u);  // rank 1's second receive and rank 2's receive wait
  // Cancelling a send already matched does nothing.
  std::vector<Posted> in4 = {Cancel(0, 5, Req(0, 0))};
  EXPECT_TRUE(m.Step(4, in4).completions.empty());
}

TEST(MatcherTest, AnyTagTakesFirstArrivedOfAnyTag) {
  Matcher m(2);
  std::vector<Posted> in = {Send(0, 0, 1, 9, 1), Send(0, 1, 1, 3, 2),
                            Recv(1, 0, 0, bcs::kAnyTag, 8)};
  StepResult r = m.Step(1, in);
  ASSERT_EQ(r.transfers.size(), 1u);
  EXPECT_EQ(r.transfers[0].on_done[1].c.tag, 9);
  EXPECT_EQ(r.transfers[0].on_done[1].c.source, 0);
}

TEST(MatcherTest, TruncationReportsErrorOnReceiveOnly) {
  Matcher m(2);
  std::vector<Posted> in = {Send(0, 0, 1, 0, 100), Recv(1, 0, 0, 0, 40)};
  StepResult r = m.Step(1, in);
  ASSERT_EQ(r.transfers.size(), 1u);
  EXPECT_EQ(r.transfers[0].len, 40u);
  const RankCompletion recv_done = FindCompletion(r.transfers[0].on_done, 1, Req(1, 0));
  const RankCompletion send_done = FindCompletion(r.transfers[0].on_done, 0, Req(0, 0));
  EXPECT_EQ(recv_done.c.error, bcs::kErrTruncate);
  EXPECT_EQ(recv_done.c.len, 40u);
  EXPECT_EQ(send_done.c.error, bcs::kOk);
}

TEST(MatcherTest, ZeroByteMessagesCompleteAtOnce) {
  Matcher m(2);
  std::vector<Posted> in = {Send(0, 0, 1, 0, 0), Recv(1, 0, 0, 0, 16), Send(0, 1, 1, 0, 10),
                            Recv(1, 1, 0, 0, 0)};
  StepResult r = m.Step(1, in);
  EXPECT_TRUE(r.transfers.empty());
  ASSERT_EQ(r.completions.size(), 4u);
  EXPECT_EQ(r.matches.size(), 2u);
  const RankCompletion recv0 = FindCompletion(r.completions, 1, Req(1, 0));
  EXPECT_EQ(recv0.c.len, 0u);
  EXPECT_EQ(recv0.c.source, 0);
  EXPECT_EQ(recv0.c.error, bcs::kOk);
  const RankCompletion recv1 = FindCompletion(r.completions, 1, Req(1, 1));
  EXPECT_EQ(recv1.c.error, bcs::kErrTruncate);  // 10 bytes into a 0-byte buffer
  EXPECT_TRUE(HasCompletion(r.completions, 0, Req(0, 0)));
  EXPECT_TRUE(HasCompletion(r.completions, 0, Req(0, 1)));
}

TEST(MatcherTest, SelfMessage) {
  Matcher m(2);
  std::vector<Posted> in = {Recv(1, 0, 1, 0, 8), Send(1, 1, 1, 0, 8)};
  StepResult r = m.Step(1, in);
  ASSERT_EQ(r.transfers.size(), 1u);
  EXPECT_EQ(r.transfers[0].src_rank, 1u);
  EXPECT_EQ(r.transfers[0].dests[0].rank, 1u);
}

TEST(MatcherTest, InvalidArgumentsCompleteWithErrors) {
  Matcher m(2);
  Posted bad_op = Make(0, 3, Op::kSend, 1, 0, 8);
  bad_op.d.op = 42;
  std::vector<Posted> in = {Send(0, 0, 2, 0, 8),
                            Send(0, 1, -1, 0, 8),
                            Recv(1, 0, 5, 0, 8),
                            Send(0, 2, 1, -1, 8),
                            bad_op,
                            Collective(Op::kBarrier, 1, 1, 0, 3),
                            Collective(Op::kBcast, 1, 2, 0, 2, /*root=*/7)};
  StepResult r = m.Step(1, in);
  EXPECT_TRUE(r.transfers.empty());
  EXPECT_EQ(m.pending(), 0u);
  ASSERT_EQ(r.completions.size(), 7u);
  EXPECT_EQ(FindCompletion(r.completions, 0, Req(0, 0)).c.error, bcs::kErrRank);
  EXPECT_EQ(FindCompletion(r.completions, 0, Req(0, 1)).c.error, bcs::kErrRank);
  EXPECT_EQ(FindCompletion(r.completions, 1, Req(1, 0)).c.error, bcs::kErrRank);
  EXPECT_EQ(FindCompletion(r.completions, 0, Req(0, 2)).c.error, bcs::kErrArg);
  EXPECT_EQ(FindCompletion(r.completions, 0, Req(0, 3)).c.error, bcs::kErrArg);
  EXPECT_EQ(FindCompletion(r.completions, 1, Req(1, 1)).c.error, bcs::kErrArg);
  EXPECT_EQ(FindCompletion(r.completions, 1, Req(1, 2)).c.error, bcs::kErrRank);
}

TEST(MatcherTest, NonBlockingProbe) {
  Matcher m(2);
  std::vector<Posted> in = {Probe(1, 0, bcs::kAnySource, 4, true)};
  StepResult r = m.Step(1, in);
  ASSERT_EQ(r.completions.size(), 1u);
  EXPECT_EQ(r.completions[0].c.flags & bcs::kComplFound, 0u);
  EXPECT_EQ(r.completions[0].c.req, Req(1, 0));
  EXPECT_EQ(m.pending(), 0u);

  std::vector<Posted> in2 = {Send(0, 0, 1, 4, 77), Probe(1, 1, 0, bcs::kAnyTag, true)};
  StepResult r2 = m.Step(2, in2);
  ASSERT_EQ(r2.completions.size(), 1u);
  EXPECT_EQ(r2.completions[0].c.flags, bcs::kComplFound);
  EXPECT_EQ(r2.completions[0].c.len, 77u);
  EXPECT_EQ(r2.completions[0].c.source, 0);
  EXPECT_EQ(r2.completions[0].c.tag, 4);
  EXPECT_EQ(m.pending(), 1u);  // a probe does not consume the send
}

TEST(MatcherTest, BlockingProbeAnsweredWhenASendArrives) {
  Matcher m(3);
  std::vector<Posted> in = {Probe(0, 0, 2, 1, false)};
  EXPECT_TRUE(m.Step(1, in).completions.empty());
  std::vector<Posted> in2 = {Send(1, 0, 0, 1, 5)};  // wrong source
  EXPECT_TRUE(m.Step(2, in2).completions.empty());
  std::vector<Posted> in3 = {Send(2, 0, 0, 1, 6)};
  StepResult r = m.Step(3, in3);
  ASSERT_EQ(r.completions.size(), 1u);
  EXPECT_EQ(r.completions[0].c.req, Req(0, 0));
  EXPECT_EQ(r.completions[0].c.source, 2);
  EXPECT_EQ(r.completions[0].c.len, 6u);
  EXPECT_EQ(m.pending(), 2u);  // both sends
}

TEST(MatcherTest, ProbeSeesWhatMatchingLeft) {
  Matcher m(2);
  // The receive takes the only send; the probe of the same strobe then finds nothing.
  std::vector<Posted> in = {Send(0, 0, 1, 0, 8), Probe(1, 0, 0, 0, true), Recv(1, 1, 0, 0, 8)};
  StepResult r = m.Step(1, in);
  ASSERT_EQ(r.transfers.size(), 1u);
  ASSERT_EQ(r.completions.size(), 1u);
  EXPECT_EQ(r.completions[0].c.flags, 0u);
}

// ---------------------------------------------------------------- collectives

TEST(MatcherTest, BarrierCompletesWhenAllMembersPosted) {
  Matcher m(3);
  std::vector<Posted> in1 = {Collective(Op::kBarrier, 0, 0, 0, 3),
                             Collective(Op::kBarrier, 2, 0, 0, 3)};
  EXPECT_TRUE(m.Step(1, in1).completions.empty());
  EXPECT_EQ(m.pending(), 2u);
  // Another instance (tag 1) does not count for instance 0.
  std::vector<Posted> in2 = {Collective(Op::kBarrier, 0, 1, 1, 3)};
  EXPECT_TRUE(m.Step(2, in2).completions.empty());
  std::vector<Posted> in3 = {Collective(Op::kBarrier, 1, 0, 0, 3)};
  StepResult r = m.Step(3, in3);
  ASSERT_EQ(r.completions.size(), 3u);
  for (uint32_t rank : {0u, 1u, 2u}) {
    const RankCompletion c = FindCompletion(r.completions, rank, Req(rank, 0));
    EXPECT_EQ(c.c.error, bcs::kOk);
  }
  EXPECT_EQ(m.pending(), 1u);
  std::vector<Posted> solo = {Collective(Op::kBarrier, 1, 1, 5, 1)};
  EXPECT_EQ(m.Step(4, solo).completions.size(), 1u);
}

TEST(MatcherTest, BcastIsOneTransferFromTheRoot) {
  Matcher m(4);
  std::vector<Posted> in1 = {Collective(Op::kBcast, 0, 0, 0, 4, /*root=*/2, 32),
                             Collective(Op::kBcast, 3, 0, 0, 4, 2, 16)};  // too small
  EXPECT_TRUE(m.Step(1, in1).transfers.empty());
  std::vector<Posted> in2 = {Collective(Op::kBcast, 2, 0, 0, 4, 2, 24),
                             Collective(Op::kBcast, 1, 0, 0, 4, 2, 24)};
  StepResult r = m.Step(2, in2);
  ASSERT_EQ(r.transfers.size(), 1u);
  const Transfer& t = r.transfers[0];
  EXPECT_EQ(t.src_rank, 2u);
  EXPECT_EQ(t.src_addr, in2[0].d.addr);
  EXPECT_EQ(t.len, 24u);
  ASSERT_EQ(t.dests.size(), 2u);
  EXPECT_EQ(t.dests[0].rank, 0u);
  EXPECT_EQ(t.dests[0].addr, in1[0].d.addr);
  EXPECT_EQ(t.dests[1].rank, 1u);
  ASSERT_EQ(t.on_done.size(), 3u);
  EXPECT_EQ(FindCompletion(t.on_done, 0, Req(0, 0)).c.source, 2);
  EXPECT_EQ(FindCompletion(t.on_done, 0, Req(0, 0)).c.len, 24u);
  EXPECT_TRUE(HasCompletion(t.on_done, 2, Req(2, 0)));
  ASSERT_EQ(r.completions.size(), 1u);
  EXPECT_EQ(r.completions[0].rank, 3u);
  EXPECT_EQ(r.completions[0].c.error, bcs::kErrTruncate);
  EXPECT_EQ(m.pending(), 0u);
}

// ---------------------------------------------------------------- purity / properties

struct Stream {
  std::vector<std::vector<Posted>> strobes;  // descriptors exchanged at strobe i + 1
};

// Random traffic on `world` ranks: point to point with wildcards on two contexts, probes,
// barriers and broadcasts, spread over `n` strobes.
Stream RandomStream(uint32_t seed, uint32_t world, int n) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Stream s;
  std::vector<uint64_t> seq(world, 0);
  std::vector<int32_t> collective(world, 0);
  for (int strobe = 0; strobe < n; ++strobe) {
    std::vector<Posted> set;
    for (uint32_t r = 0; r < world; ++r) {
      int count = pick(0, 3);
      for (int i = 0; i < count; ++i) {
        uint64_t ctx = static_cast<uint64_t>(pick(1, 2));
        int32_t tag = pick(0, 2);
        uint64_t len = static_cast<uint64_t>(pick(0, 3)) * 16;
        int kind = pick(0, 9);
        if (kind < 4) {
          set.push_back(Send(r, seq[r]++, pick(0, static_cast<int>(world) - 1), tag, len, ctx));
        } else if (kind < 8) {
          int32_t src = pick(0, 2) == 0 ? bcs::kAnySource : pick(0, static_cast<int>(world) - 1);
          if (pick(0, 2) == 0) tag = bcs::kAnyTag;
          set.push_back(Recv(r, seq[r]++, src, tag, len, ctx));
        } else if (kind == 8) {
          Posted p = Probe(r, seq[r]++, bcs::kAnySource, tag, pick(0, 1) == 0);
          p.d.context = ctx;
          set.push_back(p);
        } else {
          int32_t k = collective[r]++;
          Op op = k % 2 == 0 ? Op::kBarrier : Op::kBcast;
          set.push_back(Collective(op, r, seq[r]++, k, world, k % static_cast<int>(world),
                                   static_cast<uint64_t>(pick(1, 2)) * 8));
        }
      }
    }
    s.strobes.push_back(std::move(set));
  }
  return s;
}

std::vector<std::string> RunStream(const Stream& s, uint32_t world, uint32_t shuffle_seed) {
  Matcher m(world);
  std::mt19937 rng(shuffle_seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < s.strobes.size(); ++i) {
    std::vector<Posted> set = s.strobes[i];
    std::shuffle(set.begin(), set.end(), rng);
    out.push_back(Serialize(m.Step(i + 1, set)));
  }
  out.push_back("pending " + std::to_string(m.pending()));
  return out;
}

TEST(MatcherPropertyTest, ResultIsIndependentOfInputOrderWithinAStrobe) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    Stream s = RandomStream(seed, 5, 12);
    std::vector<std::string> a = RunStream(s, 5, 1000 + seed);
    std::vector<std::string> b = RunStream(s, 5, 2000 + seed);
    ASSERT_EQ(a, b) << "seed " << seed;
    // Two instances, the same input in the same order.
    ASSERT_EQ(a, RunStream(s, 5, 1000 + seed)) << "seed " << seed;
  }
}

// Checks every match decision against the rules with a naive model: the pair is compatible;
// no earlier-arrived unmatched send fits the receive; no earlier-posted unmatched receive of
// the same rank fits the send; and after each strobe no unmatched receive fits any unmatched
// send (matching went on past receives that found nothing).
TEST(MatcherPropertyTest, DecisionsFollowTheRules) {
  constexpr uint32_t kWorld = 4;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    Stream s = RandomStream(seed, kWorld, 10);
    Matcher m(kWorld);
    using Key = std::pair<uint32_t, uint64_t>;  // (rank, seq)
    std::map<Key, Posted> all;
    // Arrival order of sends: (strobe, rank, seq).
    std::map<std::tuple<uint64_t, uint32_t, uint64_t>, Posted> open_sends;
    std::map<Key, Posted> open_recvs;  // (rank, seq) is posting order per rank
    auto compatible = [](const Posted& recv, const Posted& send) {
      return static_cast<int32_t>(send.d.peer) == static_cast<int32_t>(recv.rank) &&
             send.d.context == recv.d.context &&
             (recv.d.peer == bcs::kAnySource || recv.d.peer == static_cast<int32_t>(send.rank)) &&
             (recv.d.tag == bcs::kAnyTag || recv.d.tag == send.d.tag);
    };
    for (size_t i = 0; i < s.strobes.size(); ++i) {
      const uint64_t strobe = i + 1;
      for (const Posted& p : s.strobes[i]) {
        all[{p.rank, p.seq}] = p;
        if (p.d.op == static_cast<uint32_t>(Op::kSend)) open_sends[{strobe, p.rank, p.seq}] = p;
        if (p.d.op == static_cast<uint32_t>(Op::kRecv)) open_recvs[{p.rank, p.seq}] = p;
      }
      StepResult r = m.Step(strobe, s.strobes[i]);
      for (const MatchRecord& mr : r.matches) {
        ASSERT_TRUE(open_recvs.contains({mr.recv_rank, mr.recv_seq})) << "seed " << seed;
        const Posted recv = open_recvs[{mr.recv_rank, mr.recv_seq}];
        auto send_it = std::find_if(open_sends.begin(), open_sends.end(), [&](const auto& e) {
          return e.second.rank == mr.send_rank && e.second.seq == mr.send_seq;
        });
        ASSERT_NE(send_it, open_sends.end()) << "seed " << seed;
        const Posted send = send_it->second;
        ASSERT_TRUE(compatible(recv, send)) << "seed " << seed;
        for (auto it = open_sends.begin(); it != send_it; ++it) {
          ASSERT_FALSE(compatible(recv, it->second))
              << "seed " << seed << ": an earlier send overtaken";
        }
        for (const auto& [key, other] : open_recvs) {
          if (key.first == recv.rank && key.second < recv.seq) {
            ASSERT_FALSE(compatible(other, send))
                << "seed " << seed << ": an earlier receive skipped";
          }
        }
        open_sends.erase(send_it);
        open_recvs.erase({mr.recv_rank, mr.recv_seq});
      }
      for (const auto& [rk, recv] : open_recvs) {
        for (const auto& [sk, send] : open_sends) {
          ASSERT_FALSE(compatible(recv, send)) << "seed " << seed << " strobe " << strobe;
        }
      }
    }
  }
}

// ---------------------------------------------------------------- checkpoint (Save / Load)

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

Matcher MustLoad(const std::string& saved) {
  StatusOr<Matcher> m = Matcher::Load(Bytes(saved));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : Matcher(0);
}

// The encoding's checksum (FNV-1a over everything before the last 8 bytes), so that tests can
// forge well-checksummed but malformed input.
void Reseal(std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i + 8 < s.size(); ++i) {
    h ^= static_cast<uint8_t>(s[i]);
    h *= 0x100000001b3ull;
  }
  std::memcpy(s.data() + s.size() - 8, &h, 8);
}

// A matcher of 4 ranks with something in every queue: unmatched sends (one of them for a
// receive that is posted later), posted receives, a blocking probe, a barrier and a broadcast
// with some members missing.
Matcher BusyMatcher() {
  Matcher m(4);
  std::vector<Posted> s1 = {Send(0, 0, 1, 3, 64),
                            Send(2, 0, 1, 3, 32),
                            Recv(3, 0, 0, 9, 16),
                            Probe(2, 1, 0, 4, false),
                            Collective(Op::kBarrier, 0, 1, 0, 4),
                            Collective(Op::kBcast, 1, 0, 0, 4, 1, 24)};
  m.Step(10, s1);
  std::vector<Posted> s2 = {Recv(1, 1, bcs::kAnySource, bcs::kAnyTag, 8, 99),
                            Collective(Op::kBarrier, 3, 1, 0, 4),
                            Collective(Op::kBcast, 3, 2, 0, 4, 1, 24), Send(3, 3, 0, 5, 0)};
  m.Step(11, s2);
  return m;
}

// Descriptors that complete everything BusyMatcher left waiting, and a bit more.
std::vector<std::vector<Posted>> BusyTail() {
  return {
      {Recv(1, 3, bcs::kAnySource, 3, 100), Send(0, 2, 2, 4, 8), Send(0, 3, 3, 9, 16),
       Collective(Op::kBarrier, 1, 2, 0, 4), Collective(Op::kBcast, 0, 4, 0, 4, 1, 24)},
      {Recv(1, 4, bcs::kAnySource, 3, 100), Recv(0, 5, 3, 5, 0), Send(2, 2, 1, 1, 8, 99),
       Collective(Op::kBarrier, 2, 3, 0, 4), Collective(Op::kBcast, 2, 4, 0, 4, 1, 24),
       Recv(2, 5, 0, 4, 8)},
  };
}

TEST(MatcherCheckpointTest, LoadedMatcherBehavesLikeTheOriginal) {
  Matcher a = BusyMatcher();
  const std::string saved = a.Save();
  Matcher b = MustLoad(saved);
  EXPECT_EQ(b.pending(), a.pending());
  EXPECT_EQ(a.pending(), 10u);
  uint64_t strobe = 12;
  size_t transfers = 0, completions = 0, matches = 0;
  for (const std::vector<Posted>& set : BusyTail()) {
    StepResult ra = a.Step(strobe, set);
    StepResult rb = b.Step(strobe, set);
    ++strobe;
    EXPECT_EQ(Serialize(rb), Serialize(ra)) << "strobe " << strobe;
    transfers += ra.transfers.size();
    completions += ra.completions.size();
    matches += ra.matches.size();
  }
  // What was pending really was restored: everything completed, with new transfer ids.
  EXPECT_EQ(a.pending(), 0u);
  EXPECT_EQ(b.pending(), 0u);
  EXPECT_EQ(matches, 6u);
  EXPECT_GE(transfers, 5u);
  EXPECT_GE(completions, 5u);
}

TEST(MatcherCheckpointTest, SaveOfALoadedMatcherIsStable) {
  const std::string once = MustLoad(BusyMatcher().Save()).Save();
  // Only the arrival strobes differ from the original's encoding; from then on it is a fixed
  // point.
  EXPECT_EQ(MustLoad(once).Save(), once);
  EXPECT_NE(BusyMatcher().Save(), once);
  EXPECT_EQ(BusyMatcher().Save().size(), once.size());
  EXPECT_EQ(MustLoad(Matcher(3).Save()).Save(), Matcher(3).Save());
}

TEST(MatcherCheckpointTest, StrobeCountRestartsAfterLoad) {
  Matcher a(3);
  std::vector<Posted> s1 = {Send(2, 0, 0, 1, 8)};
  a.Step(1000, s1);
  Matcher b = MustLoad(a.Save());
  // Rank 1's send comes at a strobe numbered far below 1000, but after the restore: rank 2's
  // send arrived first and wins the wildcard receive even though rank 1 is lower.
  std::vector<Posted> s2 = {Send(1, 0, 0, 1, 8), Recv(0, 0, bcs::kAnySource, 1, 8)};
  StepResult r = b.Step(1, s2);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].send_rank, 2u);
  ASSERT_EQ(r.transfers.size(), 1u);
  EXPECT_EQ(r.transfers[0].id, 1u);
  std::vector<Posted> s3 = {Recv(0, 1, bcs::kAnySource, 1, 8)};
  r = b.Step(2, s3);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].send_rank, 1u);
  EXPECT_EQ(r.transfers[0].id, 2u);  // next_transfer_ is kept
}

TEST(MatcherCheckpointTest, RandomCutsContinueIdentically) {
  constexpr uint32_t kWorld = 5;
  size_t pending_at_cut = 0;
  for (uint32_t seed = 1; seed <= 100; ++seed) {
    Stream s = RandomStream(seed, kWorld, 12);
    const size_t cut = 1 + seed % (s.strobes.size() - 1);
    Matcher a(kWorld);
    for (size_t i = 0; i < cut; ++i) a.Step(i + 1, s.strobes[i]);
    Matcher b = MustLoad(a.Save());
    pending_at_cut += a.pending();
    ASSERT_EQ(b.pending(), a.pending()) << "seed " << seed;
    for (size_t i = cut; i < s.strobes.size(); ++i) {
      // The restored matcher counts strobes from 1 again (a restarted coordinator).
      ASSERT_EQ(Serialize(b.Step(i - cut + 1, s.strobes[i])),
                Serialize(a.Step(i + 1, s.strobes[i])))
          << "seed " << seed << " strobe " << i + 1;
    }
    ASSERT_EQ(b.pending(), a.pending()) << "seed " << seed;
  }
  EXPECT_GT(pending_at_cut, 100u);  // the cuts did carry state
}

TEST(MatcherCheckpointTest, TruncatedOrGarbledInputIsDataLoss) {
  const std::string saved = BusyMatcher().Save();
  ASSERT_TRUE(Matcher::Load(Bytes(saved)).ok());
  for (size_t n = 0; n < saved.size(); ++n) {
    StatusOr<Matcher> m = Matcher::Load(Bytes(saved).first(n));
    ASSERT_FALSE(m.ok()) << "prefix " << n;
    ASSERT_EQ(m.status().code(), StatusCode::kDataLoss) << "prefix " << n;
  }
  for (size_t i = 0; i < saved.size(); ++i) {
    std::string bad = saved;
    bad[i] = static_cast<char>(bad[i] ^ 0x21);
    StatusOr<Matcher> m = Matcher::Load(Bytes(bad));
    ASSERT_FALSE(m.ok()) << "byte " << i;
    ASSERT_EQ(m.status().code(), StatusCode::kDataLoss) << "byte " << i;
  }
  std::string longer = saved + '\0';
  EXPECT_EQ(Matcher::Load(Bytes(longer)).status().code(), StatusCode::kDataLoss);
}

// Input with a valid checksum but broken structure (a forgery, or a bug in Save) is rejected
// by the structural checks, never trusted.
TEST(MatcherCheckpointTest, WellSealedButMalformedInputIsDataLoss) {
  const std::string saved = BusyMatcher().Save();
  auto load = [](std::string s) {
    Reseal(s);
    return Matcher::Load(Bytes(s)).status();
  };
  EXPECT_TRUE(load(saved).ok());
  constexpr size_t kWorldAt = 8, kNextTransferAt = 16, kFirstCountAt = 24;
  auto put32 = [](std::string s, size_t at, uint32_t v) {
    std::memcpy(s.data() + at, &v, 4);
    return s;
  };
  // A huge world size must not allocate per-rank queues for it.
  EXPECT_EQ(load(put32(saved, kWorldAt, 0xffffffffu)).code(), StatusCode::kDataLoss);
  EXPECT_EQ(load(put32(saved, kWorldAt, 3)).code(), StatusCode::kDataLoss);
  std::string zero_transfer = saved;
  std::memset(zero_transfer.data() + kNextTransferAt, 0, 8);
  EXPECT_EQ(load(zero_transfer).code(), StatusCode::kDataLoss);
  // Rank 0's send queue claims more entries than the input holds.
  EXPECT_EQ(load(put32(saved, kFirstCountAt, 1u << 30)).code(), StatusCode::kDataLoss);
  // Rank 0's queue of sends holds rank 3's send; its rank field (after the count and the
  // strobe) names a rank outside the world.
  const size_t send_rank_at = kFirstCountAt + 4 + 8;
  EXPECT_EQ(load(put32(saved, send_rank_at, 4)).code(), StatusCode::kDataLoss);
  // The same send, turned into a receive.
  EXPECT_EQ(load(put32(saved, send_rank_at + 16 + 32, static_cast<uint32_t>(Op::kRecv))).code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(load(saved.substr(0, saved.size() - 8) + std::string(12, '\0')).code(),
            StatusCode::kDataLoss);
}

// ---------------------------------------------------------------- scheduler

Transfer MakeTransfer(uint64_t id, uint32_t src, uint64_t len, std::vector<uint32_t> dests) {
  Transfer t;
  t.id = id;
  t.src_rank = src;
  t.src_addr = 0x1000 * id;
  t.len = len;
  for (uint32_t d : dests) t.dests.push_back({d, 0x2000 * id + d});
  RankCompletion rc;
  rc.rank = src;
  rc.c.req = id;
  t.on_done.push_back(rc);
  return t;
}

// Every budget and layout invariant of one plan.
void CheckPlan(const SlicePlan& plan, const std::vector<uint32_t>& rank_node,
               const SchedulerOptions& opt) {
  std::map<uint32_t, uint64_t> out_total, in_total, local_total;
  std::map<std::pair<uint32_t, uint32_t>, const Block*> block_of;
  for (const Block& b : plan.blocks) {
    ASSERT_NE(b.src_node, b.dst_node);
    ASSERT_TRUE(block_of.emplace(std::make_pair(b.src_node, b.dst_node), &b).second);
    ASSERT_EQ(b.outbox_offset, out_total[b.src_node]) << "outbox blocks back to back";
    ASSERT_EQ(b.inbox_offset, in_total[b.dst_node]) << "inbox blocks back to back";
    out_total[b.src_node] += b.len;
    in_total[b.dst_node] += b.len;
  }
  for (const auto& [node, total] : out_total) ASSERT_LE(total, opt.outbox_bytes);
  for (const auto& [node, total] : in_total) ASSERT_LE(total, opt.inbox_bytes);
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> data;
  std::set<std::pair<uint64_t, uint32_t>> seen;  // (transfer, dst node): one piece per slice
  for (const Move& m : plan.moves) {
    ASSERT_GT(m.len, 0u);
    ASSERT_TRUE(seen.emplace(m.transfer, m.dst_node).second);
    if (m.src_node == m.dst_node) {
      local_total[m.src_node] += m.len;
      continue;
    }
    const Block* b = block_of.at({m.src_node, m.dst_node});
    // Pieces sit after the header, back to back in plan order, at the same place on both sides.
    uint64_t& used = data[{m.src_node, m.dst_node}];
    ASSERT_EQ(m.outbox_offset, b->outbox_offset + kBlockHeaderBytes + used);
    ASSERT_EQ(m.inbox_offset - b->inbox_offset, m.outbox_offset - b->outbox_offset);
    used += m.len;
  }
  for (const Block& b : plan.blocks) {
    const uint64_t pieces = data[{b.src_node, b.dst_node}];
    ASSERT_EQ(b.len, kBlockHeaderBytes + pieces);
    ASSERT_GT(b.len, kBlockHeaderBytes) << "no empty blocks";
  }
  for (const auto& [node, total] : local_total) ASSERT_LE(total, opt.local_bytes);
  (void)rank_node;
}

TEST(SchedulerTest, LargeTransferIsSplitAcrossSlicesAndCompletesExactly) {
  std::vector<uint32_t> rank_node = {0, 1};
  SchedulerOptions opt;
  opt.inbox_bytes = 1000 + kBlockHeaderBytes;
  opt.outbox_bytes = 4000;
  Scheduler s(rank_node, opt);
  s.Add({MakeTransfer(1, 0, 9500, {1})});
  uint64_t expect_offset = 0;
  for (int slice = 0; slice < 10; ++slice) {
    SlicePlan plan = s.Plan();
    CheckPlan(plan, rank_node, opt);
    ASSERT_EQ(plan.moves.size(), 1u);
    EXPECT_EQ(plan.moves[0].offset, expect_offset);
    EXPECT_EQ(plan.moves[0].len, slice < 9 ? 1000u : 500u);
    EXPECT_EQ(plan.moves[0].outbox_offset, kBlockHeaderBytes);
    ASSERT_EQ(plan.blocks.size(), 1u);
    ASSERT_NE(s.Find(1), nullptr);
    expect_offset += plan.moves[0].len;
    std::vector<RankCompletion> done = s.Finish(plan);
    if (slice < 9) {
      EXPECT_TRUE(done.empty());
    } else {
      ASSERT_EQ(done.size(), 1u);
      EXPECT_EQ(done[0].c.req, 1u);
    }
  }
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.Find(1), nullptr);
  EXPECT_TRUE(s.Plan().moves.empty());
}

TEST(SchedulerTest, PerPairFifoButOtherPairsProceed) {
  // Ranks 0, 1 on node 0; rank 2 on node 1; rank 3 on node 2.
  std::vector<uint32_t> rank_node = {0, 0, 1, 2};
  SchedulerOptions opt;
  opt.inbox_bytes = 10000;
  opt.outbox_bytes = 500 + kBlockHeaderBytes;
  Scheduler s(rank_node, opt);
  // 1: node 0 -> 1 (too big for node 0's outbox); 2: node 0 -> 1 small, must wait behind 1;
  // 3: node 2 -> 1, another pair, goes now.
  s.Add({MakeTransfer(1, 0, 800, {2}), MakeTransfer(2, 1, 10, {2}), MakeTransfer(3, 3, 100, {2})});
  SlicePlan p1 = s.Plan();
  CheckPlan(p1, rank_node, opt);
  ASSERT_EQ(p1.moves.size(), 2u);
  EXPECT_EQ(p1.moves[0].transfer, 1u);
  EXPECT_EQ(p1.moves[0].len, 500u);
  EXPECT_EQ(p1.moves[1].transfer, 3u);
  // Inbox of node 1: block from node 0 first, then node 2's.
  ASSERT_EQ(p1.blocks.size(), 2u);
  EXPECT_EQ(p1.blocks[1].src_node, 2u);
  EXPECT_EQ(p1.blocks[1].inbox_offset, p1.blocks[0].len);
  std::vector<RankCompletion> d1 = s.Finish(p1);
  ASSERT_EQ(d1.size(), 1u);
  EXPECT_EQ(d1[0].c.req, 3u);
  SlicePlan p2 = s.Plan();
  CheckPlan(p2, rank_node, opt);
  ASSERT_EQ(p2.moves.size(), 2u);  // the rest of 1 (300), then 2 in the same block
  EXPECT_EQ(p2.moves[0].offset, 500u);
  EXPECT_EQ(p2.moves[0].len, 300u);
  EXPECT_EQ(p2.moves[1].transfer, 2u);
  EXPECT_EQ(p2.moves[1].outbox_offset, kBlockHeaderBytes + 300);
  std::vector<RankCompletion> d2 = s.Finish(p2);
  ASSERT_EQ(d2.size(), 2u);
  EXPECT_EQ(d2[0].c.req, 1u);
  EXPECT_EQ(d2[1].c.req, 2u);
  EXPECT_TRUE(s.idle());
}

TEST(SchedulerTest, MultiDestSendsOncePerNodeAndCopiesLocally) {
  // Node 0: ranks 0, 1; node 1: ranks 2, 3; node 2: rank 4.
  std::vector<uint32_t> rank_node = {0, 0, 1, 1, 2};
  SchedulerOptions opt;
  opt.inbox_bytes = 300;
  opt.outbox_bytes = 2000;
  opt.local_bytes = 150;
  Scheduler s(rank_node, opt);
  s.Add({MakeTransfer(1, 0, 400, {3, 1, 4, 2})});
  int slices = 0;
  std::map<uint32_t, uint64_t> got;  // dst node -> bytes, checked contiguous
  std::vector<RankCompletion> done;
  while (!s.idle()) {
    ASSERT_LT(++slices, 10);
    SlicePlan plan = s.Plan();
    CheckPlan(plan, rank_node, opt);
    std::set<uint32_t> nodes;
    for (const Move& m : plan.moves) {
      EXPECT_EQ(m.src_node, 0u);
      EXPECT_TRUE(nodes.insert(m.dst_node).second) << "one piece per dest node";
      EXPECT_EQ(m.offset, got[m.dst_node]);
      got[m.dst_node] += m.len;
    }
    EXPECT_TRUE(std::is_sorted(nodes.begin(), nodes.end()));
    done = s.Finish(plan);
    if (!s.idle()) {
      EXPECT_TRUE(done.empty());
    }
  }
  EXPECT_EQ(slices, 3);  // local: 150 per slice; remote: 300 - 64 = 236 per slice
  EXPECT_EQ(got, (std::map<uint32_t, uint64_t>{{0, 400}, {1, 400}, {2, 400}}));
  ASSERT_EQ(done.size(), 1u);
}

TEST(SchedulerTest, ZeroLengthTransfersCompleteAtNextFinish) {
  Scheduler s({0, 1});
  s.Add({MakeTransfer(1, 0, 0, {1}), MakeTransfer(2, 0, 5, {})});
  SlicePlan plan = s.Plan();
  EXPECT_TRUE(plan.moves.empty());
  EXPECT_FALSE(s.idle());
  std::vector<RankCompletion> done = s.Finish(plan);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].c.req, 1u);
  EXPECT_EQ(done[1].c.req, 2u);
  EXPECT_TRUE(s.idle());
}

// Random transfers through small budgets, with the data really carried: the source node copies
// pieces into its outbox, whole blocks are "sent" outbox -> inbox, and every destination writes
// pieces from its inbox (or, on the source node, from the source) into the destination
// buffers. Checks every plan, that each transfer's bytes arrive intact everywhere, that
// completions come exactly once, and that a second scheduler plans identically.
TEST(SchedulerTest, RandomTrafficDeliversEveryByteAndIsDeterministic) {
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const uint32_t nodes = 3;
    std::vector<uint32_t> rank_node;
    for (uint32_t r = 0; r < 7; ++r) rank_node.push_back(r % nodes);
    SchedulerOptions opt;
    opt.inbox_bytes = static_cast<uint64_t>(pick(100, 600));
    opt.outbox_bytes = static_cast<uint64_t>(pick(100, 600));
    opt.local_bytes = static_cast<uint64_t>(pick(1, 500));
    Scheduler a(rank_node, opt);
    Scheduler b(rank_node, opt);

    std::map<uint64_t, std::vector<uint8_t>> source;                     // transfer -> data
    std::map<std::pair<uint64_t, uint32_t>, std::vector<uint8_t>> dest;  // (transfer, rank)
    std::map<uint64_t, Transfer> all;
    std::multiset<uint64_t> completed;
    std::map<std::pair<uint64_t, uint32_t>, uint64_t> delivered;  // (transfer, dst node)
    uint64_t next_id = 1;
    for (int slice = 0; slice < 20000 && (slice < 20 || !a.idle()); ++slice) {
      if (slice < 20) {
        std::vector<Transfer> batch;
        for (int k = pick(0, 3); k > 0; --k) {
          const uint64_t id = next_id++;
          std::vector<uint32_t> ds;
          for (uint32_t r = 0; r < rank_node.size(); ++r) {
            if (pick(0, 2) == 0) ds.push_back(r);
          }
          Transfer t = MakeTransfer(id, static_cast<uint32_t>(pick(0, 6)),
                                    static_cast<uint64_t>(pick(0, 1500)), ds);
          std::vector<uint8_t> data(t.len);
          for (auto& byte : data) byte = static_cast<uint8_t>(rng());
          source[id] = data;
          for (uint32_t d : ds) dest[{id, d}] = std::vector<uint8_t>(t.len, 0);
          all[id] = t;
          batch.push_back(t);
        }
        a.Add(batch);
        b.Add(batch);
      }
      SlicePlan plan = a.Plan();
      SlicePlan plan_b = b.Plan();
      ASSERT_EQ(plan.moves.size(), plan_b.moves.size());
      for (size_t i = 0; i < plan.moves.size(); ++i) {
        ASSERT_EQ(std::memcmp(&plan.moves[i], &plan_b.moves[i], sizeof(Move)), 0);
      }
      ASSERT_EQ(plan.blocks.size(), plan_b.blocks.size());
      CheckPlan(plan, rank_node, opt);

      std::vector<std::vector<uint8_t>> outbox(nodes, std::vector<uint8_t>(opt.outbox_bytes));
      std::vector<std::vector<uint8_t>> inbox(nodes, std::vector<uint8_t>(opt.inbox_bytes));
      for (const Move& m : plan.moves) {
        const Transfer* t = a.Find(m.transfer);
        ASSERT_NE(t, nullptr);
        ASSERT_EQ(m.src_node, rank_node[t->src_rank]);
        ASSERT_LE(m.offset + m.len, t->len);
        if (m.src_node != m.dst_node) {
          std::memcpy(&outbox[m.src_node][m.outbox_offset], &source[m.transfer][m.offset], m.len);
        }
      }
      for (const Block& blk : plan.blocks) {
        std::memcpy(&inbox[blk.dst_node][blk.inbox_offset],
                    &outbox[blk.src_node][blk.outbox_offset], blk.len);
      }
      for (const Move& m : plan.moves) {
        const Transfer* t = a.Find(m.transfer);
        const uint8_t* from = m.src_node == m.dst_node ? &source[m.transfer][m.offset]
                                                       : &inbox[m.dst_node][m.inbox_offset];
        for (const Transfer::Dest& d : t->dests) {
          if (rank_node[d.rank] == m.dst_node) {
            std::memcpy(&dest[{m.transfer, d.rank}][m.offset], from, m.len);
          }
        }
      }
      // Per-pair FIFO: a transfer gets a piece for node D only if every earlier transfer from
      // the same source node to D is fully delivered once this plan is done.
      for (const Move& m : plan.moves) delivered[{m.transfer, m.dst_node}] += m.len;
      for (const Move& m : plan.moves) {
        for (const auto& [id, earlier] : all) {
          if (id >= m.transfer || rank_node[earlier.src_rank] != m.src_node) continue;
          if (!a.Find(id)) continue;
          for (const auto& d : earlier.dests) {
            if (rank_node[d.rank] != m.dst_node) continue;
            const uint64_t got = delivered[{id, m.dst_node}];
            ASSERT_EQ(got, earlier.len) << "seed " << seed << ": transfer " << m.transfer
                                        << " overtook " << id << " to node " << m.dst_node;
          }
        }
      }
      for (const RankCompletion& rc : a.Finish(plan)) completed.insert(rc.c.req);
      b.Finish(plan_b);
    }
    ASSERT_TRUE(a.idle()) << "seed " << seed;
    ASSERT_TRUE(b.idle()) << "seed " << seed;
    for (const auto& [id, t] : all) {
      EXPECT_EQ(completed.count(id), 1u) << "seed " << seed << " transfer " << id;
      for (const auto& d : t.dests) {
        const std::vector<uint8_t>& got = dest[{id, d.rank}];
        ASSERT_EQ(got, source[id]) << "seed " << seed << " transfer " << id;
      }
    }
    EXPECT_EQ(completed.size(), all.size());
  }
}

}  // namespace
}  // namespace gos::nodeagent
