#include "gos/status.h"

#include <cerrno>
#include <cstring>

namespace gos {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCancelled:
      return "CANCELLED";
    case StatusCode::kUnknown:
      return "UNKNOWN";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kAborted:
      return "ABORTED";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

#define GOS_DEFINE_ERROR_(Name, Code) \
  Status Name(std::string message) { return Status(StatusCode::Code, std::move(message)); }
GOS_DEFINE_ERROR_(InvalidArgumentError, kInvalidArgument)
GOS_DEFINE_ERROR_(DeadlineExceededError, kDeadlineExceeded)
GOS_DEFINE_ERROR_(NotFoundError, kNotFound)
GOS_DEFINE_ERROR_(AlreadyExistsError, kAlreadyExists)
GOS_DEFINE_ERROR_(PermissionDeniedError, kPermissionDenied)
GOS_DEFINE_ERROR_(ResourceExhaustedError, kResourceExhausted)
GOS_DEFINE_ERROR_(FailedPreconditionError, kFailedPrecondition)
GOS_DEFINE_ERROR_(AbortedError, kAborted)
GOS_DEFINE_ERROR_(OutOfRangeError, kOutOfRange)
GOS_DEFINE_ERROR_(UnimplementedError, kUnimplemented)
GOS_DEFINE_ERROR_(InternalError, kInternal)
GOS_DEFINE_ERROR_(UnavailableError, kUnavailable)
GOS_DEFINE_ERROR_(DataLossError, kDataLoss)
GOS_DEFINE_ERROR_(CancelledError, kCancelled)
#undef GOS_DEFINE_ERROR_

Status ErrnoError(int err, std::string_view what) {
  std::string m(what);
  m += ": ";
  m += std::strerror(err);
  StatusCode code = StatusCode::kUnknown;
  switch (err) {
    case EINVAL:
      code = StatusCode::kInvalidArgument;
      break;
    case ENOENT:
      code = StatusCode::kNotFound;
      break;
    case EEXIST:
      code = StatusCode::kAlreadyExists;
      break;
    case EACCES:
    case EPERM:
      code = StatusCode::kPermissionDenied;
      break;
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
    case ENFILE:
      code = StatusCode::kResourceExhausted;
      break;
    case ETIMEDOUT:
      code = StatusCode::kDeadlineExceeded;
      break;
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EAGAIN:
      code = StatusCode::kUnavailable;
      break;
    case EINTR:
    case ECANCELED:
      code = StatusCode::kCancelled;
      break;
    default:
      break;
  }
  return Status(code, std::move(m));
}

}  // namespace gos
