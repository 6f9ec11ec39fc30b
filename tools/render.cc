#include "render.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "gos/os/flags.h"

namespace gos::tools {
namespace {

// Letters for the first 61 jobs on the mesh; every further job shares kMoreJobs. No 'X': it
// marks a down node, and a job letter must never be mistaken for one.
constexpr std::string_view kLetters =
    "ABCDEFGHIJKLMNOPQRSTUVWYZabcdefghijklmnopqrstuvwxyz0123456789";
constexpr char kMoreJobs = '#';
constexpr char kIdle = '.';
constexpr char kDown = 'X';
constexpr char kNoNode = '?';
constexpr int kMinWidth = 20;
constexpr uint32_t kGroup = 10;
constexpr uint32_t kMaxGroupsPerRow = 10;
// A grid this wide is certainly bad data (prim groups are < 4096 nodes); refuse to draw it
// rather than build a string of billions of characters.
constexpr uint64_t kMaxGridSpan = uint64_t{1} << 20;
constexpr size_t kMeshUserWidth = 8;
// Up to this many jobs the legend is one column; beyond, as many columns as fit.
constexpr size_t kOneColumnLegend = 10;

// Control characters would break the table layout (a newline in argv, an ANSI escape).
std::string Clean(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

void TrimRight(std::string& line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
}

void Pad(std::string& out, const std::string& cell, size_t width, bool right) {
  if (right && cell.size() < width) out.append(width - cell.size(), ' ');
  out += cell;
  if (!right && cell.size() < width) out.append(width - cell.size(), ' ');
}

// Cuts `s` to `width` characters, ending with "..." when something was cut.
std::string Fit(std::string s, size_t width) {
  if (s.size() <= width) return s;
  if (width <= 3) return s.substr(0, width);
  return s.substr(0, width - 3) + "...";
}

struct Column {
  std::string header;
  bool right;  // Right-aligned (numbers).
};

// A table sized to its widest cells, columns separated by two spaces.
std::string Table(const std::vector<Column>& cols,
                  const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(cols.size());
  for (size_t c = 0; c < cols.size(); ++c) widths[c] = cols[c].header.size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < cols.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  auto emit = [&](auto cell_of) {
    std::string line;
    for (size_t c = 0; c < cols.size(); ++c) {
      if (c > 0) line += "  ";
      Pad(line, cell_of(c), widths[c], cols[c].right);
    }
    TrimRight(line);
    out += line;
    out += '\n';
  };
  emit([&](size_t c) -> const std::string& { return cols[c].header; });
  for (const auto& row : rows) emit([&](size_t c) -> const std::string& { return row[c]; });
  return out;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 0 ? "" : "B");
  static constexpr char kUnits[] = "KMGTPE";
  double v = static_cast<double>(bytes) / 1024;
  size_t u = 0;
  while (v >= 1024 && u + 1 < sizeof(kUnits) - 1) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), v < 9.95 ? "%.1f%c" : "%.0f%c", v, kUnits[u]);
  return buf;
}

size_t Digits(uint64_t v) {
  size_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

char LetterFor(size_t index) { return index < kLetters.size() ? kLetters[index] : kMoreJobs; }

// Joins `items` with `sep`, starting a new line whenever the next item would pass `width`.
void Wrap(std::string& out, const std::vector<std::string>& items, std::string_view sep,
          size_t width) {
  std::string line;
  for (const auto& item : items) {
    if (!line.empty() && line.size() + sep.size() + item.size() > width) {
      out += line + '\n';
      line.clear();
    }
    if (!line.empty()) line += sep;
    line += item;
  }
  if (!line.empty()) out += line + '\n';
}

}  // namespace

std::string FormatElapsed(int64_t ms) {
  int64_t s = ms > 0 ? ms / 1000 : 0;
  int64_t days = s / 86400;
  int64_t hours = s / 3600 % 24;
  int64_t minutes = s / 60 % 60;
  int64_t seconds = s % 60;
  char buf[64];
  if (days > 0) {
    std::snprintf(buf, sizeof(buf), "%" PRId64 "-%02" PRId64 ":%02" PRId64 ":%02" PRId64, days,
                  hours, minutes, seconds);
  } else if (hours > 0) {
    std::snprintf(buf, sizeof(buf), "%" PRId64 ":%02" PRId64 ":%02" PRId64, hours, minutes,
                  seconds);
  } else {
    std::snprintf(buf, sizeof(buf), "%" PRId64 ":%02" PRId64, minutes, seconds);
  }
  return buf;
}

std::string FormatJobs(const std::vector<PsJob>& jobs) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(jobs.size());
  for (const PsJob& j : jobs) {
    std::string nodes = CompressIds(j.nodes);
    std::string every = j.checkpoint_ms > 0 ? os::FormatDurationMs(j.checkpoint_ms) : "-";
    std::string epoch = j.last_epoch == 0 ? "-"
                                          : std::to_string(j.last_epoch) + " (" +
                                                FormatElapsed(j.last_epoch_age_ms) + " ago)";
    rows.push_back({std::to_string(j.id), Clean(j.user), Clean(j.state), std::to_string(j.ntasks),
                    nodes.empty() ? "-" : nodes, FormatElapsed(j.elapsed_ms), every, epoch,
                    Clean(j.command)});
  }
  return Table({{"JOBID", true},
                {"USER", false},
                {"STATE", false},
                {"RANKS", true},
                {"NODES", false},
                {"ELAPSED", true},
                {"CKPT", true},
                {"EPOCH", false},
                {"COMMAND", false}},
               rows);
}

std::string FormatNodes(const std::vector<PsNode>& nodes) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(nodes.size());
  for (const PsNode& n : nodes) {
    std::string state = "up";
    std::string load = "-";
    if (n.up) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.2f", n.cores ? double(n.ranks) / n.cores : 0.0);
      load = buf;
    } else {
      state = n.down_reason.empty() ? "down" : "down (" + Clean(n.down_reason) + ")";
    }
    std::string job_list;
    for (uint64_t id : n.jobs) {
      if (!job_list.empty()) job_list += ',';
      job_list += std::to_string(id);
    }
    rows.push_back({std::to_string(n.id), Clean(n.host), state, std::to_string(n.cores),
                    FormatBytes(n.mem_bytes), load, job_list.empty() ? "-" : job_list});
  }
  return Table({{"NODE", true},
                {"HOST", false},
                {"STATE", false},
                {"CORES", true},
                {"MEM", true},
                {"LOAD", true},
                {"JOBS", false}},
               rows);
}

std::string RenderMesh(const std::vector<PsNode>& nodes, const std::vector<PsJob>& jobs,
                       int32_t running_row, int width) {
  const size_t w = static_cast<size_t>(std::max(width, kMinWidth));

  // Which jobs sit on which node: PsNode::jobs, plus the nodes of jobs still running, so a
  // snapshot where one side lags the other still shows every placement.
  std::map<uint32_t, const PsNode*> by_id;
  for (const PsNode& n : nodes) by_id.emplace(n.id, &n);
  std::unordered_map<uint64_t, const PsJob*> job_by_id;
  for (const PsJob& j : jobs) job_by_id.emplace(j.id, &j);
  std::map<uint32_t, std::set<uint64_t>> on_node;
  for (const PsNode& n : nodes) on_node[n.id].insert(n.jobs.begin(), n.jobs.end());
  for (const PsJob& j : jobs) {
    if (j.exit_code != -1) continue;
    for (uint32_t id : j.nodes) {
      if (by_id.count(id) != 0) on_node[id].insert(j.id);
    }
  }

  // Jobs on the mesh and their letters: the running row first, then by id. A node may name a
  // job the job list lacks (snapshots taken at different times); it still gets a letter.
  std::map<uint64_t, uint32_t> node_count;
  for (const auto& [id, set] : on_node) {
    for (uint64_t job : set) ++node_count[job];
  }
  std::vector<uint64_t> mesh_jobs;
  for (const auto& [job, count] : node_count) mesh_jobs.push_back(job);
  auto in_running_row = [&](uint64_t job) {
    auto it = job_by_id.find(job);
    return running_row >= 0 && it != job_by_id.end() && it->second->row == running_row;
  };
  std::stable_sort(mesh_jobs.begin(), mesh_jobs.end(),
                   [&](uint64_t a, uint64_t b) { return in_running_row(a) && !in_running_row(b); });
  std::unordered_map<uint64_t, size_t> letter_index;
  for (size_t i = 0; i < mesh_jobs.size(); ++i) letter_index[mesh_jobs[i]] = i;

  // Node counts for the summary line.
  size_t up = 0, idle = 0, down = 0, shared = 0;
  for (const PsNode& n : nodes) {
    if (!n.up) {
      ++down;
      continue;
    }
    ++up;
    size_t held = on_node[n.id].size();
    if (held == 0) ++idle;
    if (held > 1) ++shared;
  }
  auto cell = [&](uint32_t id) -> char {
    auto it = by_id.find(id);
    if (it == by_id.end()) return kNoNode;
    if (!it->second->up) return kDown;
    const std::set<uint64_t>& held = on_node[id];
    if (held.empty()) return kIdle;
    // The earliest letter is the running row's job when the node holds one.
    size_t best = mesh_jobs.size();
    for (uint64_t job : held) best = std::min(best, letter_index[job]);
    return LetterFor(best);
  };

  std::string out;
  bool gaps = false;
  if (!by_id.empty()) {
    const uint32_t min_id = by_id.begin()->first;
    const uint32_t max_id = by_id.rbegin()->first;
    const size_t label_w = Digits(max_id);
    const size_t avail = w - label_w - 1;
    // A row is as many groups of 10 as fit (groups joined by one space); a terminal too narrow
    // for one group gets ungrouped rows.
    size_t groups = std::min<size_t>((avail + 1) / (kGroup + 1), kMaxGroupsPerRow);
    const uint32_t per_row =
        groups > 0 ? static_cast<uint32_t>(groups * kGroup) : static_cast<uint32_t>(avail);
    const uint32_t group = groups > 0 ? kGroup : per_row;
    const uint32_t base = min_id / per_row * per_row;
    const uint64_t span = uint64_t{max_id} - base + 1;
    if (span > kMaxGridSpan) {
      out += Fit("(grid omitted: node ids " + std::to_string(min_id) + "-" +
                     std::to_string(max_id) + " span too many ids)",
                 w) +
             '\n';
    } else {
      // Ruler: each group's offset within the row, over the group's first column.
      const uint64_t first_len = std::min<uint64_t>(per_row, span);
      std::string ruler(label_w + 1, ' ');
      for (uint64_t g = 0; g * group < first_len; ++g) {
        std::string mark = std::to_string(g * group);
        size_t col = label_w + 1 + g * (group + 1);
        if (ruler.size() < col) ruler.append(col - ruler.size(), ' ');
        ruler += mark;
      }
      out += ruler + '\n';
      for (uint64_t start = base; start <= max_id; start += per_row) {
        std::string line;
        Pad(line, std::to_string(start), label_w, true);
        line += ' ';
        for (uint64_t id = start; id < start + per_row && id <= max_id; ++id) {
          if (id > start && (id - start) % group == 0) line += ' ';
          char c = cell(static_cast<uint32_t>(id));
          gaps |= c == kNoNode;
          line += c;
        }
        out += line + '\n';
      }
    }
    out += '\n';
  }

  // Summary, down nodes, key.
  std::vector<std::string> summary = {
      std::to_string(nodes.size()) + " nodes: " + std::to_string(up) + " up (" +
      std::to_string(idle) + " idle), " + std::to_string(down) + " down"};
  if (shared > 0) summary.push_back(std::to_string(shared) + " time-shared");
  Wrap(out, summary, ", ", w);
  if (down > 0) {
    std::vector<std::pair<std::string, std::vector<uint32_t>>> by_reason;  // First-seen order.
    for (const auto& [id, n] : by_id) {
      if (n->up) continue;
      std::string reason = n->down_reason.empty() ? "no reason" : Clean(n->down_reason);
      auto it = std::find_if(by_reason.begin(), by_reason.end(),
                             [&](const auto& r) { return r.first == reason; });
      if (it == by_reason.end())
        it = by_reason.emplace(by_reason.end(), reason, std::vector<uint32_t>{});
      it->second.push_back(id);
    }
    std::string line = "down:";
    for (size_t i = 0; i < by_reason.size(); ++i) {
      line += (i == 0 ? " " : "; ") + CompressIds(by_reason[i].second) + " (" + by_reason[i].first +
              ")";
    }
    out += Fit(line, w) + '\n';
  }
  std::vector<std::string> key = {". idle", "X down"};
  if (gaps) key.push_back("? not a node");
  if (mesh_jobs.size() > kLetters.size()) {
    key.push_back("# more jobs than letters (" +
                  std::to_string(mesh_jobs.size() - kLetters.size()) + ")");
  }
  size_t running = 0;
  while (running < mesh_jobs.size() && in_running_row(mesh_jobs[running])) ++running;
  if (running > 0) {
    std::string letters(1, LetterFor(0));
    if (running > 1) letters += std::string("-") + LetterFor(running - 1);
    key.push_back("row " + std::to_string(running_row) + " running: " + letters);
  }
  Wrap(out, key, "  ", w);

  // The job legend, in as many columns as fit, filled downwards.
  if (!mesh_jobs.empty()) {
    struct Entry {
      std::string letter, id, user, ranks, nodes, elapsed;
    };
    std::vector<Entry> entries;
    for (size_t i = 0; i < mesh_jobs.size(); ++i) {
      uint64_t job = mesh_jobs[i];
      auto it = job_by_id.find(job);
      const PsJob* j = it == job_by_id.end() ? nullptr : it->second;
      std::string user = j != nullptr ? Clean(j->user) : "?";
      if (user.size() > kMeshUserWidth) user.resize(kMeshUserWidth);
      entries.push_back({std::string(1, LetterFor(i)), std::to_string(job), user,
                         j != nullptr ? std::to_string(j->ntasks) : "?",
                         std::to_string(node_count[job]),
                         j != nullptr ? FormatElapsed(j->elapsed_ms) : "?"});
    }
    Entry head{" ", "JOBID", "USER", "RANKS", "NODES", "ELAPSED"};
    size_t wid = head.id.size(), wuser = head.user.size(), wranks = head.ranks.size(),
           wnodes = head.nodes.size(), welapsed = head.elapsed.size();
    for (const Entry& e : entries) {
      wid = std::max(wid, e.id.size());
      wuser = std::max(wuser, e.user.size());
      wranks = std::max(wranks, e.ranks.size());
      wnodes = std::max(wnodes, e.nodes.size());
      welapsed = std::max(welapsed, e.elapsed.size());
    }
    auto render = [&](const Entry& e) {
      std::string s = e.letter + ' ';
      Pad(s, e.id, wid, true);
      s += ' ';
      Pad(s, e.user, wuser, false);
      s += ' ';
      Pad(s, e.ranks, wranks, true);
      s += ' ';
      Pad(s, e.nodes, wnodes, true);
      s += ' ';
      Pad(s, e.elapsed, welapsed, true);
      return s;
    };
    const size_t entry_w = render(head).size();
    constexpr size_t kGap = 2;
    const size_t cols =
        entries.size() <= kOneColumnLegend ? 1 : std::max<size_t>(1, (w + kGap) / (entry_w + kGap));
    const size_t rows = (entries.size() + cols - 1) / cols;
    const size_t used_cols = (entries.size() + rows - 1) / rows;
    auto emit_row = [&](auto entry_at) {
      std::string line;
      for (size_t c = 0; c < used_cols; ++c) {
        const Entry* e = entry_at(c);
        if (e == nullptr) break;
        if (c > 0) line.append(kGap, ' ');
        line += render(*e);
      }
      TrimRight(line);
      out += line + '\n';
    };
    emit_row([&](size_t) { return &head; });
    for (size_t r = 0; r < rows; ++r) {
      emit_row([&](size_t c) -> const Entry* {
        size_t i = c * rows + r;
        return i < entries.size() ? &entries[i] : nullptr;
      });
    }
  }

  // Jobs waiting for nodes.
  std::vector<uint64_t> queued;
  for (const PsJob& j : jobs) {
    if (j.exit_code == -1 && node_count.count(j.id) == 0) queued.push_back(j.id);
  }
  if (!queued.empty()) {
    std::string line = "queued (" + std::to_string(queued.size()) + "):";
    for (uint64_t id : queued) line += ' ' + std::to_string(id);
    out += Fit(line, w) + '\n';
  }
  return out;
}

}  // namespace gos::tools
