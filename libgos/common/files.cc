#include "gos/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "gos/fd.h"

namespace gos {
namespace {

bool IsDir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

Status CreateDirs(const std::string& dir, mode_t mode) {
  if (dir.empty() || IsDir(dir)) return OkStatus();
  const std::string parent = std::filesystem::path(dir).parent_path().string();
  if (!parent.empty() && parent != dir) GOS_RETURN_IF_ERROR(CreateDirs(parent, mode));
  if (::mkdir(dir.c_str(), mode) != 0) {
    // Made meanwhile by someone else (another thread, another daemon): as good.
    if (errno == EEXIST && IsDir(dir)) return OkStatus();
    return ErrnoError(errno, "mkdir " + dir);
  }
  // mkdir's mode went through the umask, which may have taken bits `mode` needs.
  if (::chmod(dir.c_str(), mode) != 0) return ErrnoError(errno, "chmod " + dir);
  return OkStatus();
}

Status MakeDir(const std::string& dir, mode_t mode) {
  GOS_RETURN_IF_ERROR(CreateDirs(dir, mode));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return ErrnoError(errno, "stat " + dir);
  if (st.st_mode & S_ISVTX) {
    return FailedPreconditionError(dir +
                                   " is a shared directory (sticky bit, like /tmp): give gos a "
                                   "directory of its own in it");
  }
  if ((st.st_mode & 07777) != mode && ::chmod(dir.c_str(), mode) != 0) {
    return ErrnoError(errno, "chmod " + dir);
  }
  return OkStatus();
}

namespace {

Status WriteAll(int fd, const std::string& path, std::string_view bytes) {
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "write " + path);
    done += static_cast<size_t>(n);
  }
  return OkStatus();
}

}  // namespace

Status WriteFileWithMode(const std::string& path, std::string_view bytes, mode_t mode) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  if (fd.get() < 0) return ErrnoError(errno, "create " + path);
  // An existing file keeps its mode through O_CREAT, a new one lost the umask's bits.
  if (::fchmod(fd.get(), mode) != 0) return ErrnoError(errno, "chmod " + path);
  return WriteAll(fd.get(), path, bytes);
}

Status CreateNewFile(const std::string& path, std::string_view bytes, mode_t mode, uid_t uid,
                     gid_t gid) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) return ErrnoError(errno, "create " + path);
  if (::fchown(fd.get(), uid, gid) != 0) return ErrnoError(errno, "chown " + path);
  if (::fchmod(fd.get(), mode) != 0) return ErrnoError(errno, "chmod " + path);
  return WriteAll(fd.get(), path, bytes);
}

}  // namespace gos
