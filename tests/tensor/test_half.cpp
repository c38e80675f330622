// float16 and bfloat16 conversions against an independent reference: every one of the
// 65536 bit patterns decoded by formula, and float -> 16-bit rounding checked against the
// nearest representable values found by search.
#include <bit>
#include <cmath>
#include <limits>

#include "testing.h"

using namespace kiln;

namespace {
// IEEE binary16 value of a bit pattern, computed from the definition.
double half_reference(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);
  else v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return sign ? -v : v;
}
}  // namespace

TEST_CASE("Half decodes every bit pattern exactly") {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const double want = half_reference(static_cast<uint16_t>(bits));
    const float got = Half::from_bits(static_cast<uint16_t>(bits));
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got));
    } else {
      REQUIRE(static_cast<double>(got) == want);
      // Round trip: encoding the decoded value gives the pattern back.
      REQUIRE(Half(got).bits == bits);
    }
  }
}

TEST_CASE("Half rounds floats to the nearest value, ties to even") {
  // For floats between consecutive halves, the result must be the nearer neighbour.
  std::vector<double> all;
  for (uint32_t bits = 0; bits < 0x7c00; ++bits) all.push_back(half_reference(static_cast<uint16_t>(bits)));
  manual_seed(1);
  const std::vector<double> probes = (rand({20000}, kFloat64) * 70000.0).to_vector<double>();
  for (double p : probes) {
    const float f = static_cast<float>(p);
    const double x = f;
    const auto it = std::lower_bound(all.begin(), all.end(), x);
    double want;
    if (it == all.end()) {
      want = x >= 65520.0 ? std::numeric_limits<double>::infinity() : 65504.0;
    } else if (*it == x || it == all.begin()) {
      want = *it;
    } else {
      const double hi = *it, lo = *(it - 1);
      const uint16_t lo_bits = Half(static_cast<float>(lo)).bits;
      if (x - lo < hi - x) want = lo;
      else if (hi - x < x - lo) want = hi;
      else want = (lo_bits & 1) ? hi : lo;
    }
    REQUIRE(static_cast<double>(static_cast<float>(Half(f))) == want);
  }
  CHECK(std::isinf(static_cast<float>(Half(65520.0f))));
  CHECK(static_cast<float>(Half(65519.0f)) == 65504.0f);
  CHECK(static_cast<float>(Half(-0.0f)) == 0.0f);
  CHECK(std::signbit(static_cast<float>(Half(-0.0f))));
  CHECK(std::isnan(static_cast<float>(Half(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(static_cast<float>(Half(std::ldexp(1.0f, -25))) == 0.0f);                   // tie -> even (0)
  CHECK(static_cast<float>(Half(std::ldexp(1.5f, -25))) == std::ldexp(1.0f, -24));  // above the tie
}

TEST_CASE("BFloat16 keeps the top 16 bits with round-to-nearest-even") {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float v = std::bit_cast<float>(bits << 16);
    if (std::isnan(v)) {
      REQUIRE(std::isnan(static_cast<float>(BFloat16(v))));
      continue;
    }
    REQUIRE(static_cast<float>(BFloat16::from_bits(static_cast<uint16_t>(bits))) == v);
    REQUIRE(BFloat16(v).bits == bits);
  }
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even gives 1.
  CHECK(static_cast<float>(BFloat16(1.0f + std::ldexp(1.0f, -8))) == 1.0f);
  CHECK(static_cast<float>(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8))) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(static_cast<float>(BFloat16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))) ==
        1.0f + std::ldexp(1.0f, -7));
}
