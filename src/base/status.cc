#include "base/status.h"

#include <cstdio>
#include <cstdlib>

namespace wk {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kPreconditionFailed: return "PRECONDITION_FAILED";
    case Code::kNotFound: return "NOT_FOUND";
    case Code::kRetryable: return "RETRYABLE";
    case Code::kUnknownOutcome: return "UNKNOWN_OUTCOME";
    case Code::kFatal: return "FATAL";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kCancelled: return "CANCELLED";
  }
  return "INVALID_CODE";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(CodeName(code_));
  if (!message_.empty()) {
    out += ": ";
    out += message_;
  }
  return out;
}

namespace internal {
void CheckFailed(const char* expr, std::string_view message, const char* file, int line) {
  std::fprintf(stderr, "FATAL CHECK FAILED %s:%d: %s: %.*s\n", file, line, expr,
               static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal

}  // namespace wk
