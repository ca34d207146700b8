// Status, Result<T> and the one project exception, Error.
//
// Hot I/O paths return Status / Result<T>; higher layers may throw Error. Every message says
// what failed, where (file, offset, tensor, rank) and what to do; with_context() prepends the
// caller's view ("while writing shard 3 of /ckpt/step100: ...").
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace tierzero {

enum class ErrorCode : uint8_t {
  kOk = 0,
  kInvalidArgument,    // the caller's input (config, flag, request) is wrong
  kNotFound,           // a file, tensor or key does not exist
  kIo,                 // the OS refused or failed an I/O call
  kCorrupt,            // a file's content contradicts its format
  kOutOfSpace,         // a disk or memory budget cannot hold what was asked
  kUnsupported,        // valid but not implemented / not available on this machine
  kResourceExhausted,  // a limit (RLIMIT_MEMLOCK, queue, pool) was hit
  kInternal,           // a broken invariant in tierzero itself
};

// Returns the stable lower-case name of `code` ("io", "corrupt", ...).
const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns this status with "context: " prepended to the message; ok stays ok.
  Status with_context(const std::string& context) const;
  // Returns "<code name>: <message>", or "ok".
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status io_error(std::string m) { return {ErrorCode::kIo, std::move(m)}; }
inline Status corrupt(std::string m) { return {ErrorCode::kCorrupt, std::move(m)}; }
inline Status out_of_space(std::string m) { return {ErrorCode::kOutOfSpace, std::move(m)}; }
inline Status unsupported(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {ErrorCode::kResourceExhausted, std::move(m)}; }
inline Status internal_error(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

// Builds a kIo status from an errno value: "<what>: <strerror(err)> (errno N)".
Status errno_status(int err, const std::string& what);

// The project's exception: carries a non-ok Status.
class Error : public std::runtime_error {
 public:
  explicit Error(Status status) : std::runtime_error(status.to_string()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// Throws Error(status) when status is not ok.
inline void throw_if_error(const Status& status) {
  if (!status.ok()) throw Error(status);
}

// A value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(ErrorCode::kInternal, "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // The error; ok_status() when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  T& value() & {
    check();
    return std::get<T>(v_);
  }
  const T& value() const& {
    check();
    return std::get<T>(v_);
  }
  T&& value() && {
    check();
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void check() const {
    if (!ok()) throw Error(std::get<Status>(v_));
  }
  std::variant<T, Status> v_;
};

// Returns the value of a Result or throws its Error.
template <typename T>
T value_or_throw(Result<T> r) {
  return std::move(r).value();
}

}  // namespace tierzero

#define TZ_CONCAT_INNER(a, b) a##b
#define TZ_CONCAT(a, b) TZ_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expr` is not ok.
#define TZ_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::tierzero::Status tz_status_ = (expr);  \
    if (!tz_status_.ok()) return tz_status_; \
  } while (0)

// `lhs = value of expr`, or returns its status from the enclosing function.
#define TZ_ASSIGN_OR_RETURN(lhs, expr) TZ_ASSIGN_OR_RETURN_IMPL(TZ_CONCAT(tz_result_, __LINE__), lhs, expr)
#define TZ_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
