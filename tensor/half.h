// 16-bit floating-point storage types: IEEE binary16 (Half) and bfloat16 (BFloat16).
//
// Both are storage formats only: arithmetic converts to float, computes, and rounds back
// with round-to-nearest-even, as PyTorch does on the CPU. The conversions are written with
// integer bit manipulation so they behave the same on every compiler and need no F16C.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace kiln {

namespace detail {

/// Converts a float to IEEE binary16 bits, rounding to nearest even; NaN stays NaN.
constexpr uint16_t float_to_half_bits(float value) {
  const uint32_t f = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) {  // rounds to a value at or above 65520: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half of 2^-24
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // bits to drop so the result counts 2^-24 units
    uint32_t half_mant = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  uint32_t bits = abs - 0x38000000u;
  const uint32_t rem = bits & 0x1fffu;
  bits >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (bits & 1u))) ++bits;
  return static_cast<uint16_t>(sign | bits);
}

/// Converts IEEE binary16 bits to the exactly equal float.
constexpr float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);
    // Subnormal: normalise the mantissa.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return std::bit_cast<float>(sign | (static_cast<uint32_t>(112 - e) << 23) | (mant << 13));
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// Converts a float to bfloat16 bits, rounding to nearest even; NaN stays a quiet NaN.
constexpr uint16_t float_to_bfloat16_bits(float value) {
  const uint32_t f = std::bit_cast<uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>((f + rounding) >> 16);
}

/// Converts bfloat16 bits to the exactly equal float.
constexpr float bfloat16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

}  // namespace detail

/// IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits. Converts to and from float.
struct Half {
  uint16_t bits = 0;
  constexpr Half() = default;
  /// Rounds a float to the nearest half (ties to even).
  constexpr Half(float v) : bits(detail::float_to_half_bits(v)) {}  // NOLINT: implicit like c10::Half
  /// Builds a Half from its raw bit pattern.
  static constexpr Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  /// The exactly equal float.
  constexpr operator float() const { return detail::half_bits_to_float(bits); }  // NOLINT
};

/// bfloat16: the top 16 bits of a float (1 sign, 8 exponent, 7 mantissa bits).
struct BFloat16 {
  uint16_t bits = 0;
  constexpr BFloat16() = default;
  /// Rounds a float to the nearest bfloat16 (ties to even).
  constexpr BFloat16(float v) : bits(detail::float_to_bfloat16_bits(v)) {}  // NOLINT
  /// Builds a BFloat16 from its raw bit pattern.
  static constexpr BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  /// The exactly equal float.
  constexpr operator float() const { return detail::bfloat16_bits_to_float(bits); }  // NOLINT
};

}  // namespace kiln
