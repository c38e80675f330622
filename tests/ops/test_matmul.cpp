// matmul / mm / addmm / linear against a float64 triple loop written here, for every shape
// rule, operand layout and dtype. Most inputs are random multiples of 1/8, so products and
// partial sums are exact in float32 and each dtype differs from the reference only by its
// final rounding: the dtype tolerances of testing.h then hold at any K without widening.
#include <cmath>
#include <limits>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const std::vector<DType> kGemmTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64};


// random_eighths() values laid out as random_with_layout() lays them out.
Tensor grid_with_layout(const Shape& shape, Layout layout, DType dtype) {
  switch (layout) {
    case Layout::Contiguous: return random_eighths(shape, dtype);
    case Layout::Transposed: {
      Shape swapped = shape;
      std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
      return random_eighths(swapped, dtype).transpose(-1, -2);
    }
    case Layout::Sliced: {
      Shape wide = shape;
      wide.back() = 2 * shape.back() + 1;
      return random_eighths(wide, dtype).slice(-1, 1, 2 * shape.back() + 1, 2);
    }
    case Layout::Expanded: {
      Shape one = shape;
      one[0] = 1;
      return random_eighths(one, dtype).expand(shape);
    }
  }
  return {};
}

// Own broadcasting of two batch shapes (not the library's broadcast_shapes).
Shape broadcast_batch(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i + a.size() >= n ? a[i + a.size() - n] : 1;
    const int64_t db = i + b.size() >= n ? b[i + b.size() - n] : 1;
    REQUIRE((da == db || da == 1 || db == 1));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

struct Ref {
  std::vector<double> v;
  Shape shape;
};

// float64 matmul of a's and b's values with PyTorch's shape rules.
Ref matmul_ref(const Tensor& a, const Tensor& b) {
  const std::vector<double> va = values(a), vb = values(b);
  Shape as = a.sizes(), bs = b.sizes();
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  REQUIRE(bs[bs.size() - 2] == K);
  const Shape ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const Shape batch = broadcast_batch(ba, bb);
  const int64_t nb = shape_numel(batch);
  Ref r;
  r.v.assign(static_cast<size_t>(nb * M * N), 0.0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    const auto idx = unravel(bi, batch);
    const int64_t sa = broadcast_source(idx, ba) * M * K, sb = broadcast_source(idx, bb) * K * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += va[sa + i * K + k] * vb[sb + k * N + j];
        r.v[(bi * M + i) * N + j] = acc;
      }
  }
  r.shape = batch;
  if (!a_vec) r.shape.push_back(M);
  if (!b_vec) r.shape.push_back(N);
  return r;
}

std::string describe(const Tensor& a, const Tensor& b) {
  return fmt::format("{} {} (strides {}) @ {} (strides {})", a.dtype(), shape_str(a.sizes()), shape_str(a.strides()),
                     shape_str(b.sizes()), shape_str(b.strides()));
}

void check_matmul(const Tensor& a, const Tensor& b) {
  const Ref r = matmul_ref(a, b);
  const Tensor out = matmul(a, b);
  CHECK(out.dtype() == a.dtype());
  check_close(out, r.v, r.shape, describe(a, b));
}

// Frees a NaN-filled tensor of `shape` so the next allocation of that size likely reuses
// dirty memory: a kernel that forgets to write (or zero) its output then shows NaN.
void dirty_pool(const Shape& shape, DType dtype) {
  Tensor junk = is_floating(dtype) ? full(shape, kNaN, dtype) : full(shape, 12345, dtype);
  CHECK(junk.numel() == shape_numel(shape));
}

}  // namespace

TEST_CASE("matmul follows PyTorch's shape rules in every dtype") {
  manual_seed(1);
  struct Case {
    Shape a, b, out;
  };
  const std::vector<Case> cases = {
      {{5}, {5}, {}},                           // dot -> 0-dim
      {{3, 5}, {5, 4}, {3, 4}},                 // matrix product
      {{5}, {5, 4}, {4}},                       // vector @ matrix
      {{3, 5}, {5}, {3}},                       // matrix @ vector
      {{2, 3, 5}, {2, 5, 4}, {2, 3, 4}},        // batched
      {{2, 3, 5}, {5, 4}, {2, 3, 4}},           // batched @ matrix
      {{3, 5}, {2, 5, 4}, {2, 3, 4}},           // matrix @ batched
      {{5}, {2, 5, 4}, {2, 4}},                 // vector @ batched
      {{2, 3, 5}, {5}, {2, 3}},                 // batched @ vector
      {{2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6}},  // batch broadcasting
      {{1, 3, 2, 5}, {2, 1, 5, 3}, {2, 3, 2, 3}},
      {{2, 3, 4, 5}, {2, 3, 5, 2}, {2, 3, 4, 2}},
  };
  for (DType dt : kGemmTypes)
    for (const Case& c : cases) {
      const Tensor a = random_eighths(c.a, dt), b = random_eighths(c.b, dt);
      CHECK(matmul(a, b).sizes() == c.out);
      check_matmul(a, b);
    }
}

TEST_CASE("matmul accepts transposed, sliced and expanded operands") {
  manual_seed(2);
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{4, 6}, {6, 3}}, {{2, 4, 6}, {2, 6, 3}}, {{3, 4, 6}, {6, 5}}, {{4, 6}, {3, 6, 5}}};
  for (DType dt : kGemmTypes)
    for (const auto& [sa, sb] : shapes)
      for (Layout la : kLayouts)
        for (Layout lb : kLayouts) {
          const Tensor a = grid_with_layout(sa, la, dt), b = grid_with_layout(sb, lb, dt);
          INFO(layout_name(la), " @ ", layout_name(lb));
          check_matmul(a, b);
        }
  // t() of a matrix (the layout linear relies on), and 1-D operands with a step or stride 0.
  for (DType dt : kGemmTypes) {
    check_matmul(random_eighths({7, 5}, dt).t(), random_eighths({3, 7}, dt).t());
    for (Layout l : {Layout::Contiguous, Layout::Sliced, Layout::Expanded}) {
      INFO(layout_name(l));
      const Tensor v = grid_with_layout({6}, l, dt);
      check_matmul(v, grid_with_layout({6, 4}, Layout::Transposed, dt));
      check_matmul(grid_with_layout({3, 6}, Layout::Sliced, dt), v);
      check_matmul(v, grid_with_layout({6}, Layout::Sliced, dt));
      check_matmul(v, random_eighths({2, 6, 3}, dt));
    }
  }
}

TEST_CASE("matmul at odd sizes 1, 7 and 127") {
  manual_seed(3);
  const std::vector<int64_t> sizes = {1, 7, 127};
  for (DType dt : kGemmTypes)
    for (int64_t M : sizes)
      for (int64_t K : sizes)
        for (int64_t N : sizes) {
          check_matmul(random_eighths({M, K}, dt), random_eighths({K, N}, dt));
          if (M == 7)
            check_matmul(grid_with_layout({M, K}, Layout::Transposed, dt),
                         grid_with_layout({K, N}, Layout::Transposed, dt));
        }
  for (DType dt : kGemmTypes) {
    check_matmul(random_eighths({127}, dt), random_eighths({127}, dt));
    check_matmul(random_eighths({3, 7, 127}, dt), random_eighths({127, 7}, dt));
  }
}

TEST_CASE("matmul of continuous positive values stays within the dtype tolerance") {
  // Values in [0.5, 1.5) are not exact products, but with every term positive there is no
  // cancellation: K = 127 float32 accumulations give a relative error below 127 * 2^-24
  // (7.6e-6 < rtol 2e-5), and float16/bfloat16 add one rounding of the result.
  manual_seed(4);
  for (DType dt : kFloatTypes)
    for (Layout la : kLayouts) {
      const Tensor a = random_with_layout({9, 127}, la, dt, 0.5, 1.5);
      const Tensor b = random_with_layout({127, 11}, Layout::Transposed, dt, 0.5, 1.5);
      check_matmul(a, b);
    }
  // float64 with signed values: rtol 1e-10 leaves room for any K used here.
  check_matmul(random({4, 127, 33}, kFloat64), random({33, 9}, kFloat64));
}

TEST_CASE("matmul with an empty dimension") {
  manual_seed(5);
  for (DType dt : kGemmTypes) {
    INFO(dt);
    // K = 0: every output element is an empty sum, i.e. zero.
    dirty_pool({3, 4}, dt);
    const Tensor z = matmul(random_eighths({3, 0}, dt), random_eighths({0, 4}, dt));
    check_close(z, std::vector<double>(12, 0.0), {3, 4});
    dirty_pool({2, 3, 5}, dt);
    check_close(matmul(random_eighths({2, 3, 0}, dt), random_eighths({0, 5}, dt)), std::vector<double>(30, 0.0), {2, 3, 5});
    const Tensor dot = matmul(random_eighths({0}, dt), random_eighths({0}, dt));
    check_close(dot, {0.0}, {});
    // M, N or a batch dim = 0: empty results of the right shape.
    CHECK(matmul(random_eighths({0, 5}, dt), random_eighths({5, 4}, dt)).sizes() == Shape{0, 4});
    CHECK(matmul(random_eighths({3, 5}, dt), random_eighths({5, 0}, dt)).sizes() == Shape{3, 0});
    CHECK(matmul(random_eighths({0, 2, 5}, dt), random_eighths({5, 4}, dt)).sizes() == Shape{0, 2, 4});
    CHECK(matmul(random_eighths({5}, dt), random_eighths({5, 0}, dt)).sizes() == Shape{0});
  }
}

TEST_CASE("matmul errors name the op and the offending shapes") {
  manual_seed(6);
  const Tensor a = random({2, 3}), b = random({4, 5});
  CHECK_THROWS_WITH_AS(matmul(a, b),
                       doctest::Contains("matmul: inner dimensions must match, but a has shape [2, 3] and b has shape "
                                         "[4, 5] (3 vs 4)"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(
      matmul(random({3}), random({4})),
      doctest::Contains("matmul: inner dimensions must match, but a has shape [3] and b has shape [4]"), kiln::Error);
  // Both operands' shapes, not only their batch dims ("[2] and [3]").
  CHECK_THROWS_WITH_AS(matmul(random({2, 3, 4}), random({3, 4, 5})),
                       doctest::Contains("matmul: the batch dimensions of a (shape [2, 3, 4]) and b (shape [3, 4, 5]) "
                                         "cannot be broadcast together ([2] vs [3])"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(matmul(random({2, 3, 3, 4}), random({5, 4, 2})),
                       doctest::Contains("matmul: the batch dimensions of a (shape [2, 3, 3, 4]) and b (shape "
                                         "[5, 4, 2]) cannot be broadcast together ([2, 3] vs [5])"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(
      matmul(random({2, 3}), random({3, 4}, kFloat64)),
      doctest::Contains("matmul: expected a and b to have the same dtype, but got float32 and float64"), kiln::Error);
  CHECK_THROWS_WITH_AS(matmul(random({2, 3}, kInt32), random({3, 4}, kInt64)),
                       doctest::Contains("matmul: expected a and b to have the same dtype, but got int32 and int64"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(matmul(random({2, 3}, kBool), random({3, 4}, kBool)),
                       doctest::Contains("matmul: unsupported dtype bool"), kiln::Error);
  CHECK_THROWS_WITH_AS(matmul(random({}), random({3})),
                       doctest::Contains("matmul: both arguments need at least 1 dimension, got shapes [] and [3]"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(matmul(random({3}), random({})),
                       doctest::Contains("matmul: both arguments need at least 1 dimension, got shapes [3] and []"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(matmul(Tensor(), b), doctest::Contains("matmul: argument 'a' is an undefined tensor"),
                       kiln::Error);
}

TEST_CASE("mm multiplies 2-D matrices only") {
  manual_seed(7);
  for (DType dt : kGemmTypes)
    for (Layout la : kLayouts)
      for (Layout lb : kLayouts) {
        const Tensor a = grid_with_layout({5, 7}, la, dt), b = grid_with_layout({7, 3}, lb, dt);
        const Ref r = matmul_ref(a, b);
        check_close(mm(a, b), r.v, r.shape, describe(a, b));
      }
  CHECK_THROWS_WITH_AS(mm(random({2, 3}), random({4, 5})),
                       doctest::Contains("mm: shapes [2, 3] and [4, 5] cannot be multiplied (3 vs 4)"), kiln::Error);
  CHECK_THROWS_WITH_AS(mm(random({3}), random({3, 4})),
                       doctest::Contains("mm: expected 2-D matrices, got shapes [3] and [3, 4]"), kiln::Error);
  CHECK_THROWS_WITH_AS(mm(random({2, 2, 3}), random({3, 4})),
                       doctest::Contains("mm: expected 2-D matrices, got shapes [2, 2, 3] and [3, 4]"), kiln::Error);
  CHECK_THROWS_WITH_AS(mm(random({2, 3}, kFloat16), random({3, 4})),
                       doctest::Contains("mm: expected self and mat2 to have the same dtype"), kiln::Error);
}

namespace {
// beta * bias (broadcast to [M, N]) + alpha * a @ b, in float64.
std::vector<double> addmm_ref(const Tensor& bias, const Tensor& a, const Tensor& b, double beta, double alpha) {
  const Ref p = matmul_ref(a, b);
  const std::vector<double> vbias = values(bias);
  std::vector<double> r(p.v.size());
  for (size_t i = 0; i < r.size(); ++i) {
    const double bv =
        beta == 0.0 ? 0.0 : beta * vbias[broadcast_source(unravel(static_cast<int64_t>(i), p.shape), bias.sizes())];
    r[i] = bv + alpha * p.v[i];
  }
  return r;
}
}  // namespace

TEST_CASE("addmm broadcasts the bias and applies beta and alpha") {
  manual_seed(8);
  const int64_t M = 5, K = 7, N = 3;
  const std::vector<Shape> bias_shapes = {{N}, {1, N}, {M, 1}, {M, N}, {}};
  // Powers of two keep the grid values exact; the integer pairs suit the integer dtypes.
  const std::vector<std::pair<double, double>> float_coeffs = {{1, 1}, {0.5, 2}, {-1, 0.25}, {0, 1.5}, {2, 0}};
  const std::vector<std::pair<int, int>> int_coeffs = {{1, 1}, {3, 2}, {-1, -2}, {0, 5}, {2, 0}};
  for (DType dt : kGemmTypes)
    for (const Shape& bs : bias_shapes)
      for (size_t c = 0; c < float_coeffs.size(); ++c) {
        const Tensor bias = random_eighths(bs, dt), a = random_eighths({M, K}, dt), b = random_eighths({K, N}, dt);
        const bool integral = !is_floating(dt);
        const double beta = integral ? int_coeffs[c].first : float_coeffs[c].first;
        const double alpha = integral ? int_coeffs[c].second : float_coeffs[c].second;
        INFO(dt, " bias ", shape_str(bs), " beta ", beta, " alpha ", alpha);
        const Tensor out =
            integral ? addmm(bias, a, b, int_coeffs[c].first, int_coeffs[c].second) : addmm(bias, a, b, beta, alpha);
        CHECK(out.dtype() == dt);
        check_close(out, addmm_ref(bias, a, b, beta, alpha), {M, N});
      }
  // Strided operands and an expanded bias.
  for (DType dt : kFloatTypes)
    for (Layout l : kLayouts) {
      const Tensor bias = grid_with_layout({M, N}, l, dt);
      const Tensor a = grid_with_layout({M, K}, l, dt), b = grid_with_layout({K, N}, Layout::Transposed, dt);
      INFO(dt, " ", layout_name(l));
      check_close(addmm(bias, a, b, 0.5, -2.0), addmm_ref(bias, a, b, 0.5, -2.0), {M, N});
    }
}

TEST_CASE("addmm with beta = 0 ignores the bias, even NaN") {
  manual_seed(9);
  for (DType dt : kFloatTypes) {
    const Tensor a = random_eighths({4, 6}, dt), b = random_eighths({6, 3}, dt);
    for (const Shape& bs : std::vector<Shape>{{3}, {4, 3}}) {
      const Tensor nan_bias = full(bs, kNaN, dt);
      INFO(dt, " bias ", shape_str(bs));
      check_close(addmm(nan_bias, a, b, 0, 1.5), addmm_ref(nan_bias, a, b, 0, 1.5), {4, 3});
      // With beta != 0 the NaN must come through: beta = 0 is a special case, not a filter.
      const std::vector<double> got = addmm(nan_bias, a, b, 1, 1).to_vector<double>();
      for (double v : got) CHECK(std::isnan(v));
    }
  }
}

TEST_CASE("addmm errors") {
  manual_seed(10);
  const Tensor a = random({3, 4}), b = random({4, 5});
  CHECK_THROWS_WITH_AS(addmm(random({6}), a, b), doctest::Contains("addmm: shapes [6] and [3, 5] cannot be broadcast"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(
      addmm(random({2, 3, 5}), a, b),
      doctest::Contains("addmm: bias of shape [2, 3, 5] cannot be broadcast to the output shape [3, 5]"), kiln::Error);
  CHECK_THROWS_WITH_AS(addmm(random({5}, kFloat64), a, b),
                       doctest::Contains("addmm: expected bias to have dtype float32, but got float64"), kiln::Error);
  CHECK_THROWS_WITH_AS(
      addmm(random({5}), a, random({3, 5})),
      doctest::Contains("addmm: mat1 and mat2 shapes cannot be multiplied ([3, 4] and [3, 5]: 4 vs 3)"), kiln::Error);
  CHECK_THROWS_WITH_AS(addmm(random({5}), random({4}), b),
                       doctest::Contains("addmm: expected 2-D matrices, got shapes [4] and [4, 5]"), kiln::Error);
  CHECK_THROWS_WITH_AS(addmm(random({5}), a, b.to(kBFloat16)),
                       doctest::Contains("addmm: expected mat1 and mat2 to have the same dtype"), kiln::Error);
  // Integer inputs take integer coefficients, as in PyTorch (0.5 would silently truncate).
  const Tensor ia = random({3, 4}, kInt64), ib = random({4, 5}, kInt64), ibias = random({5}, kInt64);
  CHECK_THROWS_WITH_AS(addmm(ibias, ia, ib, 1, 0.5),
                       doctest::Contains("addmm: for integer inputs, beta and alpha must be integers"), kiln::Error);
  CHECK_THROWS_WITH_AS(addmm(ibias, ia, ib, 0.5, 1),
                       doctest::Contains("addmm: for integer inputs, beta and alpha must be integers"), kiln::Error);
}

TEST_CASE("linear with 1-D, 2-D and 3-D inputs, with and without bias") {
  manual_seed(11);
  const int64_t in = 13, out = 6;
  for (DType dt : kGemmTypes)
    for (const Shape& xs : std::vector<Shape>{{in}, {4, in}, {2, 3, in}, {2, 1, 3, in}})
      for (bool with_bias : {true, false})
        for (bool transposed_weight : {false, true}) {
          const Tensor x = random_eighths(xs, dt);
          // A transposed view of an [in, out] buffer, as a weight shared with a tied layer.
          const Tensor w = transposed_weight ? random_eighths({in, out}, dt).t() : random_eighths({out, in}, dt);
          const Tensor b = with_bias ? random_eighths({out}, dt) : Tensor();
          Shape expect = xs;
          expect.back() = out;
          INFO(dt, " x ", shape_str(xs), " bias ", with_bias, " transposed weight ", transposed_weight);
          const Tensor y = linear(x, w, b);
          CHECK(y.dtype() == dt);
          check_close(y, reference_linear(x, w, b), expect);
        }
  // Non-contiguous inputs.
  for (DType dt : kFloatTypes)
    for (Layout l : kLayouts) {
      const Tensor x = grid_with_layout({3, 4, in}, l, dt), w = random_eighths({out, in}, dt), b = random_eighths({out}, dt);
      INFO(dt, " ", layout_name(l));
      check_close(linear(x, w, b), reference_linear(x, w, b), {3, 4, out});
    }
}

TEST_CASE("linear errors") {
  manual_seed(12);
  const Tensor w = random({256, 1024}), b = random({256});
  CHECK_THROWS_WITH_AS(linear(random({8, 512}), w, b),
                       doctest::Contains("linear: input's last dimension (512) does not match in_features (1024): "
                                         "input shape [8, 512], weight shape [256, 1024]"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(linear(random({8, 1024}), w, random({255})),
                       doctest::Contains("linear: bias must have shape [256] (out_features), got [255]"), kiln::Error);
  CHECK_THROWS_WITH_AS(linear(random({8, 1024}), w, random({2, 256})),
                       doctest::Contains("linear: bias must have shape [256] (out_features), got [2, 256]"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(linear(random({8, 1024}), w, random({256}, kFloat64)),
                       doctest::Contains("linear: expected bias to have dtype float32, but got float64"), kiln::Error);
  CHECK_THROWS_WITH_AS(linear(random({8, 1024}), random({1024}), b),
                       doctest::Contains("linear: weight must be 2-D [out_features, in_features], got shape [1024]"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(linear(random({}), random({4, 1})),
                       doctest::Contains("linear: input must have at least 1 dimension, got a 0-dim tensor"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(
      linear(random({8, 1024}, kFloat16), w),
      doctest::Contains("linear: expected input and weight to have the same dtype, but got float16 and "
                        "float32"),
      kiln::Error);
  CHECK_THROWS_WITH_AS(linear(random({2, 3}, kBool), random({4, 3}, kBool)),
                       doctest::Contains("linear: unsupported dtype bool"), kiln::Error);
}
