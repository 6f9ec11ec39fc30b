#include "freezer.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "gos/log.h"

namespace gos::nodeagent {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// From <linux/magic.h>; spelled out so the header is not needed.
constexpr long kCgroupSuperMagic = 0x27e0eb;
constexpr long kCgroup2SuperMagic = 0x63677270;

constexpr auto kStateDeadline = 2s;
constexpr auto kDestroyDeadline = 5s;

// Poll backoff: freezing usually completes in well under a millisecond, so start short.
class Backoff {
 public:
  void Wait() {
    std::this_thread::sleep_for(step_);
    step_ = std::min(step_ * 2, std::chrono::microseconds(10'000));
  }

 private:
  std::chrono::microseconds step_{50};
};

Status WriteFile(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open " + path);
  ssize_t n;
  do {
    n = ::write(fd, content.data(), content.size());
  } while (n < 0 && errno == EINTR);
  int err = errno;
  ::close(fd);
  if (n < 0) return ErrnoError(err, "write '" + content + "' to " + path);
  if (static_cast<size_t>(n) != content.size()) {
    return InternalError("short write of '" + content + "' to " + path);
  }
  return OkStatus();
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Splits "a/b//c" into {"a", "b", "c"}.
std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

}  // namespace

StatusOr<std::unique_ptr<FreezerCgroup>> FreezerCgroup::Create(const std::string& root,
                                                               const std::string& name) {
  if (root.empty() || root[0] != '/') {
    return InvalidArgumentError("freezer root '" + root + "' is not an absolute path");
  }
  std::vector<std::string> name_parts = SplitPath(name);
  if (name_parts.empty() || name[0] == '/') {
    return InvalidArgumentError("freezer cgroup name '" + name + "' must be a relative path");
  }
  for (const auto& p : name_parts) {
    if (p == "." || p == "..") {
      return InvalidArgumentError("freezer cgroup name '" + name + "' may not contain . or ..");
    }
  }
  std::vector<std::string> parts = SplitPath(root);
  parts.insert(parts.end(), name_parts.begin(), name_parts.end());

  // Find the deepest existing ancestor: it must already be on a cgroup v1 file system, or
  // mkdir would create plain directories (e.g. on the tmpfs at /sys/fs/cgroup).
  std::string existing = "/";
  size_t first_missing = 0;
  for (; first_missing < parts.size(); ++first_missing) {
    std::string next = (existing == "/" ? std::string() : existing) + "/" + parts[first_missing];
    if (!IsDirectory(next)) break;
    existing = next;
  }
  struct statfs fs;
  if (::statfs(existing.c_str(), &fs) != 0) return ErrnoError(errno, "statfs " + existing);
  if (fs.f_type != kCgroupSuperMagic) {
    return FailedPreconditionError(
        "no cgroup v1 freezer hierarchy at " + root + ": " + existing + " is " +
        (fs.f_type == kCgroup2SuperMagic ? "cgroup v2" : "not a cgroup file system") +
        " (expected the v1 freezer mounted at " + kFreezerMount + ")");
  }

  std::string path = existing;
  std::vector<std::string> created;
  for (size_t i = first_missing; i < parts.size(); ++i) {
    path = (path == "/" ? std::string() : path) + "/" + parts[i];
    if (::mkdir(path.c_str(), 0755) != 0) {
      if (errno == EEXIST && IsDirectory(path)) continue;  // Raced with another creator.
      Status s = ErrnoError(errno, "mkdir " + path);
      for (auto it = created.rbegin(); it != created.rend(); ++it) ::rmdir(it->c_str());
      return s;
    }
    created.push_back(path);
  }
  if (::access((path + "/freezer.state").c_str(), F_OK) != 0) {
    for (auto it = created.rbegin(); it != created.rend(); ++it) ::rmdir(it->c_str());
    return FailedPreconditionError("no cgroup v1 freezer hierarchy at " + root + ": " + path +
                                   " has no freezer.state (expected the freezer mounted at " +
                                   kFreezerMount + ")");
  }
  if (::access((path + "/freezer.state").c_str(), W_OK) != 0 ||
      ::access((path + "/cgroup.procs").c_str(), W_OK) != 0) {
    return PermissionDeniedError("freezer cgroup " + path + " is not writable by uid " +
                                 std::to_string(::geteuid()));
  }
  GOS_LOG(kDebug, "freezer") << "created " << path;
  return std::unique_ptr<FreezerCgroup>(new FreezerCgroup(std::move(path)));
}

FreezerCgroup::~FreezerCgroup() {
  Status s = Destroy();
  if (!s.ok()) GOS_LOG(kWarn, "freezer") << "destroying " << path_ << ": " << s.ToString();
}

Status FreezerCgroup::AddProcess(pid_t pid) {
  if (pid <= 0) return InvalidArgumentError("bad pid " + std::to_string(pid));
  return WriteFile(procs_file(), std::to_string(pid));
}

Status FreezerCgroup::Freeze(bool wait) { return SetState("FROZEN", wait); }

Status FreezerCgroup::Thaw() { return SetState("THAWED", true); }

Status FreezerCgroup::SetState(const char* state, bool wait) {
  const std::string file = path_ + "/freezer.state";
  GOS_RETURN_IF_ERROR(WriteFile(file, state));
  if (!wait) return OkStatus();
  // Reading freezer.state is what moves a v1 cgroup from FREEZING to FROZEN once every task
  // has stopped, so polling the file is the way to wait.
  const auto deadline = Clock::now() + kStateDeadline;
  Backoff backoff;
  while (true) {
    GOS_ASSIGN_OR_RETURN(std::string now, State());
    if (now == state) return OkStatus();
    if (Clock::now() >= deadline) {
      return DeadlineExceededError(std::string("freezer cgroup ") + path_ + " still " + now +
                                   " 2 s after writing " + state);
    }
    backoff.Wait();
  }
}

StatusOr<std::string> FreezerCgroup::State() const {
  GOS_ASSIGN_OR_RETURN(std::string s, ReadWholeFile(path_ + "/freezer.state"));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<pid_t> FreezerCgroup::Pids() const {
  std::vector<pid_t> pids;
  std::ifstream in(procs_file());
  long pid;
  while (in >> pid) pids.push_back(static_cast<pid_t>(pid));
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

Status FreezerCgroup::Destroy() {
  if (destroyed_) return OkStatus();
  const auto deadline = Clock::now() + kDestroyDeadline;
  Backoff backoff;
  while (true) {
    if (!IsDirectory(path_)) break;  // Already gone.
    // Frozen tasks do not act on SIGKILL until thawed.
    Status thawed = WriteFile(path_ + "/freezer.state", "THAWED");
    std::vector<pid_t> pids = Pids();
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    if (pids.empty()) {
      if (::rmdir(path_.c_str()) == 0 || errno == ENOENT) break;
      if (errno != EBUSY) return ErrnoError(errno, "rmdir " + path_);
      // EBUSY: a process joined between the read and the rmdir; go round again.
    }
    if (Clock::now() >= deadline) {
      std::string list;
      for (pid_t pid : pids) list += " " + std::to_string(pid);
      return DeadlineExceededError("freezer cgroup " + path_ + " not empty 5 s after SIGKILL:" +
                                   list + (thawed.ok() ? "" : " (" + thawed.ToString() + ")"));
    }
    backoff.Wait();
  }
  destroyed_ = true;
  GOS_LOG(kDebug, "freezer") << "destroyed " << path_;
  return OkStatus();
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open " + path);
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ErrnoError(err, "read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace gos::nodeagent
