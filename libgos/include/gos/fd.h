// An owned file descriptor, closed when it goes out of scope.
#ifndef GOS_FD_H_
#define GOS_FD_H_

#include <unistd.h>

namespace gos {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(other.Release()) {}
  Fd& operator=(Fd&& other) noexcept {
    Reset(other.Release());
    return *this;
  }
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  // Gives up ownership: the caller closes the result.
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes what it holds (if anything) and takes fd.
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace gos

#endif  // GOS_FD_H_
