#include "gos/replay/trace.h"

#include <algorithm>
#include <string_view>

#include "gos/bcs/matcher.h"
#include "gos/replay/matcher_input.h"

namespace gos::replay {
namespace {

// Appends s as a JSON string literal. Bytes that are not valid UTF-8 become U+FFFD, so the
// output always parses, whatever a failure message holds.
void AppendJsonString(std::string& out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x20) {
      switch (c) {
        case '\n':
          out += "\\n";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\r':
          out += "\\r";
          break;
        default:
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xf]);
      }
      ++i;
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else {
      // A well-formed UTF-8 sequence (no overlongs, surrogates or code points > U+10FFFF)?
      size_t n = 0;
      uint32_t cp = 0;
      if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
      } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
      } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
      }
      bool ok = n > 0 && i + n <= s.size();
      for (size_t k = 1; ok && k < n; ++k) {
        const auto cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xc0) != 0x80) ok = false;
        cp = (cp << 6) | (cc & 0x3f);
      }
      if (ok) {
        ok = !(n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) &&
             !(n == 4 && (cp < 0x10000 || cp > 0x10ffff));
      }
      if (ok) {
        out.append(s.substr(i, n));
        i += n;
      } else {
        out += "\\ufffd";
        ++i;
      }
    }
  }
  out.push_back('"');
}

// Builds the traceEvents array, one event per line.
class Events {
 public:
  explicit Events(uint64_t pid) : pid_(std::to_string(pid)) {}

  // Opens an event: {"ph":ph,"pid":J,"tid":tid,"name":name ...; the caller adds fields with
  // Field/Raw and closes it with End.
  void Begin(const char* ph, uint32_t tid, std::string_view name) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    out_ += "{\"ph\":\"";
    out_ += ph;
    out_ += "\",\"pid\":" + pid_ + ",\"tid\":" + std::to_string(tid) + ",\"name\":";
    AppendJsonString(out_, name);
  }
  void Num(const char* key, int64_t v) { Raw(key, std::to_string(v)); }
  void Str(const char* key, std::string_view v) {
    out_ += ",\"";
    out_ += key;
    out_ += "\":";
    AppendJsonString(out_, v);
  }
  void Raw(const char* key, const std::string& json) {
    out_ += ",\"";
    out_ += key;
    out_ += "\":";
    out_ += json;
  }
  void End() { out_ += "}"; }

  std::string Finish() { return "{\"traceEvents\":[" + out_ + "\n],\"displayTimeUnit\":\"ms\"}\n"; }

 private:
  std::string pid_;
  std::string out_;
  bool first_ = true;
};

std::string Args(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  std::string s = "{";
  for (const auto& [k, v] : kv) {
    if (s.size() > 1) s += ",";
    s += "\"";
    s += k;
    s += "\":" + std::to_string(v);
  }
  return s + "}";
}

Status Validate(const TraceInput& in) {
  if (in.log == nullptr) return InvalidArgumentError("trace: no log");
  const JobLog& log = *in.log;
  for (size_t k = 0; k < log.steps.size(); ++k) {
    const Step& s = log.steps[k];
    uint64_t total = 0;
    for (uint32_t c : s.counts) total += c;
    if (s.counts.size() != log.world_size || total != s.descs.size()) {
      return InvalidArgumentError(
          "trace: step " + std::to_string(k) + " has " + std::to_string(s.counts.size()) +
          " counts (world size " + std::to_string(log.world_size) + ") summing to " +
          std::to_string(total) + " for " + std::to_string(s.descs.size()) + " descriptors");
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::string> ExportTrace(const TraceInput& in) {
  GOS_RETURN_IF_ERROR(Validate(in));
  const JobLog& log = *in.log;
  const std::vector<Step>& steps = log.steps;
  const uint32_t world = log.world_size;

  int64_t t0 = 0;
  if (!steps.empty()) {
    t0 = steps.front().time_us;
  } else if (!log.checkpoints.empty()) {
    t0 = log.checkpoints.front().time_us;
  } else if (log.end) {
    t0 = log.end->time_us;
  }
  auto ts = [t0](int64_t t) { return t - t0; };

  Events ev(in.job);
  ev.Begin("M", 0, "process_name");
  ev.Raw("args", "{\"name\":\"job " + std::to_string(in.job) + "\"}");
  ev.End();
  for (uint32_t r = 0; r < world; ++r) {
    std::string lane = "rank " + std::to_string(r);
    if (r < in.rank_node.size()) lane += " (node " + std::to_string(in.rank_node[r]) + ")";
    ev.Begin("M", r, "thread_name");
    std::string args = "{\"name\":";
    AppendJsonString(args, lane);
    ev.Raw("args", args + "}");
    ev.End();
    ev.Begin("M", r, "thread_sort_index");
    ev.Raw("args", Args({{"sort_index", r}}));
    ev.End();
  }

  auto slice = [&](uint32_t r, const char* name, int64_t start, int64_t dur, size_t k) {
    if (dur <= 0) return;
    ev.Begin("X", r, name);
    ev.Num("ts", start);
    ev.Num("dur", dur);
    ev.Raw("args", Args({{"step", static_cast<int64_t>(k)},
                         {"strobe", static_cast<int64_t>(steps[k].strobe)}}));
    ev.End();
  };

  // The interval after each step: [its time, the next step's). The job ran one slice in it and
  // was descheduled (another gang row, or held for a checkpoint) for the strobes it skipped:
  // of a gap of g strobes, (g-1)/g of the interval is "frozen", at its end. The rank's blocked
  // time reported at the next step is taken off the end of the part it ran.
  for (size_t k = 0; k + 1 < steps.size(); ++k) {
    const int64_t a = ts(steps[k].time_us);
    const int64_t dur = std::max<int64_t>(0, ts(steps[k + 1].time_us) - a);
    const uint64_t gap =
        steps[k + 1].strobe > steps[k].strobe ? steps[k + 1].strobe - steps[k].strobe : 1;
    const int64_t active = static_cast<int64_t>(static_cast<uint64_t>(dur) / gap);
    for (uint32_t r = 0; r < world; ++r) {
      int64_t blocked = 0;
      if (r < in.blocked_us.size() && k + 1 < in.blocked_us[r].size()) {
        blocked = std::min<int64_t>(in.blocked_us[r][k + 1], active);
      }
      slice(r, "compute", a, active - blocked, k);
      slice(r, "blocked", a + active - blocked, blocked, k);
      slice(r, "frozen", a + active, dur - active, k);
    }
  }
  // After the last step the ranks ran until the end, if the log has one.
  if (!steps.empty() && log.end && log.end->time_us > steps.back().time_us) {
    const int64_t a = ts(steps.back().time_us);
    for (uint32_t r = 0; r < world; ++r) {
      slice(r, "compute", a, ts(log.end->time_us) - a, steps.size() - 1);
    }
  }

  // Flows: the matches, recomputed from the log's input exactly as the nodeagents did.
  nodeagent::Matcher matcher(world);
  std::vector<std::vector<uint32_t>> step_of(world);  // [rank][seq] -> step it was taken at
  uint64_t last_strobe = 0;
  uint64_t flow = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& s = steps[k];
    size_t i = 0;  // s.descs holds rank 0's descriptors, then rank 1's, ...: the order taken
    nodeagent::StepResult res = MatchStep(
        matcher, s,
        [&](uint32_t r) {
          const DescKey& key = s.descs[i++];
          nodeagent::Posted p;
          p.rank = r;
          p.seq = step_of[r].size();
          p.d.req = p.seq + 1;
          p.d.context = key.context;
          p.d.len = key.len;
          p.d.op = key.op;
          p.d.peer = key.peer;
          p.d.tag = key.tag;
          p.d.flags = key.flags;
          p.d.group_size = key.group_size;
          step_of[r].push_back(static_cast<uint32_t>(k));
          return p;
        },
        &last_strobe);
    for (const nodeagent::MatchRecord& m : res.matches) {
      if (m.send_rank >= world || m.send_seq >= step_of[m.send_rank].size()) continue;
      const size_t from = step_of[m.send_rank][m.send_seq];
      ++flow;
      const std::string args = Args({{"send_rank", m.send_rank},
                                     {"send_seq", static_cast<int64_t>(m.send_seq)},
                                     {"recv_rank", m.recv_rank},
                                     {"recv_seq", static_cast<int64_t>(m.recv_seq)}});
      ev.Begin("s", m.send_rank, "message");
      ev.Str("cat", "bcs");
      ev.Num("id", static_cast<int64_t>(flow));
      ev.Num("ts", ts(steps[from].time_us));
      ev.Raw("args", args);
      ev.End();
      ev.Begin("f", m.recv_rank, "message");
      ev.Str("cat", "bcs");
      ev.Str("bp", "e");
      ev.Num("id", static_cast<int64_t>(flow));
      ev.Num("ts", ts(s.time_us));
      ev.Raw("args", args);
      ev.End();
    }
  }

  for (const CheckpointMark& c : log.checkpoints) {
    ev.Begin("i", 0, "checkpoint " + std::to_string(c.epoch));
    ev.Str("s", "g");
    ev.Num("ts", ts(c.time_us));
    ev.Raw("args", Args({{"epoch", static_cast<int64_t>(c.epoch)},
                         {"steps", static_cast<int64_t>(c.steps)},
                         {"strobe", static_cast<int64_t>(c.strobe)}}));
    ev.End();
  }
  for (const RestartMark& r : log.restarts) {
    // At the restored run's first step (its time is the cut's if it took none).
    const int64_t t = r.steps < steps.size() ? steps[r.steps].time_us : r.time_us;
    ev.Begin("i", 0, "restarted from checkpoint " + std::to_string(r.epoch));
    ev.Str("s", "g");
    ev.Num("ts", ts(t));
    ev.Raw("args", Args({{"epoch", static_cast<int64_t>(r.epoch)},
                         {"steps", static_cast<int64_t>(r.steps)},
                         {"strobe", static_cast<int64_t>(r.strobe)},
                         {"dropped_steps", static_cast<int64_t>(r.dropped_steps)}}));
    ev.End();
  }
  if (log.end) {
    const End& e = *log.end;
    const bool failed = e.kind == EndKind::kFailed;
    std::string name =
        failed ? "failure: " +
                     (e.message.empty() ? "exit code " + std::to_string(e.exit_code) : e.message)
               : std::string("completed");
    ev.Begin("i", e.rank >= 0 && static_cast<uint32_t>(e.rank) < world ? e.rank : 0, name);
    ev.Str("s", "g");
    ev.Num("ts", ts(e.time_us));
    ev.Raw("args", Args({{"exit_code", e.exit_code},
                         {"rank", e.rank},
                         {"steps", static_cast<int64_t>(e.steps)}}));
    ev.End();
  }
  if (in.divergence) {
    const TraceDivergence& d = *in.divergence;
    // At the first step at or after the divergence's strobe (the last one if none).
    int64_t t = 0;
    if (!steps.empty()) {
      auto it = std::find_if(steps.begin(), steps.end(),
                             [&](const Step& s) { return s.strobe >= d.strobe; });
      t = ts(it == steps.end() ? steps.back().time_us : it->time_us);
    }
    ev.Begin("i", d.rank, "divergence: " + d.what);
    ev.Str("s", "g");
    ev.Num("ts", t);
    ev.Raw("args", Args({{"strobe", static_cast<int64_t>(d.strobe)}, {"rank", d.rank}}));
    ev.End();
  }
  return ev.Finish();
}

}  // namespace gos::replay
