// prim_node: one member of a test group. Joins through the bootstrap service and runs a named
// scenario that exercises one semantic of the primitives, coordinating with the other
// members only through the primitives themselves. Prints what it checks; exits 0 when every
// check held, 1 when one failed (the line says which), 2 on bad usage.
//
//   prim_node --bootstrap HOST:PORT --scenario NAME [--id N] [--provider P] [--fanout K]
//             [--victim N] [--rounds R]
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gos/prim/prim.h"
#include "libgos/prim/messages.h"

namespace {

using namespace gos;
using namespace gos::prim;
using std::chrono::milliseconds;

// Global memory layout of the scenarios.
constexpr uint64_t kPhaseVar = 0;  // Barrier phase reached by this node.
constexpr uint64_t kVarA = 64;     // Scenario variables.
constexpr uint64_t kVarB = 72;
constexpr uint64_t kVarW = 80;
constexpr uint64_t kData = 1 << 20;  // Transfer landing zone.
constexpr EventId kGo = 1;           // Barrier release.
constexpr EventId kData1 = 2;        // Remote event of data transfers.
constexpr EventId kLocal = 3;        // Local completion.
constexpr EventId kData2 = 4;

struct Args {
  std::string bootstrap, scenario, provider;
  NodeId id = kNoNode;
  uint32_t fanout = 4;
  NodeId victim = kNoNode;
  int rounds = 20;
  bool no_spin = false;    // SetSpinning(false): sleep right after every message
  bool rejoiner = false;   // rejoin: this process joins again under the victim's id
  std::string stall_post;  // "ID:MS": node ID's every post stalls MS ms (the watchdog test)
};

Node* g_node = nullptr;
int g_phase = 0;

[[noreturn]] void Fail(const std::string& what) {
  std::printf("node %u: FAIL %s\n", g_node ? g_node->id() : 0u, what.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

void Check(bool cond, const std::string& what) {
  if (!cond) Fail(what);
}

template <typename T>
T Must(StatusOr<T> v, const std::string& what) {
  if (!v.ok()) Fail(what + ": " + v.status().ToString());
  return std::move(v).value();
}

void Must(const Status& s, const std::string& what) {
  if (!s.ok()) Fail(what + ": " + s.ToString());
}

// Everyone reaches the barrier: node 0 polls COMPARE-AND-WRITE (phase >= p on all nodes),
// then releases everyone with an XFER-AND-SIGNAL (the paper's pattern, seed 000 Table 3).
void Barrier(Node& n, const NodeSet& all) {
  ++g_phase;
  n.Store(kPhaseVar, g_phase);
  if (n.id() == all.ToVector().front()) {
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!Must(n.CompareAndWrite(all, kPhaseVar, CompareOp::kGe, g_phase), "barrier CAW")) {
      Check(Clock::now() < deadline, "barrier " + std::to_string(g_phase) + " timed out");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    int64_t token = g_phase;
    Must(n.XferAndSignal(all, &token, sizeof token, kVarW + 8, kGo), "barrier release");
  }
  Check(Must(n.WaitEvent(kGo, std::chrono::seconds(30)), "barrier wait"),
        "barrier " + std::to_string(g_phase) + " release never came");
}

void Barrier(Node& n) { Barrier(n, NodeSet::All(n.group_size())); }

uint8_t Pattern(int round, uint64_t i) {
  return static_cast<uint8_t>((i * 131 + static_cast<uint64_t>(round) * 17 + (i >> 12)) & 0xff);
}

// XFER-AND-SIGNAL to a subset: members get the data and the event; others get neither.
void MulticastSubset(Node& n) {
  uint32_t size = n.group_size();
  NodeSet odd;
  for (NodeId i = 1; i < size; i += 2) odd.Add(i);
  // Inline-sized and RMA-sized blocks.
  for (size_t len : {size_t{100}, size_t{3} << 20}) {
    Barrier(n);
    if (n.id() == 0) {
      std::vector<uint8_t> buf(len);
      for (size_t i = 0; i < len; ++i) buf[i] = Pattern(static_cast<int>(len), i);
      Must(n.XferAndSignal(odd, buf.data(), len, kData, kData1, kLocal), "multicast");
      Check(Must(n.WaitEvent(kLocal, std::chrono::seconds(20)), "local event"),
            "local event of multicast to " + odd.ToString() + " never fired");
      std::printf("node 0: multicast of %zu bytes to %s acknowledged\n", len,
                  odd.ToString().c_str());
    }
    Barrier(n);  // Every receiver has it now (root's local event implies delivery).
    auto gm = n.global_memory();
    const auto* got = reinterpret_cast<const uint8_t*>(gm.data()) + kData;
    if (odd.Contains(n.id())) {
      Check(Must(n.TestEvent(kData1), "test event"), "member did not get the remote event");
      for (size_t i = 0; i < len; ++i) {
        if (got[i] != Pattern(static_cast<int>(len), i)) {
          Fail("byte " + std::to_string(i) + " of the " + std::to_string(len) +
               "-byte block differs");
        }
      }
    } else {
      Check(!Must(n.TestEvent(kData1), "test event"), "non-member got the remote event");
      for (size_t i = 0; i < len; ++i) Check(got[i] == 0, "non-member's memory was written");
    }
  }
  // A single destination, and a set that includes the sender itself.
  Barrier(n);
  if (n.id() == size - 1) {
    int64_t v = 4242;
    Must(n.XferAndSignal(NodeSet{0, size - 1}, &v, sizeof v, kVarA, kData2, kLocal), "xfer");
    Check(Must(n.WaitEvent(kLocal, std::chrono::seconds(10)), "local"), "no local event");
  }
  Barrier(n);
  if (n.id() == 0 || n.id() == size - 1) {
    Check(Must(n.TestEvent(kData2), "test"), "destination got no event");
    Check(n.Load(kVarA) == 4242, "destination has the wrong value");
  } else {
    Check(n.Load(kVarA) == 0, "a node outside {0, last} was written");
  }
  std::printf("node %u: multicast subset checks passed\n", n.id());
}

// TEST-EVENT: counting, polling, blocking with a deadline; all-or-none visibility of large
// transfers cut into many pieces.
void Events(Node& n, int rounds) {
  NodeSet others = NodeSet::Range(1, n.group_size());
  Barrier(n);
  if (n.id() == 0) {
    for (int i = 0; i < 3; ++i) {
      int64_t v = i;
      Must(n.XferAndSignal(others, &v, sizeof v, kVarA, kData1, kLocal), "xfer");
    }
    for (int i = 0; i < 3; ++i) {
      Check(Must(n.WaitEvent(kLocal, std::chrono::seconds(10)), "local"), "missing local event");
    }
    Check(!Must(n.TestEvent(kLocal), "poll"), "a fourth local event appeared");
  }
  Barrier(n);
  if (n.id() != 0) {
    for (int i = 0; i < 3; ++i)
      Check(Must(n.TestEvent(kData1), "poll"), "missing signal " + std::to_string(i));
    Check(!Must(n.TestEvent(kData1), "poll"), "event signalled more often than sent");
  }
  // Blocking with a deadline returns false, not early, and without a signal.
  auto t0 = Clock::now();
  Check(!Must(n.WaitEvent(kData2, milliseconds(50)), "wait"), "unsent event fired");
  Check(Clock::now() - t0 >= milliseconds(50), "blocking TEST-EVENT returned before its deadline");
  Check(!n.TestEvent(kMaxEvents).ok(), "event id out of range was accepted");

  // All-or-none: every round overwrites a 2 MiB block (32 pieces) with a new pattern; a
  // receiver checks the whole block the moment its event fires.
  const size_t len = 2u << 20;
  std::vector<uint8_t> buf(len);
  for (int r = 0; r < rounds; ++r) {
    Barrier(n);
    if (n.id() == 0) {
      for (size_t i = 0; i < len; ++i) buf[i] = Pattern(r, i);
      Must(n.XferAndSignal(others, buf.data(), len, kData, kData1, kLocal), "xfer");
      Check(Must(n.WaitEvent(kLocal, std::chrono::seconds(20)), "local"), "no local event");
    } else {
      Check(Must(n.WaitEvent(kData1, std::chrono::seconds(20)), "wait"), "no data event");
      const auto* got = reinterpret_cast<const uint8_t*>(n.global_memory().data()) + kData;
      for (size_t i = 0; i < len; ++i) {
        if (got[i] != Pattern(r, i)) {
          Fail("round " + std::to_string(r) + ": event fired but byte " + std::to_string(i) +
               " is not there yet (partial data observed)");
        }
      }
    }
  }
  std::printf("node %u: event checks passed (%d all-or-none rounds)\n", n.id(), rounds);
}

// COMPARE-AND-WRITE: every operator, true and false, on the whole group and on subsets;
// the write happens everywhere exactly when the comparison held everywhere.
void Caw(Node& n) {
  uint32_t size = n.group_size();
  NodeSet all = NodeSet::All(size);
  n.Store(kVarA, n.id());      // A = id: differs per node.
  n.Store(kVarB, n.id() % 2);  // B = parity.
  Barrier(n);
  if (n.id() == 0) {
    auto caw = [&](const NodeSet& s, uint64_t var, CompareOp op, int64_t v) {
      return Must(n.CompareAndWrite(s, var, op, v), "CAW");
    };
    int64_t max_id = size - 1;
    Check(caw(all, kVarA, CompareOp::kGe, 0), ">= 0 must hold on all");
    Check(!caw(all, kVarA, CompareOp::kGe, 1), ">= 1 fails on node 0");
    Check(caw(all, kVarA, CompareOp::kLe, max_id), "<= max id holds");
    Check(!caw(all, kVarA, CompareOp::kLe, max_id - 1), "<= max-1 fails on the last node");
    Check(caw(all, kVarA, CompareOp::kLt, max_id + 1), "< max+1 holds");
    Check(!caw(all, kVarA, CompareOp::kLt, max_id), "< max fails on the last node");
    Check(caw(all, kVarA, CompareOp::kGt, -1), "> -1 holds");
    Check(!caw(all, kVarA, CompareOp::kGt, 0), "> 0 fails on node 0");
    Check(caw(all, kVarA, CompareOp::kNe, -5), "!= -5 holds");
    Check(!caw(all, kVarA, CompareOp::kNe, max_id), "!= max fails on the last node");
    Check(!caw(all, kVarA, CompareOp::kEq, 0), "== 0 fails on node 1..");
    NodeSet evens, odds;
    for (NodeId i = 0; i < size; ++i) (i % 2 ? odds : evens).Add(i);
    Check(caw(evens, kVarB, CompareOp::kEq, 0), "B == 0 on the even nodes");
    Check(!caw(all, kVarB, CompareOp::kEq, 0), "B == 0 fails on the whole group");
    if (!odds.empty()) Check(caw(odds, kVarB, CompareOp::kEq, 1), "B == 1 on the odd nodes");
    Check(caw(NodeSet{size - 1}, kVarA, CompareOp::kEq, max_id), "single-node set");
    // Write only when true.
    Check(Must(n.CompareAndWrite(all, kVarA, CompareOp::kGe, 0, kVarW, 42), "CAW"), "true CAW");
    Check(!Must(n.CompareAndWrite(all, kVarA, CompareOp::kEq, 0, kVarW, 77), "CAW"), "false CAW");
    // Write on a subset only.
    if (!odds.empty()) {
      Check(Must(n.CompareAndWrite(odds, kVarB, CompareOp::kEq, 1, kVarB, 9), "CAW"), "odd write");
    }
    // Bad arguments fail cleanly.
    Check(!n.CompareAndWrite(all, 3, CompareOp::kEq, 0).ok(), "misaligned var accepted");
    Check(!n.CompareAndWrite(NodeSet{size}, kVarA, CompareOp::kEq, 0).ok(), "outsider accepted");
  }
  Barrier(n);
  Check(n.Load(kVarW) == 42,
        "write of the true CAW missing (W=" + std::to_string(n.Load(kVarW)) + ")");
  int64_t want_b = n.id() % 2 == 1 ? 9 : 0;
  Check(n.Load(kVarB) == want_b,
        "subset write landed wrong (B=" + std::to_string(n.Load(kVarB)) + ")");
  std::printf("node %u: compare-and-write checks passed\n", n.id());
}

// Concurrent CAWs with identical parameters but different write values from every node:
// afterwards all nodes hold the same value, and it is one of the written ones.
void CawConcurrent(Node& n, int rounds) {
  uint32_t size = n.group_size();
  NodeSet all = NodeSet::All(size);
  for (int r = 0; r < rounds; ++r) {
    Barrier(n);
    int64_t mine = 1000 * (r + 1) + n.id();
    Check(Must(n.CompareAndWrite(all, kVarA, CompareOp::kEq, 0, kVarW, mine), "concurrent CAW"),
          "concurrent CAW returned false");
    Barrier(n);
    int64_t w = n.Load(kVarW);
    Check(w >= 1000 * (r + 1) && w < 1000 * (r + 1) + size, "W holds a value nobody wrote");
    // Everyone holds the same value iff CAW(W == mine-as-seen) is true from my side.
    Check(Must(n.CompareAndWrite(all, kVarW, CompareOp::kEq, w), "check CAW"),
          "round " + std::to_string(r) + ": nodes disagree on W (I see " + std::to_string(w) + ")");
  }
  std::printf("node %u: concurrent compare-and-write consistent over %d rounds\n", n.id(), rounds);
}

// A peer dies while operations are in flight: every survivor's next or pending operation
// fails within a bounded time with an error naming the victim.
void KillPeer(Node& n, NodeId victim) {
  NodeSet all = NodeSet::All(n.group_size());
  Barrier(n);
  std::printf("node %u: READY\n", n.id());
  std::fflush(stdout);
  if (n.id() == victim) {
    pause();  // The test kills this process (SIGKILL, or SIGSTOP then cut-off).
    return;
  }
  std::vector<uint8_t> buf(4u << 20, 7);
  auto last_ok = Clock::now();
  while (true) {
    Status err;
    if (n.id() == 0) {
      Status s = n.XferAndSignal(all, buf.data(), buf.size(), kData, kData1, kLocal);
      if (s.ok()) {
        StatusOr<bool> e = n.WaitEvent(kLocal, std::chrono::seconds(30));
        if (!e.ok())
          err = e.status();
        else if (!*e)
          Fail("multicast neither completed nor failed within 30 s");
      } else {
        err = s;
      }
    } else {
      StatusOr<bool> r = n.CompareAndWrite(all, kVarA, CompareOp::kEq, 0, Node::kNoWrite, 0,
                                           Clock::now() + std::chrono::seconds(30));
      if (!r.ok()) err = r.status();
    }
    if (!err.ok()) {
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - last_ok).count();
      std::printf("node %u: operation failed %.0f ms after the last success: %s\n", n.id(), ms,
                  err.ToString().c_str());
      std::string want = "node " + std::to_string(victim) + " ";
      Check(err.message().find(want) != std::string::npos, "error does not name the victim");
      Check(err.code() == StatusCode::kUnavailable, "error is not UNAVAILABLE");
      // Later operations fail at once.
      auto t0 = Clock::now();
      Status later = n.CompareAndWrite(all, kVarA, CompareOp::kEq, 0).status();
      Check(!later.ok() && later.message().find(want) != std::string::npos,
            "a later operation did not fail naming the victim: " + later.ToString());
      Check(Clock::now() - t0 < milliseconds(100), "a later operation did not fail at once");
      std::printf("node %u: PEER FAILURE DETECTED\n", n.id());
      // The survivors carry on among themselves.
      NodeSet survivors = all;
      survivors.Remove(victim);
      Barrier(n, survivors);
      Check(Must(n.CompareAndWrite(survivors, kPhaseVar, CompareOp::kGe, g_phase), "CAW"),
            "survivors cannot work together after the failure");
      Barrier(n, survivors);
      return;
    }
    last_ok = Clock::now();
  }
}

// The victim is killed (by the test) while every other node keeps writing 2 MiB blocks into
// it, and a new process joins under its id: the survivors see it down, then up again at a new
// pid, and the whole group works again — barriers, 2 MiB from each survivor to the new
// process, a multi-piece multicast to everyone, a COMPARE-AND-WRITE with a write started by
// the new process.
void Rejoin(Node& n, NodeId victim, bool rejoiner) {
  NodeSet all = NodeSet::All(n.group_size());
  std::vector<uint8_t> block(2u << 20);
  if (!rejoiner) {
    Barrier(n);
    std::printf("node %u: READY\n", n.id());
    if (n.id() == victim) pause();  // SIGKILL from the test.
    // Transfers in flight to it when it dies. (Not on shm: a node killed while it holds the
    // lock of its shm queue blocks every sender to it for good, a limit of libfabric's shm.)
    while (n.provider() != "shm") {
      Status s =
          n.XferAndSignal(NodeSet{victim}, block.data(), block.size(), kData, kNoEvent, kLocal);
      if (s.ok()) {
        StatusOr<bool> done = n.WaitEvent(kLocal, std::chrono::seconds(30));
        Check(done.ok() ? *done : true, "a block to the victim neither arrived nor failed");
        s = done.status();
      }
      if (!s.ok()) break;
    }
    const int32_t old_pid = n.node_info(victim).pid;
    auto deadline = Clock::now() + std::chrono::seconds(30);
    if (n.id() == 0) {  // The test starts the new process once node 0 saw the victim down.
      while (n.node_info(victim).alive) {
        Check(Clock::now() < deadline, "the victim was never seen down");
        std::this_thread::sleep_for(milliseconds(5));
      }
      Check(!n.CompareAndWrite(all, kPhaseVar, CompareOp::kGe, 0).ok(),
            "an operation over the dead victim succeeded");
      std::printf("node %u: VICTIM DOWN (%s)\n", n.id(), n.node_info(victim).down_reason.c_str());
    }
    deadline = Clock::now() + std::chrono::seconds(60);
    while (!n.node_info(victim).alive || n.node_info(victim).pid == old_pid) {
      Check(Clock::now() < deadline, "the victim never joined again");
      std::this_thread::sleep_for(milliseconds(5));
    }
    std::printf("node %u: VICTIM BACK\n", n.id());
  } else {
    g_phase = 1;  // The survivors passed one barrier before it joined.
    for (NodeId i = 0; i < n.group_size(); ++i) {
      Check(n.node_info(i).alive, "node " + std::to_string(i) + " is not alive for the joiner");
    }
  }
  Barrier(n, all);
  // From each survivor in turn, 2 MiB into the new process.
  for (NodeId from = 0; from < n.group_size(); ++from) {
    if (from == victim) continue;
    for (size_t i = 0; i < block.size(); ++i) block[i] = Pattern(static_cast<int>(from), i);
    if (n.id() == from) {
      Must(n.XferAndSignal(NodeSet{victim}, block.data(), block.size(), kData, kData2, kLocal),
           "block to the new process");
      Check(Must(n.WaitEvent(kLocal, std::chrono::seconds(30)), "block delivered"),
            "the block to the new process was never delivered");
    }
    if (rejoiner) {
      Check(Must(n.WaitEvent(kData2, std::chrono::seconds(30)), "block arrival"),
            "the block from node " + std::to_string(from) + " never arrived");
      Check(std::memcmp(n.global_memory().data() + kData, block.data(), block.size()) == 0,
            "the block from node " + std::to_string(from) + " differs");
    }
    Barrier(n, all);
  }
  std::vector<uint8_t> data(300u << 10);
  for (size_t i = 0; i < data.size(); ++i) data[i] = Pattern(5, i);
  if (n.id() == 0) {
    Must(n.XferAndSignal(all, data.data(), data.size(), kData, kData1, kLocal), "multicast");
    Check(Must(n.WaitEvent(kLocal, std::chrono::seconds(30)), "multicast done"),
          "the multicast to the group with the new member never completed");
  }
  Check(Must(n.WaitEvent(kData1, std::chrono::seconds(30)), "multicast arrival"),
        "the multicast never arrived");
  Check(std::memcmp(n.global_memory().data() + kData, data.data(), data.size()) == 0,
        "multicast data differ");
  if (rejoiner) {
    Check(Must(n.CompareAndWrite(all, kPhaseVar, CompareOp::kGe, g_phase, kVarW, 42),
               "CAW from the new member"),
          "CAW over the group from the new member was false");
  }
  Barrier(n, all);
  Check(n.Load(kVarW) == 42, "the new member's write did not reach node " + std::to_string(n.id()));
  std::printf("node %u: rejoin checks passed\n", n.id());
}

// Malformed, oversized and out-of-range control messages are rejected; the node carries on.
void Malformed(Node& n) {
  NodeSet all = NodeSet::All(n.group_size());
  Barrier(n);
  int sent = 0;
  if (n.id() == 0) {
    auto send = [&](std::vector<uint8_t> bytes) {
      Must(n.SendRawControlForTest(1, bytes), "raw send");
      ++sent;
    };
    std::mt19937 rng(7);
    for (int i = 0; i < 20; ++i) {  // Random garbage of random sizes.
      std::vector<uint8_t> junk(rng() % 300);
      for (auto& b : junk) b = static_cast<uint8_t>(rng());
      send(junk);
    }
    ControlMsg good;
    good.type = MsgType::kXferPiece;
    good.src = 0;
    good.origin = 0;
    good.seq = 99;
    good.tree_root = 0;
    good.fanout = 4;
    good.set = NodeSet{1};
    good.offset = kData;
    good.total_len = 8;
    good.piece_len = 8;
    good.is_inline = true;
    uint8_t eight[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    good.inline_data = eight;
    std::vector<uint8_t> enc;
    EncodeControl(good, &enc);
    for (size_t cut : {size_t{3}, size_t{15}, enc.size() - 1}) {  // Truncated.
      send(std::vector<uint8_t>(enc.begin(), enc.begin() + cut));
    }
    auto flip = [&](size_t at, uint8_t v) {
      auto b = enc;
      b[at] = v;
      send(b);
    };
    flip(0, 0x00);          // Bad magic.
    flip(4, 9);             // Unknown version.
    flip(5, 77);            // Unknown type.
    flip(12, 0xff);         // Payload length lies.
    ControlMsg far = good;  // Well-formed but outside global memory.
    far.offset = n.global_memory().size() - 4;
    EncodeControl(far, &enc);
    send(enc);
    ControlMsg outsider = good;  // Claims a source outside the group.
    outsider.src = 4000;
    outsider.origin = 4000;
    EncodeControl(outsider, &enc);
    send(enc);
    ControlMsg stray;  // A reply nobody waits for.
    stray.type = MsgType::kCawQueryReply;
    stray.src = 0;
    stray.origin = 0;
    stray.seq = 12345;
    EncodeControl(stray, &enc);
    send(enc);
    send(std::vector<uint8_t>(64u << 10, 0xab));  // Oversized: beyond the receive buffers.
    int64_t count = sent;
    Must(n.XferAndSignal(NodeSet{1}, &count, sizeof count, kVarB, kData1), "count");
  }
  if (n.id() == 1) {
    Check(Must(n.WaitEvent(kData1, std::chrono::seconds(10)), "wait"), "count never came");
    int64_t expected = n.Load(kVarB);
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (n.stats().messages_rejected < static_cast<uint64_t>(expected) &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    std::printf("node 1: rejected %llu of %lld bad messages\n",
                static_cast<unsigned long long>(n.stats().messages_rejected),
                static_cast<long long>(expected));
    Check(n.stats().messages_rejected == static_cast<uint64_t>(expected),
          "not every bad message was rejected");
    Check(n.Load(kData) == 0, "a rejected message wrote memory");
  }
  // Still fully working.
  Barrier(n);
  if (n.id() == 0) {
    Check(Must(n.CompareAndWrite(all, kPhaseVar, CompareOp::kGe, 1, kVarW, 5), "CAW"),
          "CAW after garbage");
  }
  Barrier(n);
  Check(n.Load(kVarW) == 5, "group does not work after the garbage");
  std::printf("node %u: malformed-message checks passed\n", n.id());
}

int ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "prim_node: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--bootstrap")
      a->bootstrap = val();
    else if (k == "--scenario")
      a->scenario = val();
    else if (k == "--provider")
      a->provider = val();
    else if (k == "--id")
      a->id = static_cast<NodeId>(std::stoul(val()));
    else if (k == "--fanout")
      a->fanout = static_cast<uint32_t>(std::stoul(val()));
    else if (k == "--victim")
      a->victim = static_cast<NodeId>(std::stoul(val()));
    else if (k == "--rounds")
      a->rounds = std::stoi(val());
    else if (k == "--no-spin")
      a->no_spin = true;
    else if (k == "--rejoiner")
      a->rejoiner = true;
    else if (k == "--stall-post")
      a->stall_post = val();
    else {
      std::fprintf(stderr, "prim_node: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a->bootstrap.empty() || a->scenario.empty()) {
    std::fprintf(stderr, "usage: prim_node --bootstrap HOST:PORT --scenario NAME [...]\n");
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Args args;
  if (int rc = ParseArgs(argc, argv, &args); rc != 0) return rc;
  if (auto colon = args.stall_post.find(':');
      colon != std::string::npos && std::stoul(args.stall_post.substr(0, colon)) == args.id) {
    setenv("GOS_PRIM_TEST_STALL_POST_MS", args.stall_post.substr(colon + 1).c_str(), 1);
  }
  NodeOptions o;
  o.bootstrap = args.bootstrap;
  o.provider = args.provider;
  o.requested_id = args.id;
  o.fanout = args.fanout;
  o.piece_bytes = 64u << 10;  // Many pieces per transfer: a sharper all-or-none test.
  o.global_memory_bytes = 8u << 20;
  o.heartbeat_interval = milliseconds(100);
  auto node = Node::Join(o);
  if (!node.ok()) {
    std::printf("FAIL join: %s\n", node.status().ToString().c_str());
    return 1;
  }
  Node& n = **node;
  g_node = &n;
  std::printf("node %u of %u joined, provider %s\n", n.id(), n.group_size(), n.provider().c_str());
  if (args.no_spin) n.SetSpinning(false);
  const std::string& s = args.scenario;
  if (s == "multicast_subset")
    MulticastSubset(n);
  else if (s == "events")
    Events(n, args.rounds);
  else if (s == "caw")
    Caw(n);
  else if (s == "caw_concurrent")
    CawConcurrent(n, args.rounds);
  else if (s == "kill_peer")
    KillPeer(n, args.victim);
  else if (s == "malformed")
    Malformed(n);
  else if (s == "rejoin")
    Rejoin(n, args.victim, args.rejoiner);
  else if (s == "join_only") {
  } else {
    std::printf("FAIL unknown scenario %s\n", s.c_str());
    return 2;
  }
  if (s != "kill_peer") Barrier(n);  // Nobody leaves while others still need it.
  std::printf("node %u: doorbell wakeups %llu\n", n.id(),
              static_cast<unsigned long long>(n.stats().bell_wakeups));
  std::printf("node %u: PASS\n", n.id());
  return 0;
}
