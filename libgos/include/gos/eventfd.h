// Waking a thread that polls an eventfd (the daemons' and the primitives' IO loops).
#ifndef GOS_EVENTFD_H_
#define GOS_EVENTFD_H_

#include <unistd.h>

#include <cstdint>

namespace gos {

// Adds 1 to the eventfd. Async-signal-safe; a full counter (never in practice) is ignored.
inline void NotifyEventFd(int fd) {
  uint64_t one = 1;
  ssize_t rc = ::write(fd, &one, sizeof one);
  (void)rc;
}

}  // namespace gos

#endif  // GOS_EVENTFD_H_
