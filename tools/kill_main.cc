// gos-kill: kill a job, or send it a signal (scancel / flux cancel).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "client.h"
#include "gos/os/flags.h"
#include "gos/os/messages.h"

namespace gos::tools {
namespace {

constexpr const char* kUsage = R"(usage: gos-kill [-s SIGNAL] JOB...

Kills the jobs (SIGKILL to every rank on every node), or sends them SIGNAL. Only a job's owner
or root may do so.

options:
  -s, --signal SIG   signal name or number, e.g. INT, TERM, 15          (default KILL)
  -h, --help         this text
Exit code: 0 if every job was signalled, 1 otherwise.
)";

int SignalNumber(const std::string& s) {
  static const std::pair<const char*, int> kNames[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
      {"STOP", SIGSTOP}, {"ALRM", SIGALRM}};
  std::string n = s.rfind("SIG", 0) == 0 ? s.substr(3) : s;
  for (auto& [name, num] : kNames) {
    if (n == name) return num;
  }
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  return *end == '\0' && v > 0 && v < 65 ? static_cast<int>(v) : -1;
}

int Main(int argc, char** argv) {
  if (int rc = LoadToolConfig("gos-kill"); rc >= 0) return rc;
  std::string sig_name = "KILL";
  os::Flags flags(argc, argv, kUsage);
  flags.String("-s|--signal", &sig_name);
  if (int rc = flags.Parse(); rc >= 0) return rc;
  int sig = SignalNumber(sig_name);
  if (sig < 0) {
    std::fprintf(stderr, "gos-kill: unknown signal %s\n", sig_name.c_str());
    return 2;
  }
  if (flags.positional().empty()) {
    std::fprintf(stderr, "gos-kill: no job given (see --help)\n");
    return 2;
  }
  std::string address = FindCoordinator();
  if (address.empty()) {
    std::fprintf(stderr,
                 "gos-kill: no coordinator is running (set GOS_COORDINATOR or start "
                 "one with gos-cluster up)\n");
    return 1;
  }
  auto ch = ConnectCoordinator(address);
  if (!ch.ok()) {
    std::fprintf(stderr, "gos-kill: %s\n", ch.status().message().c_str());
    return 1;
  }
  int rc = 0;
  for (const auto& arg : flags.positional()) {
    char* end = nullptr;
    unsigned long long job = std::strtoull(arg.c_str(), &end, 10);
    if (arg.empty() || *end != '\0' || job == 0) {
      std::fprintf(stderr, "gos-kill: %s is not a job id\n", arg.c_str());
      rc = 1;
      continue;
    }
    Status s = (*ch)->Send(os::Frame::kSignalJob, os::Encode(os::SignalRequest{job, sig}));
    auto f = s.ok() ? (*ch)->Receive(std::chrono::steady_clock::now() + std::chrono::seconds(10))
                    : StatusOr<os::FrameIn>(s);
    if (!f.ok()) {
      std::fprintf(stderr, "gos-kill: job %llu: %s\n", job, f.status().message().c_str());
      rc = 1;
      continue;
    }
    auto text = os::DecodeText(f->payload);
    if (f->type != os::Frame::kOk) {
      std::fprintf(stderr, "gos-kill: %s\n", text.ok() ? text->c_str() : "refused");
      rc = 1;
    }
  }
  return rc;
}

}  // namespace
}  // namespace gos::tools

int main(int argc, char** argv) { return gos::tools::Main(argc, argv); }
