// Scalar: a number passed to an op next to tensors (x + 2, full(shape, 0.5), pow(x, 3)).
//
// It remembers whether it was written as a bool, an integer or a floating value, because
// PyTorch's promotion treats them differently: int_tensor * 2 stays int64-typed, while
// int_tensor * 2.5 becomes float32.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>

#include "convert.h"
#include "dtype.h"

namespace kiln {

/// A bool, integer or floating number, tagged with which one it is.
class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Integral, Floating };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v ? 1 : 0), d_(v ? 1.0 : 0.0) {}  // NOLINT: implicit
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Scalar(T v) : kind_(Kind::Integral), i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}  // NOLINT
  template <std::floating_point T>
  Scalar(T v)  // NOLINT: implicit
      : kind_(Kind::Floating), i_(convert<int64_t>(static_cast<double>(v))), d_(static_cast<double>(v)) {}
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}                                            // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}                                        // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Floating; }
  bool is_integral() const { return kind_ == Kind::Integral; }
  bool is_bool() const { return kind_ == Kind::Bool; }

  /// The value as a double (exact for floats and for integers up to 2^53).
  double to_double() const { return d_; }
  /// The value as an int64 (floats are truncated toward zero; NaN and values past int64's
  /// range give INT64_MIN, as a copy converts them, where a C++ cast is undefined).
  int64_t to_int() const { return i_; }
  /// The value as a bool (non-zero is true).
  bool to_bool() const { return kind_ == Kind::Floating ? d_ != 0.0 : i_ != 0; }
  /// The value converted to element type T, as a C++ static_cast would.
  template <typename T>
  T to() const {
    if constexpr (std::same_as<T, bool>) return to_bool();
    else if constexpr (std::integral<T>) return static_cast<T>(i_);  // as to_int(), then wrapped to T
    else if constexpr (std::same_as<T, double>) return d_;
    else return T(static_cast<float>(d_));
  }

  /// The dtype PyTorch gives this number when it stands alone: bool, int64 or float32.
  DType default_dtype() const {
    return kind_ == Kind::Bool ? DType::Bool : kind_ == Kind::Integral ? DType::Int64 : DType::Float32;
  }

  /// The value as written: "2", "0.5", "true".
  std::string str() const;

 private:
  Kind kind_;
  int64_t i_;
  double d_;
};

inline std::string Scalar::str() const {
  switch (kind_) {
    case Kind::Bool: return i_ ? "True" : "False";
    case Kind::Integral: return fmt::format("{}", i_);
    case Kind::Floating: return fmt::format("{}", d_);
  }
  return {};
}

}  // namespace kiln

template <>
struct fmt::formatter<kiln::Scalar> : fmt::formatter<std::string> {
  auto format(const kiln::Scalar& s, fmt::format_context& ctx) const {
    return fmt::formatter<std::string>::format(s.str(), ctx);
  }
};
