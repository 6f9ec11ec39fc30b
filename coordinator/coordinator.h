// The gos coordinator (machine manager): node registry and allocator, FCFS job queue with
// backfill, the Ousterhout gang matrix, the strobe clock and failure detection, with its job
// and node tables in RocksDB (DESIGN.md; seed 000 §4; seed 001 §3).
//
// Node 0 of the primitives' group is the coordinator; nodeagents are 1..K. Every quantum the
// strobe thread multicasts strobe S (XFER-AND-SIGNAL) with the gang row to run and commands,
// then a COMPARE-AND-WRITE over the live agents confirms that every one applied it — that
// query is also the heartbeat. Clients (gos-run, gos-ps, gos-kill) talk to it over a unix
// socket and are identified by their peer credentials; nodeagents over TCP, every frame
// authenticated with the cluster key.
#ifndef GOS_COORDINATOR_COORDINATOR_H_
#define GOS_COORDINATOR_COORDINATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "gos/status.h"

namespace gos::coordinator {

struct CoordinatorOptions {
  // Data dir: RocksDB tables (db/), cluster key (cluster.key), client socket
  // (coordinator.sock), agent address (coordinator.addr). Required.
  std::string data_dir;
  // TCP address for nodeagents, "host:port". Default: 127.0.0.1:0 (any free port).
  std::string listen = "127.0.0.1:0";
  // Unix socket for local clients. Default: <data_dir>/coordinator.sock.
  std::string socket;
  // Nodeagents that form the cluster; strobes start once all have joined. Required.
  uint32_t nodes = 0;
  // Strobe quantum while jobs run. Default: 10 ms.
  std::chrono::microseconds timeslice{10000};
  // Strobe period with no job placed (heartbeat only). Default: 100 ms.
  std::chrono::milliseconds idle_strobe{100};
  // Multiprogramming level: rows of the gang matrix. Default: 2.
  uint32_t mpl = 2;
  // A node that does not confirm a strobe for this long is down. Default: 2 s.
  std::chrono::milliseconds failure_timeout{2000};
  // How long to wait for every nodeagent to join. Default: 60 s.
  std::chrono::milliseconds join_timeout{60000};
  // libfabric provider. Default: $GOS_FABRIC_PROVIDER, else "tcp;ofi_rxm".
  std::string provider;
  // Fan-out of the multicast/query trees. Default: 4.
  uint32_t fanout = 4;
  // Exit once a job has run and no job or client is left (the embedded cluster of gos-run).
  // Default: false.
  bool exit_when_idle = false;
  // Checkpoint epochs kept per job (older ones are deleted and their chunks collected).
  // Default: 2.
  uint32_t keep = 2;
  // zstd level the nodeagents compress chunks with (1..19). Default: 1.
  int32_t ckpt_level = 1;
  // Replay logs kept: when a recorded job ends, the logs of all but the keep_logs most
  // recent jobs go (never one still recording or being replayed). 0 = keep every log.
  // Default: 1000.
  uint32_t keep_logs = 1000;
};

class Coordinator {
 public:
  static StatusOr<std::unique_ptr<Coordinator>> Create(const CoordinatorOptions& options);
  virtual ~Coordinator() = default;
  // Serves until Stop() or a fatal error; returns why it stopped.
  virtual Status Run() = 0;
  // Thread- and async-signal-safe: asks Run() to return.
  virtual void Stop() = 0;
};

}  // namespace gos::coordinator

#endif  // GOS_COORDINATOR_COORDINATOR_H_
