// Errors: one exception type for user mistakes and one for broken invariants.
//
// Every public entry point validates its inputs and throws kiln::Error with a message that
// starts with the op name ("add: ...") and shows the offending shapes or values, so a user
// reading the message knows which call failed and why. The file:line of the check is kept
// apart (Error::where()) so the message itself stays readable. Internal invariants use
// KILN_INTERNAL_ASSERT, whose failure means a bug in Kiln, not in the caller.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace kiln {

/// A user-facing error: bad shapes, dtypes, devices or values passed to a Kiln call.
class Error : public std::runtime_error {
 public:
  /// Builds an error from a complete message and the source location of the failed check.
  Error(std::string message, const char* file = "", int line = 0);
  /// Where the failed check lives in Kiln's source ("ops/binary.cpp:42"), for bug reports.
  const std::string& where() const noexcept { return where_; }

 private:
  std::string where_;
};

/// An allocation the device could not satisfy even after Kiln released its cached memory.
/// The message says what was asked, what the device and Kiln hold, and what to try.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

/// A broken internal invariant: a bug in Kiln itself.
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void throw_error(const char* file, int line, std::string message);
[[noreturn]] void throw_internal(const char* file, int line, const char* cond, std::string message);
}  // namespace detail

}  // namespace kiln

/// Throws kiln::Error with an fmt-formatted message unless `cond` holds.
#define KILN_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) [[unlikely]]                                                  \
      ::kiln::detail::throw_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
  } while (0)

/// Throws kiln::Error unconditionally with an fmt-formatted message.
#define KILN_FAIL(...) ::kiln::detail::throw_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))

/// Throws kiln::InternalError unless `cond` holds: use for invariants, not user input.
#define KILN_INTERNAL_ASSERT(cond, ...)                                                     \
  do {                                                                                      \
    if (!(cond)) [[unlikely]]                                                               \
      ::kiln::detail::throw_internal(__FILE__, __LINE__, #cond, ::fmt::format("" __VA_ARGS__)); \
  } while (0)
