// gos-prim-bench: figures of the three primitives on this machine, beside the raw libfabric
// reference measured in the same run, so every figure also appears as a ratio.
//
// For each group size N it starts N node processes (this binary, in node mode) joined
// through an in-process bootstrap service; node 0 measures:
//   - 8-byte XFER-AND-SIGNAL multicast to all others: completion at the root (every
//     destination acknowledged) and delivery (send -> the last receiver's event, on the
//     machine-wide monotonic clock), p50 and p99;
//   - COMPARE-AND-WRITE over all nodes, without and with a write, p50 and p99;
//   - 1 MiB and 12 MiB multicasts to all others: delivered bandwidth in aggregate
//     ((N-1) x size / time until every destination acknowledged), median.
// The reference is two raw libfabric endpoints on the same provider: an 8-byte send/recv
// round trip (busy-polled), and RMA-write bandwidth for 1 MiB and 12 MiB blocks.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap_proto.h"
#include "fabric.h"
#include "gos/prim/bootstrap.h"
#include "gos/prim/prim.h"

namespace {

using namespace gos;
using namespace gos::prim;
using std::chrono::duration;

constexpr size_t kGlobalMemory = 16u << 20;
constexpr uint64_t kVar = 0;
constexpr uint64_t kStamp = 64;
constexpr uint64_t kResults = 4096;  // Per-receiver delivery arrays.
constexpr uint64_t kBulk = 2u << 20;
constexpr EventId kData = 1, kLocal = 2, kArrays = 3, kQuit = 4, kBulkData = 5;

struct Options {
  std::vector<int> nodes = {2, 4, 8, 16, 32};
  int iterations = 1000;
  std::string provider;
  uint32_t fanout = 4;
  // Node mode (internal).
  std::string node_bootstrap;
  int node_id = -1;
  bool raw = false;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double NowUs() { return duration<double, std::micro>(Clock::now().time_since_epoch()).count(); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "gos-prim-bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T Must(StatusOr<T> v, const char* what) {
  if (!v.ok()) Die(std::string(what) + ": " + v.status().ToString());
  return std::move(v).value();
}
void Must(const Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}

// ---------------------------------------------------------------- raw libfabric reference

struct RawResult {
  double rtt_p50 = 0, rtt_p99 = 0, bw_1m = 0, bw_12m = 0;
};

// Joins the 2-process raw group through the bootstrap protocol (address exchange only).
bootstrap::Welcome RawJoin(const std::string& addr, Fabric& f, int id) {
  int fd = Must(bootstrap::ConnectTcp(addr, Clock::now() + std::chrono::seconds(10)), "connect");
  bootstrap::Join j;
  j.requested_id = static_cast<NodeId>(id);
  j.provider = f.provider_name();
  j.global_memory_bytes = f.region_bytes();
  j.self.pid = getpid();
  j.self.fabric_name = Must(f.LocalName(), "getname");
  j.self.mr_key = f.region_key();
  j.self.mr_base = f.region_remote_base();
  Must(bootstrap::WriteAll(
           fd, bootstrap::EncodeFrame(bootstrap::FrameType::kJoin, bootstrap::EncodeJoin(j))),
       "join");
  bootstrap::FrameBuffer in;
  while (true) {
    bootstrap::Frame fr;
    if (Must(in.Next(&fr), "frame")) {
      if (fr.type == bootstrap::FrameType::kWelcome) {
        auto w = Must(bootstrap::DecodeWelcome(fr.payload), "welcome");
        // Keep the connection open (closing would announce us down); it dies with us.
        return w;
      }
      continue;
    }
    uint8_t buf[65536];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) Die("bootstrap closed");
    in.Append(buf, static_cast<size_t>(n));
  }
}

void RawWait(Fabric& f, int completions) {
  fi_cq_msg_entry e[8];
  while (completions > 0) {
    ssize_t n = fi_cq_read(f.cq(), e, 8);
    if (n > 0) {
      completions -= static_cast<int>(n);
    } else if (n == -FI_EAVAIL) {
      fi_cq_err_entry err;
      Die(f.ReadCqError(&err).ToString());
    }
  }
}

template <typename Op>
void RawPost(Fabric& f, Op op) {
  ssize_t rc;
  while ((rc = op()) == -FI_EAGAIN) fi_cq_read(f.cq(), nullptr, 0);
  if (rc != 0) Die(FabricError(rc, "raw post").ToString());
}

int RawNode(const Options& o) {
  auto f = Must(
      Fabric::Open({ResolveProvider(o.provider),
                    ProviderUsesIp(ResolveProvider(o.provider)) ? "127.0.0.1" : "", kGlobalMemory}),
      "open fabric");
  auto w = RawJoin(o.node_bootstrap, *f, o.node_id);
  const auto& peer = w.peers[1 - o.node_id];
  fi_addr_t dst = Must(f->InsertPeer(peer.fabric_name), "av insert");
  fi_context2 ctx[4];
  char sbuf[8] = {}, rbuf[64];
  auto post_recv = [&] {
    RawPost(*f,
            [&] { return fi_recv(f->ep(), rbuf, sizeof rbuf, nullptr, FI_ADDR_UNSPEC, &ctx[0]); });
  };
  auto send = [&] {
    RawPost(*f, [&] { return fi_send(f->ep(), sbuf, sizeof sbuf, nullptr, dst, &ctx[1]); });
  };
  const int iters = o.iterations, warm = 100;
  std::vector<double> rtt;
  for (int i = 0; i < iters + warm; ++i) {
    post_recv();
    if (o.node_id == 0) {
      double t0 = NowUs();
      send();
      RawWait(*f, 2);  // Send + receive.
      if (i >= warm) rtt.push_back(NowUs() - t0);
    } else {
      RawWait(*f, 1);
      send();
      RawWait(*f, 1);
    }
  }
  // Bandwidth: write a block, then a message (send-after-write order), the peer answers.
  RawResult r;
  r.rtt_p50 = Percentile(rtt, 0.5);
  r.rtt_p99 = Percentile(rtt, 0.99);
  for (size_t size : {size_t{1} << 20, size_t{12} << 20}) {
    int reps = size > (1u << 20) ? 10 : 40;
    std::vector<double> bw;
    std::vector<uint8_t> src(size, 0x5a);
    for (int i = 0; i < reps + 2; ++i) {
      post_recv();
      if (o.node_id == 0) {
        double t0 = NowUs();
        RawPost(*f, [&] {
          return fi_write(f->ep(), src.data(), size, nullptr, dst, peer.mr_base + kBulk,
                          peer.mr_key, &ctx[2]);
        });
        send();
        RawWait(*f, 3);
        if (i >= 2) bw.push_back(static_cast<double>(size) / (NowUs() - t0) / 1e3);
      } else {
        RawWait(*f, 1);
        send();
        RawWait(*f, 1);
      }
    }
    (size == (1u << 20) ? r.bw_1m : r.bw_12m) = Percentile(bw, 0.5);
  }
  if (o.node_id == 0) {
    std::printf("RAW %.2f %.2f %.3f %.3f\n", r.rtt_p50, r.rtt_p99, r.bw_1m, r.bw_12m);
    std::fflush(stdout);
  }
  // Let the peer's last send complete before the endpoint goes.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return 0;
}

// ---------------------------------------------------------------- gos primitives

int GosNode(const Options& o) {
  NodeOptions no;
  no.bootstrap = o.node_bootstrap;
  no.provider = o.provider;
  no.requested_id = static_cast<NodeId>(o.node_id);
  no.fanout = o.fanout;
  no.global_memory_bytes = kGlobalMemory;
  auto node = Must(Node::Join(no), "join");
  Node& n = *node;
  const uint32_t size = n.group_size();
  const int iters = o.iterations, warm = std::min(100, iters / 5);
  NodeSet all = NodeSet::All(size);
  NodeSet others = NodeSet::Range(1, size);
  auto gm = reinterpret_cast<uint8_t*>(n.global_memory().data());
  auto wait = [&](EventId e) {
    if (!Must(n.WaitEvent(e, std::chrono::seconds(60)), "wait")) Die("event timed out");
  };

  if (n.id() != 0) {
    // Receiver: timestamp each 8-byte multicast on arrival, then hand the array to node 0.
    std::vector<double> arrival(static_cast<size_t>(iters + warm));
    for (auto& a : arrival) {
      wait(kData);
      double t0;
      std::memcpy(&t0, gm + kStamp, sizeof t0);
      a = NowUs() - t0;
    }
    Must(n.XferAndSignal(NodeSet{0}, arrival.data(), arrival.size() * sizeof(double),
                         kResults + n.id() * arrival.size() * sizeof(double), kArrays, kLocal),
         "send arrivals");
    wait(kLocal);
    wait(kQuit);
    return 0;
  }

  std::vector<double> done;
  for (int i = 0; i < iters + warm; ++i) {
    double t0 = NowUs();
    Must(n.XferAndSignal(others, &t0, sizeof t0, kStamp, kData, kLocal), "multicast");
    wait(kLocal);
    if (i >= warm) done.push_back(NowUs() - t0);
  }
  for (uint32_t i = 1; i < size; ++i) wait(kArrays);
  std::vector<double> delivered;
  for (int i = warm; i < iters + warm; ++i) {
    double worst = 0;
    for (uint32_t r = 1; r < size; ++r) {
      double v;
      std::memcpy(&v, gm + kResults + (r * static_cast<size_t>(iters + warm) + i) * sizeof v,
                  sizeof v);
      worst = std::max(worst, v);
    }
    delivered.push_back(worst);
  }
  std::vector<double> caw, caw_write;
  for (int i = 0; i < iters + warm; ++i) {
    double t0 = NowUs();
    if (!Must(n.CompareAndWrite(all, kVar, CompareOp::kGe, 0), "CAW")) Die("CAW false");
    if (i >= warm) caw.push_back(NowUs() - t0);
  }
  for (int i = 0; i < iters / 2 + warm; ++i) {
    double t0 = NowUs();
    if (!Must(n.CompareAndWrite(all, kVar, CompareOp::kGe, 0, kVar + 8, i), "CAW")) Die("false");
    if (i >= warm) caw_write.push_back(NowUs() - t0);
  }
  double bw[2];
  int k = 0;
  for (size_t bytes : {size_t{1} << 20, size_t{12} << 20}) {
    std::vector<uint8_t> src(bytes);
    for (size_t j = 0; j < bytes; ++j) src[j] = static_cast<uint8_t>(j * 7);
    std::vector<double> v;
    int reps = bytes > (1u << 20) ? 8 : 30;
    for (int i = 0; i < reps + 2; ++i) {
      double t0 = NowUs();
      Must(n.XferAndSignal(others, src.data(), bytes, kBulk, kBulkData, kLocal), "bulk");
      wait(kLocal);
      if (i >= 2) v.push_back(static_cast<double>(bytes) * (size - 1) / (NowUs() - t0) / 1e3);
    }
    bw[k++] = Percentile(v, 0.5);
  }
  std::printf("GOS %u %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.3f %.3f\n", size,
              Percentile(done, 0.5), Percentile(done, 0.99), Percentile(delivered, 0.5),
              Percentile(delivered, 0.99), Percentile(caw, 0.5), Percentile(caw, 0.99),
              Percentile(caw_write, 0.5), Percentile(caw_write, 0.99), bw[0], bw[1]);
  std::fflush(stdout);
  int64_t q = 1;
  Must(n.XferAndSignal(others, &q, sizeof q, kVar + 16, kQuit, kLocal), "quit");
  wait(kLocal);
  return 0;
}

// ---------------------------------------------------------------- driver

// Runs `count` node processes of this binary against a fresh bootstrap service; returns
// node 0's stdout.
std::string RunGroup(const Options& o, int count, bool raw) {
  BootstrapOptions bo;
  bo.group_size = static_cast<uint32_t>(count);
  bo.failure_timeout = std::chrono::seconds(30);
  auto server = Must(BootstrapServer::Start(bo), "bootstrap");
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) Die("cannot find own executable");
  exe[len] = '\0';
  int pipefd[2];
  if (pipe(pipefd) != 0) Die("pipe");
  std::vector<pid_t> pids;
  for (int i = 0; i < count; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      if (i == 0) dup2(pipefd[1], STDOUT_FILENO);
      close(pipefd[0]);
      close(pipefd[1]);
      std::vector<std::string> args = {exe,
                                       "--node",
                                       server->address(),
                                       "--id",
                                       std::to_string(i),
                                       "--iterations",
                                       std::to_string(o.iterations),
                                       "--fanout",
                                       std::to_string(o.fanout)};
      if (!o.provider.empty()) args.insert(args.end(), {"--provider", o.provider});
      if (raw) args.push_back("--raw");
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(exe, argv.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  close(pipefd[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  bool failed = false;
  for (pid_t p : pids) {
    int st;
    waitpid(p, &st, 0);
    failed |= !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  if (failed || out.empty())
    Die("a node process of the " + std::to_string(count) + "-node group failed");
  return out;
}

void Usage() {
  std::printf(
      "usage: gos-prim-bench [--nodes 2,4,8,16,32] [--iterations N] [--provider P] "
      "[--fanout K]\n\n"
      "Measures XFER-AND-SIGNAL multicast latency and bandwidth and COMPARE-AND-WRITE latency\n"
      "over N local node processes, beside a raw libfabric point-to-point reference.\n"
      "  --nodes LIST      group sizes to measure (default 2,4,8,16,32)\n"
      "  --iterations N    latency samples per figure (default 1000)\n"
      "  --provider P      libfabric provider (default $GOS_FABRIC_PROVIDER or tcp;ofi_rxm)\n"
      "  --fanout K        fan-out of the multicast and query trees (default 4)\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      Usage();
      return 0;
    } else if (a == "--nodes") {
      o.nodes.clear();
      std::string list = val();
      for (size_t p = 0; p < list.size();) {
        size_t c = list.find(',', p);
        o.nodes.push_back(std::stoi(list.substr(p, c - p)));
        p = c == std::string::npos ? list.size() : c + 1;
      }
    } else if (a == "--iterations") {
      o.iterations = std::stoi(val());
    } else if (a == "--provider") {
      o.provider = val();
    } else if (a == "--fanout") {
      o.fanout = static_cast<uint32_t>(std::stoul(val()));
    } else if (a == "--node") {
      o.node_bootstrap = val();
    } else if (a == "--id") {
      o.node_id = std::stoi(val());
    } else if (a == "--raw") {
      o.raw = true;
    } else {
      Usage();
      return 2;
    }
  }
  if (!o.node_bootstrap.empty()) return o.raw ? RawNode(o) : GosNode(o);
  for (int n : o.nodes) {
    if (n < 2 || n > 256) Die("group sizes must be 2..256");
    if (kResults + static_cast<uint64_t>(n) * (o.iterations + 100) * sizeof(double) > kBulk) {
      Die("too many iterations for " + std::to_string(n) + " nodes");
    }
  }

  std::string provider = ResolveProvider(o.provider);
  std::printf("gos-prim-bench: provider %s, fan-out %u, %d iterations, %u cores\n",
              provider.c_str(), o.fanout, o.iterations, std::thread::hardware_concurrency());
  RawResult raw;
  std::string r = RunGroup(o, 2, true);
  if (std::sscanf(r.c_str(), "RAW %lf %lf %lf %lf", &raw.rtt_p50, &raw.rtt_p99, &raw.bw_1m,
                  &raw.bw_12m) != 4) {
    Die("bad raw output: " + r);
  }
  std::printf(
      "raw libfabric reference, 2 processes: 8 B send/recv round trip p50 %.1f us, "
      "p99 %.1f us; RMA write 1 MiB %.2f GB/s, 12 MiB %.2f GB/s\n\n",
      raw.rtt_p50, raw.rtt_p99, raw.bw_1m, raw.bw_12m);
  std::printf("%5s | %-26s | %-26s | %-24s | %-15s | %-22s | %-22s\n", "nodes",
              "8 B mcast, all acked (us)", "8 B mcast, delivered (us)", "CAW over all (us)",
              "CAW+write (us)", "1 MiB mcast aggregate", "12 MiB mcast aggregate");
  std::printf("%5s | %-26s | %-26s | %-24s | %-15s | %-22s | %-22s\n", "", "p50 / p99 (x RTT)",
              "p50 / p99 (x RTT)", "p50 / p99 (x RTT)", "p50 / p99", "GB/s (x raw write)",
              "GB/s (x raw write)");
  for (int n : o.nodes) {
    std::string out = RunGroup(o, n, false);
    unsigned size;
    double d50, d99, v50, v99, c50, c99, w50, w99, b1, b12;
    if (std::sscanf(out.c_str(), "GOS %u %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", &size, &d50,
                    &d99, &v50, &v99, &c50, &c99, &w50, &w99, &b1, &b12) != 11) {
      Die("bad node output: " + out);
    }
    char c1[64], c2[64], c3[64], c4[64], c5[64], c6[64];
    std::snprintf(c1, sizeof c1, "%.0f / %.0f (%.1fx)", d50, d99, d50 / raw.rtt_p50);
    std::snprintf(c2, sizeof c2, "%.0f / %.0f (%.1fx)", v50, v99, v50 / raw.rtt_p50);
    std::snprintf(c3, sizeof c3, "%.0f / %.0f (%.1fx)", c50, c99, c50 / raw.rtt_p50);
    std::snprintf(c4, sizeof c4, "%.0f / %.0f", w50, w99);
    std::snprintf(c5, sizeof c5, "%.2f (%.2fx)", b1, b1 / raw.bw_1m);
    std::snprintf(c6, sizeof c6, "%.2f (%.2fx)", b12, b12 / raw.bw_12m);
    std::printf("%5d | %-26s | %-26s | %-24s | %-15s | %-22s | %-22s\n", n, c1, c2, c3, c4, c5, c6);
    std::fflush(stdout);
  }
  return 0;
}
