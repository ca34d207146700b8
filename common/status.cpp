#include "common/internal/status.h"

#include <cstring>

namespace tierzero {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kIo: return "i/o error";
    case ErrorCode::kCorrupt: return "corrupt";
    case ErrorCode::kOutOfSpace: return "out of space";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kResourceExhausted: return "resource exhausted";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown";
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(error_code_name(code_)) + ": " + message_;
}

Status errno_status(int err, const std::string& what) {
  ErrorCode code = ErrorCode::kIo;
  if (err == ENOSPC || err == EDQUOT) code = ErrorCode::kOutOfSpace;
  if (err == ENOENT) code = ErrorCode::kNotFound;
  if (err == EINVAL) code = ErrorCode::kInvalidArgument;
  return Status(code, what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

}  // namespace tierzero
