#include "follow.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace gos::tools {
namespace {

using SteadyClock = std::chrono::steady_clock;

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  char c = static_cast<char>(sig);
  ssize_t rc = ::write(g_signal_pipe[1], &c, 1);
  (void)rc;
}

// Writes output, line-buffered per (rank, stream) when labelling, to this process's stdout
// and stderr or to the files named by FollowOptions::output / error.
class OutputWriter {
 public:
  explicit OutputWriter(const FollowOptions& o) : label_(o.label), tool_(o.tool) {
    patterns_[0] = o.output;
    patterns_[1] = o.error.empty() ? o.output : o.error;
  }
  ~OutputWriter() {
    for (auto& [path, fd] : files_) {
      if (fd >= 0) ::close(fd);
    }
  }
  void Write(const os::OutputChunk& c) {
    const int fd = Destination(c);
    if (!label_) {
      WriteAll(fd, c.bytes);
      return;
    }
    std::string& buf = partial_[{c.rank, c.stream}];
    buf += c.bytes;
    size_t start = 0;
    std::string out;
    for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      out += std::to_string(c.rank) + ": " + buf.substr(start, nl - start + 1);
    }
    buf.erase(0, start);
    WriteAll(fd, out);
  }
  void Flush() {
    for (auto& [key, buf] : partial_) {
      if (!buf.empty()) {
        os::OutputChunk c{last_job_, key.first, key.second, ""};
        WriteAll(Destination(c), std::to_string(key.first) + ": " + buf + "\n");
      }
    }
    partial_.clear();
  }

 private:
  // The fd for a chunk: 1 or 2, or its pattern's file (opened, truncated, on first use; if it
  // cannot be opened, the output stays here, said once).
  int Destination(const os::OutputChunk& c) {
    last_job_ = c.job;
    const int terminal = c.stream == 2 ? 2 : 1;
    const std::string& pattern = patterns_[c.stream == 2 ? 1 : 0];
    if (pattern.empty()) return terminal;
    std::string path;
    for (size_t i = 0; i < pattern.size(); ++i) {
      if (pattern[i] != '%' || i + 1 == pattern.size()) {
        path += pattern[i];
        continue;
      }
      const char k = pattern[++i];
      path += k == 't'   ? std::to_string(c.rank)
              : k == 'j' ? std::to_string(c.job)
              : k == '%' ? std::string("%")
                         : std::string("%") + k;
    }
    auto [it, added] = files_.try_emplace(path, -1);
    if (added) {
      it->second = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
      if (it->second < 0) {
        std::fprintf(stderr, "%s: cannot write to %s (%s): that output comes here instead\n",
                     tool_.c_str(), path.c_str(), std::strerror(errno));
      }
    }
    return it->second >= 0 ? it->second : terminal;
  }
  static void WriteAll(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::write(fd, s.data() + off, s.size() - off);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        return;
      }
      off += static_cast<size_t>(n);
    }
  }
  bool label_;
  std::string tool_;
  std::string patterns_[2];  // stdout, stderr
  std::map<std::string, int> files_;
  uint64_t last_job_ = 0;
  std::map<std::pair<uint32_t, uint8_t>, std::string> partial_;
};

}  // namespace

bool InstallFollowSignals() {
  if (g_signal_pipe[0] >= 0) return true;
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return true;
}

void WaitForUser() {
  while (true) {
    pollfd p[2] = {{0, POLLIN, 0}, {g_signal_pipe[0], POLLIN, 0}};
    int n = ::poll(p, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (p[1].revents & POLLIN)) {
      char sig;
      while (g_signal_pipe[0] >= 0 && ::read(g_signal_pipe[0], &sig, 1) == 1) {
      }
      return;
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char c;
      ssize_t r = ::read(0, &c, 1);
      if (r <= 0 || c == '\n') return;
    }
  }
}

namespace {

// After the coordinator went away: waits (up to o.reattach_wait, Ctrl-C gives up) for a
// coordinator to answer o.reconnect and asks it to attach this client to `job`. Null when it
// gives up; `interrupted` is then set if the user did.
std::unique_ptr<os::Channel> Reattach(const FollowOptions& o, uint64_t job, bool* interrupted) {
  const char* tool = o.tool.c_str();
  const auto start = SteadyClock::now();
  const auto deadline = start + o.reattach_wait;
  auto next_note = start + std::chrono::seconds(30);
  std::fprintf(stderr,
               "%s: waiting up to %lld s for the coordinator to come back and restart job %llu "
               "from its newest checkpoint (Ctrl-C stops waiting)\n",
               tool,
               (long long)std::chrono::duration_cast<std::chrono::seconds>(o.reattach_wait).count(),
               (unsigned long long)job);
  std::string last_error;
  while (SteadyClock::now() < deadline) {
    auto ch = o.reconnect();
    if (ch.ok()) {
      if ((*ch)->Send(os::Frame::kAttach, os::EncodeU64(job)).ok()) {
        std::fprintf(
            stderr, "%s: the coordinator is back after %lld s; following job %llu again\n", tool,
            (long long)std::chrono::duration_cast<std::chrono::seconds>(SteadyClock::now() - start)
                .count(),
            (unsigned long long)job);
        return std::move(*ch);
      }
    } else {
      last_error = ch.status().message();
    }
    if (SteadyClock::now() >= next_note) {
      next_note += std::chrono::seconds(30);
      std::fprintf(stderr, "%s: still no coordinator (%s)\n", tool, last_error.c_str());
    }
    pollfd p = {g_signal_pipe[0], POLLIN, 0};
    if (::poll(&p, 1, 1000) > 0) {
      char sig;
      bool any = false;
      while (::read(g_signal_pipe[0], &sig, 1) == 1) any = true;
      if (any) {
        *interrupted = true;
        return nullptr;
      }
    }
  }
  return nullptr;
}

}  // namespace

int FollowJob(os::Channel* ch, const FollowOptions& o) {
  const char* tool = o.tool.c_str();
  std::unique_ptr<os::Channel> replacement;  // the connection to a coordinator started again
  OutputWriter out(o);
  uint64_t job = 0;
  bool stdin_open = true;
  SteadyClock::time_point last_int{};
  int exit_code = 1;
  bool done = false;
  uint64_t committed = 0;  // the job's newest epoch the coordinator reported committed
  while (!done) {
    pollfd p[3] = {{ch->fd(), POLLIN, 0},
                   {g_signal_pipe[0], POLLIN, 0},
                   // stdin is read once the job is accepted (poll ignores fd -1).
                   {stdin_open && job && o.forward_stdin ? 0 : -1, POLLIN, 0}};
    int n = ::poll(p, 3, -1);
    if (n < 0 && errno != EINTR) break;
    if (p[1].revents & POLLIN) {
      char sig;
      while (::read(g_signal_pipe[0], &sig, 1) == 1) {
        if (job == 0) {
          // Not accepted yet (the cluster may still be forming): just leave.
          std::fprintf(stderr, "%s: interrupted before the job was accepted\n", tool);
          return 128 + sig;
        }
        int forward = sig;
        auto now = SteadyClock::now();
        if (sig == SIGINT) {
          if (now - last_int < std::chrono::seconds(1)) {
            forward = SIGKILL;
            std::fprintf(stderr, "%s: killing job %llu\n", tool, (unsigned long long)job);
          } else {
            std::fprintf(stderr,
                         "%s: sending SIGINT to job %llu (Ctrl-C again within 1 s kills it)\n",
                         tool, (unsigned long long)job);
          }
          last_int = now;
        }
        ch->Send(os::Frame::kSignalJob, os::Encode(os::SignalRequest{job, forward})).IgnoreError();
      }
    }
    if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      ssize_t r = ::read(0, buf, sizeof buf);
      if (r <= 0) {
        stdin_open = false;
        ch->Send(os::Frame::kStdin, {}).IgnoreError();
      } else {
        ch->Send(os::Frame::kStdin,
                 std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buf), r))
            .IgnoreError();
      }
    }
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    std::vector<os::FrameIn> frames;
    Status rs = ch->ReadAvailable(&frames);
    for (auto& f : frames) {
      switch (f.type) {
        case os::Frame::kAccepted:
          if (auto id = os::DecodeU64(f.payload); id.ok() && job == 0) {
            job = *id;
            if (o.on_accepted) o.on_accepted(job);
          }
          break;
        case os::Frame::kOutput:
          if (auto chunk = os::DecodeOutput(f.payload); chunk.ok()) out.Write(*chunk);
          break;
        case os::Frame::kOk:
          break;
        case os::Frame::kNotice:
        case os::Frame::kPhase: {
          auto text = os::DecodeText(f.payload);
          if (!text.ok()) break;
          std::fprintf(stderr, "%s: %s\n", tool, text->c_str());
          unsigned long long of = 0, epoch = 0;
          if (std::sscanf(text->c_str(), "checkpoint: job %llu epoch %llu committed", &of,
                          &epoch) == 2 &&
              of == job) {
            committed = std::max<uint64_t>(committed, epoch);
          }
          break;
        }
        case os::Frame::kError: {
          auto text = os::DecodeText(f.payload);
          std::fprintf(stderr, "%s: %s\n", tool, text.ok() ? text->c_str() : "error");
          if (job == 0) {
            exit_code = 2;
            done = true;
          }
          break;
        }
        case os::Frame::kReplayStopped: {
          auto m = os::DecodeReplayStopped(f.payload);
          if (!m.ok() || !o.on_replay_stopped) break;
          out.Flush();
          o.on_replay_stopped(*m);
          ch->Send(os::Frame::kSignalJob, os::Encode(os::SignalRequest{job, SIGKILL}))
              .IgnoreError();
          break;
        }
        case os::Frame::kExit: {
          auto e = os::DecodeJobExit(f.payload);
          if (!e.ok()) break;
          out.Flush();
          exit_code = e->exit_code;
          if (exit_code != 0 || !e->message.empty()) {
            const std::string what = e->message.empty() ? "failed" : e->message;
            // "rank 2 on node 1 exited with code 3" says the exit code already.
            const std::string code = "code " + std::to_string(exit_code);
            const bool said = what.size() >= code.size() &&
                              what.compare(what.size() - code.size(), code.size(), code) == 0;
            std::fprintf(stderr, "%s: job %llu: %s%s\n", tool, (unsigned long long)e->job,
                         what.c_str(),
                         said ? "" : (" (exit code " + std::to_string(exit_code) + ")").c_str());
          }
          if (o.on_exit) o.on_exit(*e);
          done = true;
          break;
        }
        default:
          break;
      }
    }
    if (!rs.ok() && !done) {
      out.Flush();
      // Nodeagents stop their jobs' ranks when they lose the coordinator; a client that only
      // lost its own connection (TCP) cannot tell, so it says what is likely and what to do.
      std::fprintf(stderr,
                   "%s: lost the coordinator (%s); job %llu's ranks stop with it unless only "
                   "this connection broke (gos-ps tells, once a coordinator runs)\n",
                   tool, rs.message().c_str(), (unsigned long long)job);
      if ((committed != 0 || o.restored) && o.reconnect && o.reattach_wait.count() > 0) {
        bool interrupted = false;
        replacement = Reattach(o, job, &interrupted);
        if (replacement) {
          ch = replacement.get();
          continue;
        }
        if (interrupted) std::fprintf(stderr, "%s: stopped waiting\n", tool);
      }
      if (committed != 0) {
        std::fprintf(stderr,
                     "%s: job %llu's newest checkpoint is epoch %llu: `gos-restart %llu` brings "
                     "it back from there once a coordinator runs again, or `gos-attach %llu` "
                     "follows it if that coordinator restarts it by itself "
                     "(--restart-on-failure)\n",
                     tool, (unsigned long long)job, (unsigned long long)committed,
                     (unsigned long long)job, (unsigned long long)job);
      } else if (o.restored) {
        std::fprintf(stderr,
                     "%s: `gos-restart %llu` brings job %llu back from its newest checkpoint "
                     "once a coordinator runs again\n",
                     tool, (unsigned long long)job, (unsigned long long)job);
      }
      exit_code = 255;
      break;
    }
  }
  return exit_code;
}

}  // namespace gos::tools
