// Conversions and copies: to(dtype) for every (from, to) pair against a reference written from
// the rules in tensor/convert.h (truncation toward zero, NaN and out-of-range floats -> the
// integer minimum, modular int narrowing, non-zero -> true), plus contiguous, clone, to(device)
// and set_data. copy_, item and to_vector live in test_copy.cpp.
#include <cmath>
#include <limits>

#include "testing.h"

using namespace kiln;

namespace {
const std::vector<DType> kAllTypes = {kBool, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

// One source element: its exact value, as an integer for integer (and bool) sources.
struct Val {
  double d;
  int64_t i;
  bool is_int;
};

// Float -> integer as documented in convert.h: truncation toward zero, and the integer
// minimum for NaN and values outside [min, max + 1).
template <typename T>
int64_t float_to_int(double d) {
  const double lo = -std::ldexp(1.0, std::numeric_limits<T>::digits);  // -2^31 or -2^63
  if (std::isnan(d) || d < lo || d >= -lo) return std::numeric_limits<T>::min();
  return static_cast<int64_t>(std::trunc(d));
}

// int64 -> int32 keeps the low 32 bits (two's complement), as a C++20 cast and PyTorch do.
int64_t wrap32(int64_t v) {
  int64_t r = v % (int64_t{1} << 32);
  if (r >= (int64_t{1} << 31)) r -= int64_t{1} << 32;
  if (r < -(int64_t{1} << 31)) r += int64_t{1} << 32;
  return r;
}

// The expected result of converting `v` to `to`, as a double (exact for every result here:
// integer results stay below 2^53 in magnitude or are the int64 extremes, compared as int64
// separately).
double expected_value(const Val& v, DType to) {
  switch (to) {
    case DType::Bool: return v.is_int ? (v.i != 0) : (v.d != 0.0 || std::isnan(v.d));
    case DType::Float64: return v.is_int ? static_cast<double>(v.i) : v.d;
    case DType::Float32: return v.is_int ? static_cast<double>(static_cast<float>(v.i)) : static_cast<double>(static_cast<float>(v.d));
    case DType::Float16: {
      const float f = v.is_int ? static_cast<float>(v.i) : static_cast<float>(v.d);
      return static_cast<double>(static_cast<float>(Half(f)));
    }
    case DType::BFloat16: {
      const float f = v.is_int ? static_cast<float>(v.i) : static_cast<float>(v.d);
      return static_cast<double>(static_cast<float>(BFloat16(f)));
    }
    default: return 0.0;  // integers are handled by expected_int
  }
}
int64_t expected_int(const Val& v, DType to) {
  if (to == DType::Int64) return v.is_int ? v.i : float_to_int<int64_t>(v.d);
  return v.is_int ? wrap32(v.i) : float_to_int<int32_t>(v.d);
}

// Source values for each dtype: random values in [-1000, 1000) with fractions, plus the
// edge cases (signed zero, halves, int32/int64 limits, beyond-range, NaN, infinities).
std::vector<double> base_doubles() {
  std::vector<double> v = {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.7, 0.999, -0.999, 100.75, -300.25, 1e10, -1e10,
                           3e9, -3e9, 2147483648.0, -2147483648.0, 2147483647.0, -2147483649.0, 9.3e18, 1e20, -1e20,
                           65504.0, 65520.0, 70000.0, -1e6, 1e-8, 3.0e38, -1e300,
                           std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()};
  for (double r : rand({200}, kFloat64).to_vector<double>()) v.push_back(r * 2000.0 - 1000.0);
  return v;
}

// Builds the source tensor of dtype `from` directly from native values (no Kiln conversion
// involved) and records each element's exact value.
Tensor make_source(DType from, const std::vector<double>& ds, std::vector<Val>& vals) {
  vals.clear();
  auto clip_int = [](double d, double lo, double hi) -> int64_t {
    if (std::isnan(d)) return 0;
    return static_cast<int64_t>(std::trunc(std::clamp(d, lo, hi)));
  };
  switch (from) {
    case DType::Bool: {
      std::vector<bool> b;
      for (double d : ds) b.push_back(d > 0.0);
      for (bool x : b) vals.push_back({x ? 1.0 : 0.0, x ? 1 : 0, true});
      return from_vector(b, {static_cast<int64_t>(b.size())});
    }
    case DType::Int32: {
      std::vector<int32_t> x = {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), -1, 0, 1};
      for (double d : ds) x.push_back(static_cast<int32_t>(clip_int(d, -2147483648.0, 2147483647.0)));
      for (int32_t e : x) vals.push_back({static_cast<double>(e), e, true});
      return from_vector(x);
    }
    case DType::Int64: {
      std::vector<int64_t> x = {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                                (int64_t{1} << 53) + 1, -((int64_t{1} << 40) + 7), int64_t{1} << 31,
                                -(int64_t{1} << 31) - 1, (int64_t{1} << 32) + 5, 65519, 65521, -1, 0};
      for (double d : ds) x.push_back(clip_int(d, -9.2e18, 9.2e18));
      for (int64_t e : x) vals.push_back({static_cast<double>(e), e, true});
      return from_vector(x);
    }
    case DType::Float16: {
      std::vector<Half> x;
      for (double d : ds) x.push_back(Half(static_cast<float>(d)));
      for (Half h : x) vals.push_back({static_cast<double>(static_cast<float>(h)), 0, false});
      return from_vector(x);
    }
    case DType::BFloat16: {
      std::vector<BFloat16> x;
      for (double d : ds) x.push_back(BFloat16(static_cast<float>(d)));
      for (BFloat16 h : x) vals.push_back({static_cast<double>(static_cast<float>(h)), 0, false});
      return from_vector(x);
    }
    case DType::Float32: {
      std::vector<float> x;
      for (double d : ds) x.push_back(static_cast<float>(d));
      for (float f : x) vals.push_back({static_cast<double>(f), 0, false});
      return from_vector(x);
    }
    case DType::Float64: {
      for (double d : ds) vals.push_back({d, 0, false});
      return from_vector(ds);
    }
  }
  return {};
}

// Compares a converted tensor with the reference, element by element.
void check_converted(const Tensor& y, const std::vector<Val>& vals, DType to) {
  REQUIRE(y.dtype() == to);
  REQUIRE(y.numel() == static_cast<int64_t>(vals.size()));
  if (to == kInt32 || to == kInt64) {
    const std::vector<int64_t> got = y.to_vector<int64_t>();
    for (size_t k = 0; k < vals.size(); ++k) {
      if (got[k] != expected_int(vals[k], to)) {
        FAIL_CHECK("element " << k << " (source " << vals[k].d << "): got " << got[k] << ", expected "
                              << expected_int(vals[k], to));
        return;
      }
    }
    return;
  }
  // Floating and bool results are exact in float64.
  const std::vector<double> got = y.to_vector<double>();
  for (size_t k = 0; k < vals.size(); ++k) {
    const double want = expected_value(vals[k], to);
    const bool ok = std::isnan(want) ? std::isnan(got[k]) : got[k] == want;
    if (!ok) {
      FAIL_CHECK("element " << k << " (source " << vals[k].d << "): got " << got[k] << ", expected " << want);
      return;
    }
  }
}
}  // namespace

TEST_CASE("to(dtype) for every (from, to) pair") {
  manual_seed(501);
  const std::vector<double> ds = base_doubles();
  for (DType from : kAllTypes) {
    std::vector<Val> vals;
    const Tensor x = make_source(from, ds, vals);
    REQUIRE(x.dtype() == from);
    for (DType to : kAllTypes) {
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      const Tensor y = x.to(to);
      CHECK(y.sizes() == x.sizes());
      CHECK(y.is_contiguous());
      check_converted(y, vals, to);
      if (to != from) CHECK_FALSE(y.is_alias_of(x));
    }
  }
}

TEST_CASE("to(dtype) reads strided sources in logical order") {
  manual_seed(502);
  const std::vector<double> ds = base_doubles();
  for (DType from : kAllTypes) {
    std::vector<Val> vals;
    const Tensor dense = make_source(from, ds, vals);
    const int64_t n = dense.numel();
    // Every other element, starting at 1: a strided source with a storage offset.
    const Tensor strided = dense.slice(0, 1, n, 2);
    REQUIRE_FALSE(strided.is_contiguous());
    REQUIRE(strided.storage_offset() == 1);
    std::vector<Val> picked;
    for (int64_t k = 1; k < n; k += 2) picked.push_back(vals[k]);
    vals = picked;
    for (DType to : kAllTypes) {
      INFO(dtype_name(from) << " -> " << dtype_name(to) << " (strided)");
      check_converted(strided.to(to), vals, to);
    }
  }
}

TEST_CASE("documented edge cases of float -> integer conversion") {
  const Tensor f = from_vector<float>({2.9f, -2.9f, 0.5f, -0.5f, NAN, INFINITY, -INFINITY, 3e9f, -3e9f, 1e19f}, {10});
  CHECK(f.to(kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{2, -2, 0, 0, INT64_MIN, INT64_MIN, INT64_MIN, 3000000000, -3000000000, INT64_MIN});
  CHECK(f.to(kInt32).to_vector<int32_t>() ==
        std::vector<int32_t>{2, -2, 0, 0, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN});
  // The largest float below 2^31 converts; 2^31 itself does not fit.
  CHECK(from_vector<double>({2147483647.0, 2147483647.9, 2147483648.0, -2147483648.0, -2147483648.9}, {5})
            .to(kInt32)
            .to_vector<int32_t>() == std::vector<int32_t>{INT32_MAX, INT32_MAX, INT32_MIN, INT32_MIN, INT32_MIN});
  CHECK(from_vector<double>({0.0, -0.0, 1e-300, NAN}, {4}).to(kBool).to_vector<bool>() ==
        std::vector<bool>{false, false, true, true});
  CHECK(from_vector<int64_t>({(int64_t{1} << 32) + 3, -(int64_t{1} << 31) - 1}, {2}).to(kInt32).to_vector<int32_t>() ==
        std::vector<int32_t>{3, INT32_MAX});
  CHECK(from_vector<bool>({true, false}, {2}).to(kFloat16).to_vector<double>() == std::vector<double>{1.0, 0.0});
  // Overflow to infinity when narrowing floats.
  const std::vector<double> big = from_vector<double>({1e300, 70000.0, -1e39}, {3}).to(kFloat16).to_vector<double>();
  CHECK(big[0] == INFINITY);
  CHECK(big[1] == INFINITY);
  CHECK(big[2] == -INFINITY);
  CHECK(from_vector<double>({-1e39}, {1}).to(kFloat32).item<double>() == -INFINITY);
  CHECK(from_vector<double>({1e39}, {1}).to(kBFloat16).item<double>() == INFINITY);
}

TEST_CASE("to(dtype) with a matching dtype returns the same tensor") {
  manual_seed(503);
  for (DType dt : kAllTypes) {
    INFO("dtype " << dtype_name(dt));
    const Tensor x = testing::random({2, 3}, dt, -5.0, 5.0);
    CHECK(x.to(dt).is_same(x));
    const Tensor t = x.t();
    CHECK(t.to(dt).is_same(t));  // even when not contiguous
  }
  const Tensor x = testing::random({3});
  CHECK(x.to(Device::cpu()).is_same(x));
  CHECK(x.cpu().is_same(x));
  CHECK(x.to(Device::cpu(), kFloat32).is_same(x));
  const Tensor y = x.to(Device::cpu(), kFloat64);
  CHECK(y.dtype() == kFloat64);
  CHECK(y.to_vector<double>() == x.to_vector<double>());
}

TEST_CASE("to(Device::cuda(0)) is a clear error in a CPU-only build, and without a GPU") {
  if (cuda::is_built()) {
    if (!cuda::is_available())
      CHECK_THROWS_WITH_AS(ones({2}).to(Device::cuda(0)),
                           "to: cannot allocate memory on cuda:0: no CUDA GPU is visible on this machine", Error);
    return;  // with a GPU, tests/cuda checks that the move works
  }
  const Tensor x = ones({2});
  CHECK_THROWS_WITH_AS(x.to(Device::cuda(0)),
                       "to: cannot move a tensor from cpu to cuda:0: this build of Kiln has no CUDA support", Error);
  CHECK_THROWS_WITH_AS(x.to(Device::cuda(0), kFloat16), doctest::Contains("to: cannot move a tensor from cpu to cuda:0"),
                       Error);
  CHECK_THROWS_WITH_AS(Device::cuda(-1), doctest::Contains("Device::cuda: device index must be in [0, 32767], got -1"),
                       Error);
}

TEST_CASE("contiguous returns the tensor itself or a dense copy") {
  manual_seed(504);
  const Tensor x = testing::random({3, 4});
  CHECK(x.contiguous().is_same(x));
  const std::vector<double> xv = x.to_vector<double>();
  const Tensor t = x.t();
  const Tensor c = t.contiguous();
  CHECK_FALSE(c.is_alias_of(x));
  CHECK(c.is_contiguous());
  CHECK(c.strides() == Shape{3, 1});
  const std::vector<double> cv = c.to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(cv[i * 3 + j] == xv[j * 4 + i]);
  // An expanded tensor becomes a copy with the values repeated.
  const Tensor row = testing::random({1, 3});
  const Tensor e = row.expand({2, 3}).contiguous();
  CHECK_FALSE(e.is_alias_of(row));
  const std::vector<double> rv = row.to_vector<double>(), ev = e.to_vector<double>();
  for (int64_t k = 0; k < 6; ++k) CHECK(ev[k] == rv[k % 3]);
  // A view with an offset that is already contiguous stays a view.
  const Tensor rows = x.narrow(0, 1, 2);
  CHECK(rows.contiguous().is_same(rows));
  // Zero elements are contiguous whatever the strides.
  const Tensor z = zeros({0, 3}).t();
  CHECK(z.contiguous().is_same(z));
}

TEST_CASE("clone owns its storage") {
  manual_seed(505);
  for (DType dt : kAllTypes) {
    INFO("dtype " << dtype_name(dt));
    Tensor x = testing::random({2, 5}, dt, -20.0, 20.0);
    const std::vector<double> xv = x.to_vector<double>();
    Tensor c = x.clone();
    CHECK_FALSE(c.is_alias_of(x));
    CHECK(c.dtype() == dt);
    CHECK(c.sizes() == x.sizes());
    CHECK(c.to_vector<double>() == xv);
    c.fill_(dt == kBool ? Scalar(false) : Scalar(3));
    CHECK(x.to_vector<double>() == xv);
    // Of a strided view: contiguous, same logical values.
    const Tensor ct = x.t().clone();
    CHECK(ct.is_contiguous());
    const std::vector<double> ctv = ct.to_vector<double>();
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 2; ++j) CHECK(ctv[i * 2 + j] == xv[j * 5 + i]);
  }
  const Tensor s = full({}, 2.5);
  CHECK(s.clone().dim() == 0);
  CHECK(s.clone().item<double>() == 2.5);
  CHECK(zeros({0, 2}).clone().sizes() == Shape{0, 2});
}

TEST_CASE("set_data swaps what every holder of the handle sees") {
  manual_seed(506);
  Tensor a = zeros({2});
  a.requires_grad_();
  const Tensor holder = a;  // same TensorImpl
  const Tensor b = testing::random({3, 4}, kFloat64);
  a.set_data(b);
  CHECK(holder.dtype() == kFloat64);
  CHECK(holder.sizes() == Shape{3, 4});
  CHECK(holder.is_alias_of(b));
  CHECK(holder.requires_grad());  // the handle's own flag is kept
  CHECK(holder.to_vector<double>() == b.to_vector<double>());
  // Writes through the handle reach b's storage (under no_grad: the handle is a leaf that
  // requires grad, which autograd refuses to write in place otherwise).
  {
    NoGradGuard no_grad;
    Tensor(holder).fill_(1.5);
  }
  for (double v : b.to_vector<double>()) CHECK(v == 1.5);
  // The layout comes along, strided or offset.
  Tensor c = zeros({1});
  const Tensor view = b.t().narrow(0, 1, 2);
  c.set_data(view);
  CHECK(c.sizes() == view.sizes());
  CHECK(c.strides() == view.strides());
  CHECK(c.storage_offset() == view.storage_offset());
  CHECK_THROWS_WITH_AS(c.set_data(Tensor()), doctest::Contains("set_data: argument 'other' is an undefined tensor"), Error);
}
