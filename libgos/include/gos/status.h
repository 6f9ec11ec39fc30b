// gos::Status and gos::StatusOr<T>: the error model of every fallible gos call.
//
// After absl::Status / rocksdb::Status: a canonical code plus a message that keeps the
// original detail (errno text, -FI_E* string, CRIU output). Library code never throws;
// errors from libfabric, errno, RocksDB and CRIU are converted once, at the edge.
#ifndef GOS_STATUS_H_
#define GOS_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gos {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "UNAVAILABLE: node 3 (host h1, pid 42) is down: connection reset".
  std::string ToString() const;

  // Returns a copy with "context: " put in front of the message.
  Status WithContext(std::string_view context) const;

  // Marks a Status as deliberately not inspected.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
Status InvalidArgumentError(std::string message);
Status DeadlineExceededError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status PermissionDeniedError(std::string message);
Status ResourceExhaustedError(std::string message);
Status FailedPreconditionError(std::string message);
Status AbortedError(std::string message);
Status OutOfRangeError(std::string message);
Status UnimplementedError(std::string message);
Status InternalError(std::string message);
Status UnavailableError(std::string message);
Status DataLossError(std::string message);
Status CancelledError(std::string message);

// errno -> Status, message "what: strerror(err)". The code follows the errno's meaning.
Status ErrnoError(int err, std::string_view what);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) { assert(!status_.ok()); }        // NOLINT
  StatusOr(Status&& status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT
  StatusOr(const T& value) : value_(value) {}                                        // NOLINT
  StatusOr(T&& value) : value_(std::move(value)) {}                                  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace gos

#define GOS_STATUS_CONCAT_INNER_(a, b) a##b
#define GOS_STATUS_CONCAT_(a, b) GOS_STATUS_CONCAT_INNER_(a, b)

#define GOS_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::gos::Status gos_status_ = (expr);        \
    if (!gos_status_.ok()) return gos_status_; \
  } while (0)

#define GOS_ASSIGN_OR_RETURN(lhs, expr) \
  GOS_ASSIGN_OR_RETURN_IMPL_(GOS_STATUS_CONCAT_(gos_statusor_, __LINE__), lhs, expr)
#define GOS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#endif  // GOS_STATUS_H_
