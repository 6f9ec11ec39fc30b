#include "tools/follow.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
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

// Writes output, line-buffered per (rank, stream) when labelling.
class OutputWriter {
 public:
  explicit OutputWriter(bool label) : label_(label) {}
  void Write(const os::OutputChunk& c) {
    int fd = c.stream == 2 ? 2 : 1;
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
      if (!buf.empty())
        WriteAll(key.second == 2 ? 2 : 1, std::to_string(key.first) + ": " + buf + "\n");
    }
    partial_.clear();
  }

 private:
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

int FollowJob(os::Channel* ch, const FollowOptions& o) {
  const char* tool = o.tool.c_str();
  const bool label = o.label;
  OutputWriter out(label);
  uint64_t job = 0;
  bool stdin_open = true;
  SteadyClock::time_point last_int{};
  int exit_code = 1;
  bool done = false;
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
          if (auto id = os::DecodeU64(f.payload); id.ok()) job = *id;
          break;
        case os::Frame::kOutput:
          if (auto chunk = os::DecodeOutput(f.payload); chunk.ok()) out.Write(*chunk);
          break;
        case os::Frame::kOk:
          break;
        case os::Frame::kNotice:
        case os::Frame::kPhase: {
          auto text = os::DecodeText(f.payload);
          if (text.ok()) std::fprintf(stderr, "%s: %s\n", tool, text->c_str());
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
            std::fprintf(stderr, "%s: job %llu: %s (exit code %d)\n", tool,
                         (unsigned long long)e->job,
                         e->message.empty() ? "failed" : e->message.c_str(), exit_code);
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
      std::fprintf(stderr, "%s: lost the coordinator (%s); job %llu's state is unknown\n", tool,
                   rs.message().c_str(), (unsigned long long)job);
      exit_code = 255;
      break;
    }
  }
  return exit_code;
}

}  // namespace gos::tools
