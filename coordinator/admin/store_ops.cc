#include "gos/coordinator/store_ops.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "gos/os/flags.h"

namespace gos::coordinator {

std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string DumpKind(const storage::EpochManifest& m) {
  const uint32_t n = storage::IncrementalRanks(m);
  return n == 0 ? "full" : "incremental " + std::to_string(n) + "/" + std::to_string(m.ntasks);
}

std::string EncodeStoreRequest(const StoreRequest& r) {
  return r.op == "gc" && r.keep_logs > 0 ? "gc keep-logs=" + std::to_string(r.keep_logs) : r.op;
}

bool ParseStoreRequest(const std::string& text, StoreRequest* r) {
  *r = StoreRequest{};
  if (text == "stats" || text == "verify" || text == "gc") {
    r->op = text;
    return true;
  }
  const std::string prefix = "gc keep-logs=";
  if (text.rfind(prefix, 0) != 0 || text.size() == prefix.size() || text.size() > prefix.size() + 9)
    return false;
  for (size_t i = prefix.size(); i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  r->op = "gc";
  r->keep_logs = std::stoull(text.substr(prefix.size()));
  return r->keep_logs > 0;
}

std::string RunStoreOp(storage::CheckpointStore* store, const StoreRequest& request,
                       const std::function<void(const std::string&)>& progress,
                       storage::ReplayStore* replay, const std::set<uint64_t>& logs_in_use) {
  const std::string& op = request.op;
  if (op == "stats") {
    auto st = store->Stats();
    if (!st.ok()) return "error: " + st.status().ToString();
    char ratio[32] = "-";
    if (st->stored_bytes > 0) {
      std::snprintf(ratio, sizeof ratio, "%.2fx",
                    static_cast<double>(st->raw_bytes) / static_cast<double>(st->stored_bytes));
    }
    char dedup[32] = "-";
    if (st->raw_bytes > 0) {
      std::snprintf(dedup, sizeof dedup, "%.2fx",
                    static_cast<double>(st->logical_bytes) / static_cast<double>(st->raw_bytes));
    }
    std::string logs;
    if (replay != nullptr) {
      auto jobs = replay->Jobs();
      if (!jobs.ok()) return "error: " + jobs.status().ToString();
      uint64_t bytes = 0;
      for (const auto& [job, b] : *jobs) bytes += b;
      logs = "replay logs            " + std::to_string(jobs->size()) +
             (jobs->size() == 1 ? " job, " : " jobs, ") + std::to_string(bytes) +
             " bytes stored (" + Mib(bytes) + ")\n";
    }
    return "jobs with checkpoints  " + std::to_string(st->jobs) + "\n" + "epochs                 " +
           std::to_string(st->epochs) + "\n" + "logical bytes          " + Mib(st->logical_bytes) +
           "\n" + "chunks                 " + std::to_string(st->chunks) + " (" +
           std::to_string(st->unreferenced) + " unreferenced)\n" + "chunk bytes, raw       " +
           Mib(st->raw_bytes) + "  (deduplication " + dedup + ")\n" + "chunk bytes, stored    " +
           Mib(st->stored_bytes) + "  (compression " + ratio + ")\n" + logs;
  }
  if (op == "gc") {
    auto gc = store->Gc();
    if (!gc.ok()) return "error: " + gc.status().ToString();
    std::string out = "removed " + std::to_string(gc->chunks_removed) + " unreferenced chunks (" +
                      Mib(gc->bytes_removed) + ")\n";
    if (request.keep_logs > 0 && replay != nullptr) {
      auto pruned = storage::PruneLogs(replay, request.keep_logs, logs_in_use);
      if (!pruned.ok()) return "error: " + out + pruned.status().ToString();
      out += "removed the replay logs of " + std::to_string(pruned->jobs.size()) +
             (pruned->jobs.size() == 1 ? " job (" : " jobs (") + Mib(pruned->bytes) +
             "), keeping the " + std::to_string(request.keep_logs) + " most recent\n";
    }
    return out;
  }
  if (op == "verify") {
    auto last = std::chrono::steady_clock::now();
    auto v = store->Verify([&](uint64_t done, uint64_t total) {
      auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::seconds(1)) return;
      last = now;
      progress("verified " + std::to_string(done) + " of " + std::to_string(total) +
               " chunk references");
    });
    if (!v.ok()) return "error: " + v.status().ToString();
    std::string out = "checked " + std::to_string(v->chunks_checked) + " chunks (" +
                      Mib(v->bytes_checked) + "): " + std::to_string(v->problems.size()) +
                      " problem" + (v->problems.size() == 1 ? "" : "s") + "\n";
    for (const auto& p : v->problems) {
      out += "  job " + std::to_string(p.job) + " epoch " + std::to_string(p.epoch) + " rank " +
             std::to_string(p.rank) + " file " + p.file + " chunk " + p.chunk + ": " + p.problem +
             "\n";
    }
    return v->problems.empty() ? out : "error: " + out;
  }
  return "error: unknown operation " + op + " (stats, verify or gc)\n";
}

std::string RenderEpochList(uint64_t job, const std::vector<storage::EpochManifest>& epochs) {
  if (epochs.empty()) return "job " + std::to_string(job) + " has no checkpoint\n";
  char line[256];
  std::snprintf(line, sizeof line, "%6s  %-19s  %5s  %12s  %12s  %12s  %8s  %8s  %s\n", "EPOCH",
                "TAKEN", "RANKS", "LOGICAL", "NEW", "COMPRESSED", "PAUSE", "TOTAL", "DUMP");
  std::string out = line;
  for (const auto& m : epochs) {
    time_t t = static_cast<time_t>(m.taken_ms / 1000);
    char when[32];
    struct tm tmv;
    localtime_r(&t, &tmv);
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tmv);
    std::snprintf(line, sizeof line, "%6llu  %-19s  %5u  %12s  %12s  %12s  %6lldms  %6lldms  %s\n",
                  static_cast<unsigned long long>(m.epoch), when, m.ntasks,
                  Mib(m.logical_bytes).c_str(), Mib(m.new_bytes).c_str(),
                  Mib(m.new_compressed).c_str(), static_cast<long long>(m.pause_ms),
                  static_cast<long long>(m.total_ms), DumpKind(m).c_str());
    out += line;
  }
  return out;
}

uint32_t RestartsLeft(const storage::JobRecord& rec) {
  return rec.restarts_used < rec.restart_on_failure ? rec.restart_on_failure - rec.restarts_used
                                                    : 0;
}

std::string RenderCheckpointSettings(const storage::JobRecord& rec, uint32_t default_keep) {
  std::string out = rec.checkpoint_ms > 0
                        ? "checkpoints every " + os::FormatDurationMs(rec.checkpoint_ms)
                        : std::string("no periodic checkpoints");
  if (rec.keep != 0) {
    out += ", keeps " + std::to_string(rec.keep) + " epoch" + (rec.keep == 1 ? "" : "s");
  } else if (default_keep != 0) {
    out += ", keeps " + std::to_string(default_keep) + " epoch" + (default_keep == 1 ? "" : "s") +
           " (the coordinator's --keep)";
  } else {
    out += ", keeps as many epochs as the coordinator's --keep says";
  }
  if (rec.restart_on_failure != 0) {
    out += ", " + std::to_string(RestartsLeft(rec)) + " of " +
           std::to_string(rec.restart_on_failure) + " automatic restart" +
           (rec.restart_on_failure == 1 ? "" : "s") + " left";
  }
  return out;
}

}  // namespace gos::coordinator
