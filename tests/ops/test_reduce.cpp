// Reductions (sum, mean, max, min, amax, amin, argmax, argmin) against float64 references
// computed here by walking every input index: single, several, negative and all dims, keepdim,
// every layout and dtype, NaN and tie rules, empty inputs, accuracy of long sums, errors.
#include <cmath>
#include <functional>
#include <limits>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

enum class Red { Sum, Mean, Max, Min };

struct ReduceCase {
  const char* name;
  Red red;
  std::function<Tensor(const Tensor&, const Shape&, bool)> op;
};

const std::vector<ReduceCase>& cases() {
  using T = const Tensor&;
  using S = const Shape&;
  static const std::vector<ReduceCase> c = {
      {"sum", Red::Sum, [](T x, S d, bool k) { return sum(x, d, k); }},
      {"mean", Red::Mean, [](T x, S d, bool k) { return mean(x, d, k); }},
      {"max", Red::Max, [](T x, S d, bool k) { return max(x, d, k); }},
      {"min", Red::Min, [](T x, S d, bool k) { return min(x, d, k); }},
      {"amax", Red::Max, [](T x, S d, bool k) { return amax(x, d, k); }},
      {"amin", Red::Min, [](T x, S d, bool k) { return amin(x, d, k); }},
  };
  return c;
}

// Which dims of an nd-dim tensor `dims` names (empty: all).
std::vector<bool> reduced_mask(const Shape& dims, size_t nd) {
  std::vector<bool> mask(nd, dims.empty());
  for (int64_t d : dims) mask[static_cast<size_t>(d < 0 ? d + static_cast<int64_t>(nd) : d)] = true;
  return mask;
}

// Output shape of reducing `dims` of `shape`.
Shape reduced_shape(const Shape& shape, const Shape& dims, bool keepdim) {
  const std::vector<bool> mask = reduced_mask(dims, shape.size());
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Float64 reference: every input element is folded into the output element its kept
// coordinates name. Max/min give NaN if any element of the group is NaN.
std::vector<double> reduce_ref(const Tensor& x, const Shape& dims, Red red) {
  const Shape& shape = x.sizes();
  const std::vector<bool> mask = reduced_mask(dims, shape.size());
  const Shape out = reduced_shape(shape, dims, true);
  const std::vector<double> v = values(x);
  const size_t n = static_cast<size_t>(shape_numel(out));
  std::vector<double> acc(n, red == Red::Max ? -kInf : red == Red::Min ? kInf : 0.0);
  std::vector<int64_t> count(n, 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, shape);
    for (size_t d = 0; d < idx.size(); ++d)
      if (mask[d]) idx[d] = 0;
    const size_t o = static_cast<size_t>(ravel(idx, out));
    const double e = v[static_cast<size_t>(i)];
    ++count[o];
    switch (red) {
      case Red::Sum:
      case Red::Mean: acc[o] += e; break;
      case Red::Max: acc[o] = (std::isnan(acc[o]) || std::isnan(e)) ? kNaN : std::max(acc[o], e); break;
      case Red::Min: acc[o] = (std::isnan(acc[o]) || std::isnan(e)) ? kNaN : std::min(acc[o], e); break;
    }
  }
  if (red == Red::Mean)
    for (size_t o = 0; o < n; ++o) acc[o] = count[o] == 0 ? kNaN : acc[o] / static_cast<double>(count[o]);
  return acc;
}

// Reference arg-reduction along `dim` (kept as size 1 in the output order): the first index
// of the extreme value, a NaN counting as the extreme.
std::vector<double> arg_ref(const Tensor& x, int64_t dim, bool want_max) {
  const Shape& shape = x.sizes();
  const std::vector<double> v = values(x);
  Shape out = shape;
  out[static_cast<size_t>(dim)] = 1;
  std::vector<double> r(static_cast<size_t>(shape_numel(out)));
  for (int64_t o = 0; o < shape_numel(out); ++o) {
    std::vector<int64_t> idx = unravel(o, out);
    int64_t best_k = 0;
    double best = 0;
    for (int64_t k = 0; k < shape[static_cast<size_t>(dim)]; ++k) {
      idx[static_cast<size_t>(dim)] = k;
      const double e = v[static_cast<size_t>(ravel(idx, shape))];
      const bool better = want_max ? e > best : e < best;
      if (k == 0 || (!std::isnan(best) && (std::isnan(e) || better))) {
        best = e;
        best_k = k;
      }
    }
    r[static_cast<size_t>(o)] = static_cast<double>(best_k);
  }
  return r;
}

// The same for the flattened tensor.
int64_t flat_arg_ref(const Tensor& x, bool want_max) {
  const std::vector<double> v = values(x);
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (std::isnan(v[best])) break;
    if (std::isnan(v[i]) || (want_max ? v[i] > v[best] : v[i] < v[best])) best = i;
  }
  return static_cast<int64_t>(best);
}

}  // namespace

TEST_CASE("reductions over dim lists match float64 references in every float dtype and layout") {
  manual_seed(401);
  const Shape shape{3, 4, 5};
  const std::vector<Shape> dim_lists = {{0}, {1}, {2}, {-1}, {-3}, {0, 2}, {2, 0}, {-1, 0}, {1, 2}, {0, 1, 2}, {}};
  for (const ReduceCase& c : cases()) {
    for (DType dtype : kFloatTypes) {
      for (Layout layout : kLayouts) {
        const Tensor x = random_with_layout(shape, layout, dtype);
        for (const Shape& dims : dim_lists) {
          for (bool keepdim : {false, true}) {
            CAPTURE(c.name);
            CAPTURE(dtype_name(dtype));
            CAPTURE(layout_name(layout));
            CAPTURE(shape_str(dims));
            CAPTURE(keepdim);
            const Tensor y = c.op(x, dims, keepdim);
            CHECK(y.dtype() == dtype);
            check_close(y, reduce_ref(x, dims, c.red), reduced_shape(shape, dims, keepdim));
          }
        }
      }
    }
  }
}

TEST_CASE("whole-tensor reductions give 0-dim results") {
  manual_seed(402);
  for (DType dtype : kFloatTypes) {
    for (Layout layout : kLayouts) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(layout_name(layout));
      const Tensor x = random_with_layout({6, 7}, layout, dtype);
      check_close(sum(x), reduce_ref(x, {}, Red::Sum), {}, "sum");
      check_close(mean(x), reduce_ref(x, {}, Red::Mean), {}, "mean");
      check_close(max(x), reduce_ref(x, {}, Red::Max), {}, "max");
      check_close(min(x), reduce_ref(x, {}, Red::Min), {}, "min");
      CHECK(sum(x).dtype() == dtype);
      // An empty dim list reduces every dim too; with keepdim they stay as size 1.
      check_close(sum(x, {}, true), reduce_ref(x, {}, Red::Sum), {1, 1}, "sum keepdim");
      check_close(amax(x, {}, true), reduce_ref(x, {}, Red::Max), {1, 1}, "amax keepdim");
    }
  }
}

TEST_CASE("argmax and argmin along each dim match the first-index reference") {
  manual_seed(403);
  const Shape shape{4, 5, 6};
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
    for (Layout layout : kLayouts) {
      // Integers from a small range and bfloat16's coarse grid make ties common.
      const Tensor x = random_with_layout(shape, layout, dtype, -4, 4);
      for (int64_t dim : {0, 1, 2, -1, -2, -3}) {
        for (bool keepdim : {false, true}) {
          CAPTURE(dtype_name(dtype));
          CAPTURE(layout_name(layout));
          CAPTURE(dim);
          CAPTURE(keepdim);
          const int64_t d = dim < 0 ? dim + 3 : dim;
          const Shape out = reduced_shape(shape, {dim}, keepdim);
          const Tensor amx = argmax(x, dim, keepdim), amn = argmin(x, dim, keepdim);
          CHECK(amx.dtype() == kInt64);
          CHECK(amn.dtype() == kInt64);
          check_close(amx, arg_ref(x, d, true), out, "argmax");
          check_close(amn, arg_ref(x, d, false), out, "argmin");
        }
      }
      CAPTURE(dtype_name(dtype));
      CAPTURE(layout_name(layout));
      const Tensor fmax = argmax(x), fmin = argmin(x);
      CHECK(fmax.dim() == 0);
      CHECK(fmax.item<int64_t>() == flat_arg_ref(x, true));
      CHECK(fmin.item<int64_t>() == flat_arg_ref(x, false));
    }
  }
}

TEST_CASE("argmax and argmin return the first index on ties") {
  const Tensor x = from_vector<float>({1, 3, 3, 2, 0, 5, 0, 5}, {2, 4});
  CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(argmin(x, 1).to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  CHECK(argmax(x).item<int64_t>() == 5);
  CHECK(argmin(x).item<int64_t>() == 4);
  const Tensor cols = from_vector<int32_t>({7, 2, 7, 2, 1, 2}, {3, 2});
  CHECK(argmax(cols, 0).to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  CHECK(argmin(cols, 0, true).to_vector<int64_t>() == std::vector<int64_t>{2, 0});
  CHECK(argmin(cols, 0, true).sizes() == Shape{1, 2});
  const Tensor flat = full({9}, 4.0);
  CHECK(argmax(flat).item<int64_t>() == 0);
  CHECK(argmin(flat).item<int64_t>() == 0);
}

TEST_CASE("NaN: max and min propagate it, argmax and argmin pick its first index") {
  const Tensor x = from_vector<double>({1, kNaN, 3, kNaN, /**/ -1, 2, -5, 0, /**/ kNaN, 9, -9, 4}, {3, 4});
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor t = x.to(dtype);
    check_close(max(t, {1}), {kNaN, 2, kNaN}, {3}, "max");
    check_close(amin(t, {1}), {kNaN, -5, kNaN}, {3}, "amin");
    check_close(max(t, {0}), {kNaN, kNaN, 3, kNaN}, {4}, "max dim 0");
    CHECK(std::isnan(max(t).item<double>()));
    CHECK(std::isnan(min(t).item<double>()));
    CHECK(argmax(t, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 0});
    CHECK(argmin(t, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0});
    CHECK(argmax(t, 0).to_vector<int64_t>() == std::vector<int64_t>{2, 0, 0, 0});
    CHECK(argmax(t).item<int64_t>() == 1);
    CHECK(argmin(t).item<int64_t>() == 1);
    // NaN in a sum or mean poisons only its own group.
    check_close(sum(t, {1}), {kNaN, -4, kNaN}, {3}, "sum");
    check_close(mean(t, {1}), {kNaN, -1, kNaN}, {3}, "mean");
  }
  // Infinities are ordinary extremes.
  const Tensor inf = from_vector<double>({1, kInf, -kInf, 2}, {4}).to(kFloat32);
  CHECK(max(inf).item<double>() == kInf);
  CHECK(min(inf).item<double>() == -kInf);
  CHECK(argmax(inf).item<int64_t>() == 1);
  CHECK(argmin(inf).item<int64_t>() == 2);
}

TEST_CASE("integer and bool reductions: sums in int64, extremes keep the dtype, mean is an error") {
  manual_seed(404);
  const Shape shape{4, 6};
  for (DType dtype : {kInt64, kInt32, kBool}) {
    for (Layout layout : kLayouts) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(layout_name(layout));
      const Tensor x = random_with_layout(shape, layout, dtype, -1000, 1000);
      for (const Shape& dims : {Shape{0}, Shape{-1}, Shape{}}) {
        CAPTURE(shape_str(dims));
        const Tensor s = sum(x, dims);
        CHECK(s.dtype() == kInt64);
        check_close(s, reduce_ref(x, dims, Red::Sum), reduced_shape(shape, dims, false), "sum");
        const Tensor m = amax(x, dims, true);
        CHECK(m.dtype() == dtype);
        check_close(m, reduce_ref(x, dims, Red::Max), reduced_shape(shape, dims, true), "amax");
        check_close(min(x, dims), reduce_ref(x, dims, Red::Min), reduced_shape(shape, dims, false), "min");
      }
      CHECK(sum(x).dtype() == kInt64);
      CHECK_THROWS_WITH_AS(mean(x), doctest::Contains("mean: could not infer output dtype"), kiln::Error);
      CHECK_THROWS_WITH_AS(mean(x, {0}), doctest::Contains("mean:"), kiln::Error);
    }
  }
  // int32 elements whose sum overflows int32 but not int64.
  CHECK(sum(full({4}, 2000000000, kInt32)).item<int64_t>() == 8000000000LL);
  const int64_t big = (int64_t{1} << 53) + 1;  // beyond float64's exact integers
  CHECK(sum(from_vector<int64_t>({big, 2}, {2})).item<int64_t>() == big + 2);
  CHECK(sum(from_vector<bool>({true, false, true, true}, {4})).item<int64_t>() == 3);
}

TEST_CASE("reductions of empty tensors") {
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    check_close(sum(zeros({0}, dtype)), {0}, {}, "sum of nothing");
    check_close(sum(zeros({2, 0}, dtype), {1}), {0, 0}, {2}, "sum over empty dim");
    check_close(sum(zeros({0, 3}, dtype), {0}, true), {0, 0, 0}, {1, 3}, "sum over empty dim keepdim");
    check_close(mean(zeros({0}, dtype)), {kNaN}, {}, "mean of nothing");
    check_close(mean(zeros({2, 0}, dtype), {1}), {kNaN, kNaN}, {2}, "mean over empty dim");
    // Reducing a non-empty dim of an empty tensor: an empty result, no error.
    const Tensor e = zeros({0, 3}, dtype);
    CHECK(sum(e, {1}).sizes() == Shape{0});
    CHECK(max(e, {1}).sizes() == Shape{0});
    CHECK(amin(e, {1}, true).sizes() == Shape{0, 1});
    CHECK(argmax(e, 1).sizes() == Shape{0});
    CHECK(argmin(e, -1, true).sizes() == Shape{0, 1});
    // Max, min and the arg-reductions over a zero-size dim have no answer.
    CHECK_THROWS_WITH_AS(max(zeros({0}, dtype)), doctest::Contains("max: cannot reduce over dim 0 of size 0"),
                         kiln::Error);
    CHECK_THROWS_WITH_AS(min(zeros({0}, dtype)), doctest::Contains("min:"), kiln::Error);
    CHECK_THROWS_WITH_AS(amax(zeros({2, 0}, dtype), {1}), doctest::Contains("amax: cannot reduce"), kiln::Error);
    CHECK_THROWS_WITH_AS(amin(e, {0}), doctest::Contains("amin:"), kiln::Error);
    CHECK_THROWS_WITH_AS(argmax(e, 0), doctest::Contains("argmax:"), kiln::Error);
    CHECK_THROWS_WITH_AS(argmin(zeros({0}, dtype)), doctest::Contains("argmin:"), kiln::Error);
  }
  CHECK(sum(zeros({0}, kInt32)).dtype() == kInt64);
  CHECK(sum(zeros({0}, kInt32)).item<int64_t>() == 0);
}

TEST_CASE("reductions of 0-dim tensors") {
  manual_seed(405);
  const Tensor x = random({}, kFloat32);
  const double v = x.item<double>();
  for (const ReduceCase& c : cases()) {
    CAPTURE(c.name);
    for (const Shape& dims : {Shape{}, Shape{0}, Shape{-1}}) {
      check_close(c.op(x, dims, false), {v}, {});
      check_close(c.op(x, dims, true), {v}, {});
    }
    CHECK_THROWS_WITH_AS(c.op(x, {1}, false), doctest::Contains((std::string(c.name) + ": dim 1 is out of range").c_str()),
                         kiln::Error);
  }
  CHECK(argmax(x).item<int64_t>() == 0);
  CHECK(argmin(x, 0).item<int64_t>() == 0);
  CHECK(argmax(x, -1, true).dim() == 0);
  CHECK_THROWS_WITH_AS(argmax(x, 1), doctest::Contains("argmax: dim 1 is out of range"), kiln::Error);
}

TEST_CASE("long sums stay accurate") {
  // A float32 accumulator would stall (ones stop adding at 2^24) or drift (0.1s); the sum
  // must match the exact value rounded once.
  CHECK(sum(ones({1000000})).item<double>() == 1000000.0);
  CHECK(mean(ones({1000000})).item<double>() == 1.0);
  const double tenth = static_cast<double>(0.1f);
  check_close(sum(full({1000000}, 0.1)), {1e6 * tenth}, {}, "sum of 0.1f");
  check_close(mean(full({1000000}, 0.1)), {tenth}, {}, "mean of 0.1f");
  CHECK(sum(ones({2, 300000}), {1}).to_vector<double>() == std::vector<double>{300000, 300000});
  CHECK(sum(ones({300000, 2}), {0}).to_vector<double>() == std::vector<double>{300000, 300000});
  // 16-bit floats: one rounding at the end, not at every step (which stalls at 2048 / 256).
  CHECK(sum(ones({5000}, kFloat16)).item<double>() == 5000.0);
  CHECK(sum(ones({5000}, kBFloat16)).item<double>() == round_to(5000.0, kBFloat16));
  CHECK(mean(ones({5000}, kBFloat16)).item<double>() == 1.0);
}

TEST_CASE("reduction errors: repeated dims, dims out of range, bool arg-reductions") {
  const Tensor x = random({2, 3, 4});
  CHECK_THROWS_WITH_AS(sum(x, {1, 1}), doctest::Contains("sum: dim 1 appears multiple times"), kiln::Error);
  CHECK_THROWS_WITH_AS(sum(x, {1, -2}), doctest::Contains("sum: dim 1 appears multiple times"), kiln::Error);
  CHECK_THROWS_WITH_AS(amax(x, {0, -3}), doctest::Contains("amax: dim 0 appears multiple times"), kiln::Error);
  CHECK_THROWS_WITH_AS(mean(x, {2, 0, 2}), doctest::Contains("mean:"), kiln::Error);
  CHECK_THROWS_WITH_AS(sum(x, {3}), doctest::Contains("sum: dim 3 is out of range"), kiln::Error);
  CHECK_THROWS_WITH_AS(mean(x, {-4}), doctest::Contains("mean: dim -4 is out of range"), kiln::Error);
  CHECK_THROWS_WITH_AS(min(x, {0, 7}), doctest::Contains("min:"), kiln::Error);
  CHECK_THROWS_WITH_AS(argmax(x, 3), doctest::Contains("argmax:"), kiln::Error);
  CHECK_THROWS_WITH_AS(argmin(x, -4), doctest::Contains("argmin:"), kiln::Error);
  CHECK_THROWS_WITH_AS(argmax(random({3}, kBool)), doctest::Contains("argmax: unsupported dtype bool"), kiln::Error);
  CHECK_THROWS_WITH_AS(argmin(random({3}, kBool), 0), doctest::Contains("argmin:"), kiln::Error);
  CHECK_THROWS_WITH_AS(sum(Tensor()), doctest::Contains("sum: argument 'input'"), kiln::Error);
  CHECK_THROWS_WITH_AS(argmax(Tensor(), 0), doctest::Contains("argmax:"), kiln::Error);
}

TEST_CASE("sums over the outer dims into a contiguous dim (a bias gradient) match float64 and the row sums' bits") {
  // Such sums add whole rows into one accumulator per output (ops/reduce_cpu.cpp), in the order
  // a row reduction of the transposed tensor uses: the results must match it bit for bit.
  manual_seed(406);
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = random({37, 41}, dtype);
    const Tensor by_rows = sum(x.t().contiguous(), {1});
    const Tensor by_columns = sum(x, {0});
    check_close(by_columns, reduce_ref(x, {0}, Red::Sum), {41});
    check_close(mean(x, {0}), reduce_ref(x, {0}, Red::Mean), {41});
    CHECK(equal(by_columns, by_rows));
    CHECK(equal(mean(x, {0}), mean(x.t().contiguous(), {1})));
    const Tensor y = random({3, 5, 40}, dtype);
    CHECK(equal(sum(y, {0, 1}), sum(y.permute({2, 0, 1}).contiguous(), {1, 2})));
    CHECK(equal(mean(y, {1, 0}, true).reshape({40}), mean(y.permute({2, 0, 1}).contiguous(), {1, 2})));
  }
  // An empty reduced dim: zeros for the sum, NaN for the mean, as before.
  const Tensor e = zeros({0, 16});
  CHECK(sum(e, {0}).to_vector<double>() == std::vector<double>(16, 0.0));
  CHECK(std::isnan(mean(e, {0}).to_vector<double>()[3]));
}
