// Status and Result: errors as values.
//
// Every fallible operation in WasmKeep returns a Status or a Result<T>. The codes are few
// and each has one documented retry meaning, so a caller decides what to do from the code
// alone; the message is for people (logs, CLI output) and is never parsed.
//
// Thread-safety: plain values; no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/check.h"

namespace wk {

// The closed set of outcomes. Frozen order: values are printed in logs and metrics labels
// by name (CodeName), never by number.
enum class Code : std::uint8_t {
  kOk,                  // success
  kPreconditionFailed,  // a conditional write's condition did not hold; nothing changed.
                        // Retrying the same request fails the same way.
  kNotFound,            // the object does not exist. Final for this request.
  kRetryable,           // nothing was applied (throttling, 5xx before applying, connection
                        // refused before sending). Safe to retry after a backoff.
  kUnknownOutcome,      // the request may or may not have been applied (timeout, connection
                        // lost after sending, a write cancelled in flight). For a read this
                        // is the same as kRetryable; for a write the caller must find out
                        // (read back) before assuming either way.
  kFatal,               // will not succeed without an operator's change (credentials,
                        // missing bucket, unwritable directory). Do not retry in a loop.
  kInvalidArgument,     // the caller's input is malformed (empty key, bad URL). A bug or
                        // bad user input; never retry.
  kCancelled,           // the caller's task was cancelled before a read completed.
};

std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "CODE: message", for logs and CLI output.
  std::string ToString() const;

  // Explicitly discards a status whose failure does not matter here (say why at the call).
  void IgnoreError() const {}

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status PreconditionFailed(std::string m) { return {Code::kPreconditionFailed, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status Retryable(std::string m) { return {Code::kRetryable, std::move(m)}; }
inline Status UnknownOutcome(std::string m) { return {Code::kUnknownOutcome, std::move(m)}; }
inline Status Fatal(std::string m) { return {Code::kFatal, std::move(m)}; }
inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }

// A value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    WK_CHECK(!status_.ok(), "a Result built from a Status must carry an error");
  }

  bool ok() const { return value_.has_value(); }
  Code code() const { return status_.code(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  T& value() & {
    WK_CHECK(ok(), "value() on an error Result: " + status_.ToString());
    return *value_;
  }
  const T& value() const& {
    WK_CHECK(ok(), "value() on an error Result: " + status_.ToString());
    return *value_;
  }
  T&& value() && {
    WK_CHECK(ok(), "value() on an error Result: " + status_.ToString());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace wk
