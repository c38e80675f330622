// dropout: the identity cases (eval, p = 0) return the input itself; p = 1 zeroes all; for
// 0 < p < 1 every output is either 0 or x scaled by 1/(1-p), the kept fraction is within
// statistical bounds, and the mask is a function of the seed alone.
#include <cmath>
#include <limits>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct MaskStats {
  int64_t kept = 0, dropped = 0, bad = 0;
};

// Classifies each output element as dropped (exactly 0) or kept (x / (1 - p) within the
// dtype's tolerance); anything else counts as bad. Inputs must be non-zero.
MaskStats classify(const Tensor& x, const Tensor& y, double p) {
  const std::vector<double> vx = values(x), vy = values(y);
  REQUIRE(vx.size() == vy.size());
  const Tolerance tol = tolerance(y.dtype());
  MaskStats s;
  for (size_t i = 0; i < vx.size(); ++i) {
    REQUIRE(vx[i] != 0.0);
    const double e = vx[i] / (1.0 - p);
    if (vy[i] == 0.0)
      ++s.dropped;
    else if (std::abs(vy[i] - e) <= tol.atol + tol.rtol * std::abs(e))
      ++s.kept;
    else
      ++s.bad;
  }
  return s;
}

// Non-zero random values: |x| in [0.5, 2).
Tensor nonzero_random(const Shape& shape, DType dtype) {
  const Tensor mag = random(shape, kFloat64, 0.5, 2.0), sign = random(shape, kFloat64, 0, 1);
  std::vector<double> v = values(mag);
  const std::vector<double> s = values(sign);
  for (size_t i = 0; i < v.size(); ++i)
    if (s[i] < 0.5) v[i] = -v[i];
  return from_vector(v, shape).to(dtype);
}

}  // namespace

TEST_CASE("dropout in eval mode or with p = 0 returns the input itself") {
  manual_seed(41);
  for (DType dt : kFloatTypes) {
    const Tensor x = random({4, 5}, dt);
    CHECK(dropout(x, 0.5, false).is_same(x));
    CHECK(dropout(x, 1.0, false).is_same(x));
    CHECK(dropout(x, 0.0, true).is_same(x));
    const Tensor t = random_with_layout({4, 5}, Layout::Transposed, dt);
    CHECK(dropout(t, 0.3, false).is_same(t));
    // Training with 0 < p < 1 makes a new tensor.
    CHECK_FALSE(dropout(x, 0.5, true).is_alias_of(x));
  }
}

TEST_CASE("dropout with p = 1 zeroes everything") {
  manual_seed(42);
  for (DType dt : kFloatTypes) {
    const Tensor x = nonzero_random({3, 7, 5}, dt);
    const Tensor y = dropout(x, 1.0, true);
    CHECK(y.dtype() == dt);
    check_close(y, std::vector<double>(105, 0.0), {3, 7, 5}, Tolerance{0, 0});
  }
  // An empty input gives an empty output.
  CHECK(dropout(random({0, 3}), 0.5, true).sizes() == Shape{0, 3});
}

TEST_CASE("dropout keeps a 1 - p fraction and scales kept values by 1/(1-p)") {
  manual_seed(43);
  const double p = 0.3;
  const int64_t n = 200000;
  const Tensor x = nonzero_random({n}, kFloat32);
  const Tensor y = dropout(x, p, true);
  REQUIRE(y.dtype() == kFloat32);
  const std::vector<float> vx = x.to_vector<float>(), vy = y.to_vector<float>();
  // Inverted dropout multiplies by the scale 1/(1-p) held in float32, as PyTorch's CPU
  // kernel does: the float32 product of two floats is the float64 product rounded once.
  const double scale = static_cast<float>(1.0 / (1.0 - p));
  int64_t kept = 0, bad = 0, off_by_more_than_ulp = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (vy[i] == 0.0f) continue;
    ++kept;
    const float expect = static_cast<float>(static_cast<double>(vx[i]) * scale);
    if (vy[i] != expect) ++bad;
    // And that is x / (1 - p) up to one float32 ulp.
    const double exact = static_cast<double>(vx[i]) / (1.0 - p);
    const double ulp = std::nextafter(static_cast<float>(std::abs(exact)), std::numeric_limits<float>::infinity()) -
                       static_cast<float>(std::abs(exact));
    if (std::abs(vy[i] - exact) > ulp) ++off_by_more_than_ulp;
  }
  CHECK(bad == 0);
  CHECK(off_by_more_than_ulp == 0);
  // Kept ~ Binomial(n, 0.7): sd = sqrt(0.7 * 0.3 / n) ~ 0.00102; 6 sd is a bound that a
  // correct kernel misses with probability ~2e-9, while p or 1 - p swapped is off by 0.4.
  const double frac = static_cast<double>(kept) / static_cast<double>(n);
  CHECK(std::abs(frac - (1.0 - p)) < 6 * std::sqrt(p * (1 - p) / n));
}

TEST_CASE("dropout masks are reproducible from the seed") {
  manual_seed(44);
  const Tensor x = nonzero_random({1000}, kFloat32);
  manual_seed(123);
  const std::vector<float> a = dropout(x, 0.5, true).to_vector<float>();
  const std::vector<float> b = dropout(x, 0.5, true).to_vector<float>();
  manual_seed(123);
  const std::vector<float> c = dropout(x, 0.5, true).to_vector<float>();
  CHECK(a == c);
  CHECK(a != b);  // the generator moved on: a fresh mask (all 1000 equal has chance 2^-1000)
  manual_seed(124);
  CHECK(dropout(x, 0.5, true).to_vector<float>() != a);
  // The mask is drawn per element whatever the dtype: float64 with the same seed keeps the
  // same positions.
  manual_seed(123);
  const std::vector<double> d = dropout(x.to(kFloat64), 0.5, true).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) CHECK((a[i] == 0.0f) == (d[i] == 0.0));
}

TEST_CASE("dropout in every float dtype and layout") {
  manual_seed(45);
  for (DType dt : kFloatTypes)
    for (Layout l : kLayouts)
      for (double p : {0.1, 0.5, 0.9}) {
        // Non-zero values, laid out as `l`.
        Tensor x = random_with_layout({40, 50}, l, dt, 0.25, 2.0);
        INFO(dt, " ", layout_name(l), " p ", p);
        const Tensor y = dropout(x, p, true);
        CHECK(y.dtype() == dt);
        CHECK(y.sizes() == Shape{40, 50});
        const MaskStats s = classify(x, y, p);
        CHECK(s.bad == 0);
        const double n = 2000, frac = static_cast<double>(s.kept) / n;
        CHECK(std::abs(frac - (1 - p)) < 6 * std::sqrt(p * (1 - p) / n));
      }
}

TEST_CASE("dropout errors") {
  manual_seed(46);
  const Tensor x = random({4});
  CHECK_THROWS_WITH_AS(dropout(x, -0.1),
                       doctest::Contains("dropout: probability has to be between 0 and 1, but got -0.1"), kiln::Error);
  CHECK_THROWS_WITH_AS(dropout(x, 1.5),
                       doctest::Contains("dropout: probability has to be between 0 and 1, but got 1.5"), kiln::Error);
  CHECK_THROWS_WITH_AS(dropout(x, std::nan(""), true),
                       doctest::Contains("dropout: probability has to be between 0 and 1, but got nan"), kiln::Error);
  // Checked in eval mode too: a bad p is a bug whatever the mode.
  CHECK_THROWS_WITH_AS(dropout(x, 2.0, false), doctest::Contains("dropout: probability has to be between 0 and 1"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(dropout(random({4}, kInt64), 0.5), doctest::Contains("dropout: unsupported dtype int64"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(dropout(random({4}, kBool), 0.5), doctest::Contains("dropout: unsupported dtype bool"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(dropout(Tensor(), 0.5), doctest::Contains("dropout: argument 'input' is an undefined tensor"),
                       kiln::Error);
}
