// index_select, gather, scatter_ / scatter_add_ (and their copies) and embedding against
// float64 references written here from index arithmetic: every dtype, every layout of the
// data and of the index, duplicate indices, zero-size and 0-dim operands, and each error
// path (out-of-range index, wrong index dtype, shape mismatches, dim out of range).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const std::vector<DType> kAllTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};

/// Random int64 indices in [0, size).
Tensor random_index(const Shape& shape, int64_t size) { return random(shape, kInt64, 0, static_cast<double>(size)); }

/// The same index in another layout (same values): transposed storage or a strided slice.
Tensor index_in_layout(const Tensor& index, Layout layout) {
  if (index.numel() == 0 || index.dim() == 0) return index;
  switch (layout) {
    case Layout::Transposed:
      if (index.dim() < 2) return index;
      return index.transpose(-1, -2).contiguous().transpose(-1, -2);
    case Layout::Sliced: {
      Shape wide = index.sizes();
      wide.back() = 2 * wide.back();
      Tensor w = zeros(wide, kInt64);
      w.slice(-1, 0, wide.back(), 2).copy_(index);
      return w.slice(-1, 0, wide.back(), 2);
    }
    default: return index;
  }
}

// The position `idx` with its entry at `dim` replaced by `value`.
std::vector<int64_t> with_dim(std::vector<int64_t> idx, int64_t dim, int64_t value) {
  idx[static_cast<size_t>(dim)] = value;
  return idx;
}

std::vector<double> reference_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const std::vector<double> vx = values(x), vi = values(index);
  std::vector<double> r(vi.size());
  for (size_t p = 0; p < vi.size(); ++p) {
    const auto idx = unravel(static_cast<int64_t>(p), index.sizes());
    r[p] = vx[static_cast<size_t>(ravel(with_dim(idx, dim, static_cast<int64_t>(vi[p])), x.sizes()))];
  }
  return r;
}

// Scatter reference in row-major index order (so a later duplicate overwrites an earlier one,
// as the CPU kernel promises); `add` sums instead. src values come from `vs` at the same
// position of src's shape.
std::vector<double> reference_scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, bool add) {
  std::vector<double> r = values(x);
  const std::vector<double> vi = values(index), vs = values(src);
  for (size_t p = 0; p < vi.size(); ++p) {
    const auto idx = unravel(static_cast<int64_t>(p), index.sizes());
    const auto target = static_cast<size_t>(ravel(with_dim(idx, dim, static_cast<int64_t>(vi[p])), x.sizes()));
    const double v = vs[static_cast<size_t>(ravel(idx, src.sizes()))];
    r[target] = add ? r[target] + v : v;
  }
  return r;
}

Tolerance exact() { return {0, 0}; }

}  // namespace

TEST_CASE("index_select matches the reference for every dtype, layout, dim and index type") {
  manual_seed(301);
  const Shape shape{4, 5, 6};
  for (DType dtype : kAllTypes) {
    for (Layout layout : kLayouts) {
      for (int64_t dim : {0, 1, 2, -1}) {
        for (DType index_dtype : {kInt64, kInt32}) {
          CAPTURE(dtype_name(dtype));
          INFO("layout: " << std::string(layout_name(layout)));
          CAPTURE(dim);
          CAPTURE(dtype_name(index_dtype));
          const Tensor x = random_with_layout(shape, layout, dtype, -4, 4);
          const int64_t d = dim < 0 ? dim + 3 : dim;
          // 7 picks with repeats, read through a strided (every other element) index.
          const Tensor index = index_in_layout(random_index({7}, shape[d]), Layout::Sliced).to(index_dtype);
          const Tensor y = index_select(x, dim, index);
          CHECK(y.dtype() == dtype);
          Shape want_shape = shape;
          want_shape[d] = 7;
          // index_select is gather with the index broadcast along every other dim.
          Shape column{1, 1, 1};
          column[static_cast<size_t>(d)] = 7;
          const Tensor full_index = index.to(kInt64).view(column).expand(want_shape);
          check_close(y, reference_gather(x, d, full_index), want_shape, exact());
        }
      }
    }
  }
}

TEST_CASE("index_select: empty index, 0-dim index, 0-dim input, zero-size input") {
  manual_seed(302);
  const Tensor x = random({3, 4});
  CHECK(index_select(x, 1, zeros({0}, kInt64)).sizes() == Shape{3, 0});
  const Tensor one = index_select(x, 0, tensor(2));  // 0-dim index: one pick, dim kept
  CHECK(one.sizes() == Shape{1, 4});
  CHECK(equal(one, x.narrow(0, 2, 1)));
  const Tensor s = tensor(7.5);
  CHECK(index_select(s, 0, tensor({0})).dim() == 0);
  CHECK(index_select(s, 0, tensor({0})).item<double>() == 7.5);
  CHECK(index_select(zeros({0, 3}), 1, tensor({2, 0})).sizes() == Shape{0, 2});
}

TEST_CASE("gather matches the reference for every dtype, layout and dim, index larger than self at dim") {
  manual_seed(303);
  const Shape shape{4, 5, 6};
  for (DType dtype : kAllTypes) {
    for (Layout layout : kLayouts) {
      for (Layout index_layout : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
        for (int64_t dim : {0, 1, 2}) {
          CAPTURE(dtype_name(dtype));
          INFO("layout: " << std::string(layout_name(layout)));
          INFO("index_layout: " << std::string(layout_name(index_layout)));
          CAPTURE(dim);
          const Tensor x = random_with_layout(shape, layout, dtype, -4, 4);
          // Smaller than x outside dim, larger along it.
          Shape index_shape{3, 4, 5};
          index_shape[static_cast<size_t>(dim)] = 9;
          const int64_t size = shape[static_cast<size_t>(dim)];
          const Tensor index = index_in_layout(random_index(index_shape, size), index_layout);
          const Tensor y = gather(x, dim, index);
          CHECK(y.dtype() == dtype);
          check_close(y, reference_gather(x, dim, index), index_shape, exact());
        }
      }
    }
  }
}

TEST_CASE("gather: an expanded index, 0-dim and empty operands") {
  manual_seed(304);
  const Tensor x = random({3, 5});
  const Tensor index = tensor({{4}, {0}, {2}}).expand({3, 6});  // stride-0 index
  check_close(gather(x, 1, index), reference_gather(x, 1, index), {3, 6}, exact());
  CHECK(gather(tensor(2.5), 0, tensor(0)).item<double>() == 2.5);
  CHECK(gather(tensor(2.5), 0, tensor(0)).dim() == 0);
  const Tensor v = tensor({1.0, 2.0, 3.0});
  CHECK(gather(v, 0, tensor(2)).item<double>() == 3.0);  // a 0-dim index into a vector
  CHECK(gather(x, 0, zeros({0, 5}, kInt64)).sizes() == Shape{0, 5});
}

TEST_CASE("scatter_ and scatter match the reference, duplicates keep the last value in index order") {
  manual_seed(305);
  const Shape shape{4, 5, 6};
  for (DType dtype : kAllTypes) {
    for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
      for (Layout index_layout : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
        for (int64_t dim : {0, 1, 2}) {
          CAPTURE(dtype_name(dtype));
          INFO("layout: " << std::string(layout_name(layout)));
          INFO("index_layout: " << std::string(layout_name(index_layout)));
          CAPTURE(dim);
          Tensor x = random_with_layout(shape, layout, dtype, -4, 4);
          Shape index_shape{3, 4, 5};
          index_shape[static_cast<size_t>(dim)] = 8;  // more picks than slots: duplicates
          const int64_t size = shape[static_cast<size_t>(dim)];
          const Tensor index = index_in_layout(random_index(index_shape, size), index_layout);
          const Tensor src = random_with_layout({9, 9, 9}, layout, dtype, -4, 4);  // no smaller than index anywhere
          const std::vector<double> want = reference_scatter(x, dim, index, src, false);
          const std::vector<double> before = values(x);
          const Tensor copy = scatter(x, dim, index, src);
          CHECK(values(x) == before);  // the out-of-place form leaves x alone
          check_close(copy, want, shape, exact());
          Tensor& same = scatter_(x, dim, index, src);
          CHECK(same.is_same(x));
          check_close(x, want, shape, exact());
        }
      }
    }
  }
}

TEST_CASE("scatter_ of a number") {
  manual_seed(306);
  for (DType dtype : kAllTypes) {
    CAPTURE(dtype_name(dtype));
    Tensor x = random({3, 4}, dtype, -4, 4);
    const Tensor index = tensor({{0, 3}, {1, 1}});
    const std::vector<double> want = reference_scatter(x, 1, index, full({2, 2}, 1.75, kFloat64).to(dtype), false);
    check_close(scatter(x, 1, index, 1.75), want, {3, 4}, exact());
    scatter_(x, 1, index, 1.75);
    check_close(x, want, {3, 4}, exact());
  }
}

TEST_CASE("scatter_add_ sums duplicates: exact on eighths in every numeric dtype") {
  manual_seed(307);
  const Shape shape{4, 5, 6};
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
    for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
      for (int64_t dim : {0, 1, 2}) {
        CAPTURE(dtype_name(dtype));
        INFO("layout: " << std::string(layout_name(layout)));
        CAPTURE(dim);
        // Multiples of 1/8 below 2 in magnitude, a few per slot: every partial sum is exact
        // in each dtype, so the order of the additions cannot matter.
        Tensor x = random_eighths(shape, dtype);
        if (layout == Layout::Transposed) x = x.transpose(-1, -2).contiguous().transpose(-1, -2);
        Shape index_shape = shape;
        index_shape[static_cast<size_t>(dim)] = 2 * shape[static_cast<size_t>(dim)];
        const Tensor index =
            index_in_layout(random_index(index_shape, shape[static_cast<size_t>(dim)]), layout);
        const Tensor src = random_eighths(index_shape, dtype);
        const std::vector<double> want = reference_scatter(x, dim, index, src, true);
        check_close(scatter_add(x, dim, index, src), want, shape, exact());
        scatter_add_(x, dim, index, src);
        check_close(x, want, shape, exact());
      }
    }
  }
}

TEST_CASE("scatter_add_ on random values matches the float64 sum within the dtype's rounding") {
  manual_seed(308);
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    Tensor x = random({6, 7}, dtype);
    const Tensor index = random_index({40, 7}, 6);  // ~7 additions per element
    const Tensor src = random({40, 7}, dtype);
    const std::vector<double> want = reference_scatter(x, 0, index, src, true);
    // Each addition rounds once in the dtype, by at most half a unit of the partial sum,
    // whose magnitude is at most 2 * (adds + 1): that bound times the most adds into one
    // element, plus the dtype's own tolerance for the stored result.
    const std::vector<double> vi = values(index);
    std::vector<int> adds(6 * 7, 0);
    for (size_t p = 0; p < vi.size(); ++p) ++adds[static_cast<size_t>(vi[p]) * 7 + p % 7];
    const double most = *std::max_element(adds.begin(), adds.end());
    const double unit = std::ldexp(1.0, -significand_digits(dtype));
    Tolerance tol = tolerance(dtype);
    tol.atol += most * 2 * (most + 1) * unit;
    check_close(scatter_add_(x, 0, index, src), want, {6, 7}, tol);
  }
}

TEST_CASE("scatter_add_ on integers wraps on overflow without undefined behaviour") {
  Tensor a = tensor({std::numeric_limits<int64_t>::max(), int64_t{0}});
  scatter_add_(a, 0, tensor({0, 0}), tensor({int64_t{1}, int64_t{1}}));
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{std::numeric_limits<int64_t>::min() + 1, 0});
  Tensor b = tensor({std::numeric_limits<int32_t>::max()}, kInt32);
  scatter_add_(b, 0, tensor({0}), tensor({1}, kInt32));
  CHECK(b.to_vector<int32_t>() == std::vector<int32_t>{std::numeric_limits<int32_t>::min()});
}

TEST_CASE("scatter with aliasing operands reads them before writing") {
  // src is x itself: every read must see x's values from before the call.
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0});
  const std::vector<double> want = reference_scatter(x, 0, tensor({3, 2, 1, 0}), x.clone(), false);
  scatter_(x, 0, tensor({3, 2, 1, 0}), x);
  check_close(x, want, {4}, exact());
  // The index is a view of the target (int64 data scattered by its own values).
  Tensor t = tensor({1, 0, 3, 2});
  scatter_(t, 0, t, tensor({10, 11, 12, 13}));
  CHECK(t.to_vector<int64_t>() == std::vector<int64_t>{11, 10, 13, 12});
}

TEST_CASE("embedding picks rows for indices of any shape, dtype and layout") {
  manual_seed(309);
  for (DType dtype : kFloatTypes) {
    for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
      for (DType index_dtype : {kInt64, kInt32}) {
        CAPTURE(dtype_name(dtype));
        INFO("layout: " << std::string(layout_name(layout)));
        CAPTURE(dtype_name(index_dtype));
        const Tensor weight = random_with_layout({10, 4}, layout, dtype);
        const Tensor indices = index_in_layout(random_index({2, 3}, 10), layout).to(index_dtype);
        const Tensor y = embedding(weight, indices);
        CHECK(y.sizes() == Shape{2, 3, 4});
        CHECK(y.dtype() == dtype);
        const std::vector<double> w = values(weight), idx = values(indices);
        std::vector<double> want;
        for (double i : idx)
          for (int64_t c = 0; c < 4; ++c) want.push_back(w[static_cast<size_t>(static_cast<int64_t>(i) * 4 + c)]);
        check_close(y, want, {2, 3, 4}, exact());
      }
    }
  }
  const Tensor weight = random({5, 3});
  CHECK(equal(embedding(weight, tensor(4)), weight[4]));             // 0-dim indices: one row
  CHECK(embedding(weight, zeros({0, 2}, kInt64)).sizes() == Shape{0, 2, 3});
  CHECK(embedding(zeros({5, 0}), tensor({1, 2})).sizes() == Shape{2, 0});
}

TEST_CASE("out-of-range indices are errors naming the op, value, dim, size and position") {
  const Tensor x = arange(12).view({3, 4}).to(kFloat32);
  CHECK_THROWS_WITH_AS(index_select(x, 1, tensor({0, 4, 1})),
                       "index_select: index 4 is out of bounds for dimension 1 with size 4 (at position [1] of index)",
                       Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, tensor({-1})),
                       doctest::Contains("index_select: index -1 is out of bounds for dimension 0 with size 3"), Error);
  CHECK_THROWS_WITH_AS(gather(x, 1, tensor({{0, 1}, {2, 7}})),
                       "gather: index 7 is out of bounds for dimension 1 with size 4 (at position [1, 1] of index)",
                       Error);
  CHECK_THROWS_WITH_AS(embedding(x, tensor({{0, 1}, {3, 2}})),
                       "embedding: index 3 is out of bounds for dimension 0 with size 3 (at position [1, 0] of "
                       "indices)",
                       Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, tensor({{0, 3}}), ones({1, 2})),
                       doctest::Contains("scatter_add: index 3 is out of bounds for dimension 0 with size 3"), Error);
  // The first bad index in row-major order is reported; a failed scatter_ writes nothing.
  Tensor y = x.clone();
  CHECK_THROWS_WITH_AS(scatter_(y, 1, tensor({{0, 1, -2, 9}}), ones({1, 4})),
                       "scatter_: index -2 is out of bounds for dimension 1 with size 4 (at position [0, 2] of index)",
                       Error);
  CHECK(equal(y, x));
  CHECK_THROWS_WITH_AS(scatter_add_(y, 1, tensor({{0, 9}}), ones({1, 2})), doctest::Contains("scatter_add_: index 9"),
                       Error);
  CHECK_THROWS_WITH_AS(scatter_(y, 1, tensor({{5}}), 1.0), doctest::Contains("scatter_: index 5"), Error);
  CHECK(equal(y, x));
}

TEST_CASE("indexing errors: index dtype, dims, sizes, dim out of range, dtypes, layouts") {
  const Tensor x = ones({3, 4});
  // Index dtype: gather and scatter need int64, index_select and embedding take int32 too.
  CHECK_THROWS_WITH_AS(gather(x, 1, tensor({{0}}, kInt32)), "gather: expected an index of dtype int64, got int32",
                       Error);
  CHECK_THROWS_WITH_AS(index_select(x, 1, tensor({0.0})),
                       "index_select: expected an index of dtype int64 or int32, got float32", Error);
  CHECK_THROWS_WITH_AS(embedding(x, tensor({true})), "embedding: expected indices of dtype int64 or int32, got bool",
                       Error);
  Tensor y = x.clone();
  CHECK_THROWS_WITH_AS(scatter_(y, 0, tensor({{0}}, kFloat32), ones({1, 1})),
                       "scatter_: expected an index of dtype int64, got float32", Error);
  // Number of dims and sizes.
  CHECK_THROWS_WITH_AS(gather(x, 1, tensor({0, 1})),
                       "gather: index must have as many dimensions as self: index of shape [2], self of shape [3, 4]",
                       Error);
  CHECK_THROWS_WITH_AS(gather(x, 1, zeros({4, 2}, kInt64)),
                       "gather: index of shape [4, 2] is larger than self of shape [3, 4] at dimension 0 (4 > 3; index "
                       "may be larger than self only at dimension 1)",
                       Error);
  CHECK_THROWS_WITH_AS(scatter_(y, 0, zeros({2, 3}, kInt64), ones({2, 2})),
                       "scatter_: index of shape [2, 3] is larger than src of shape [2, 2] at dimension 1 (3 > 2)",
                       Error);
  CHECK_THROWS_WITH_AS(scatter_(y, 0, zeros({2, 5}, kInt64), ones({2, 5})),
                       doctest::Contains("scatter_: index of shape [2, 5] is larger than self of shape [3, 4]"), Error);
  CHECK_THROWS_WITH_AS(scatter_(y, 0, zeros({1, 1}, kInt64), ones({2})),
                       doctest::Contains("scatter_: src must have as many dimensions as self"), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, zeros({1, 1}, kInt64)),
                       "index_select: index must be a vector (1-D or 0-dim), got shape [1, 1]", Error);
  CHECK_THROWS_WITH_AS(index_select(tensor(1.0), 0, tensor({0, 0})),
                       doctest::Contains("index_select: an index into a 0-dim tensor must have exactly 1 value"),
                       Error);
  CHECK_THROWS_WITH_AS(embedding(ones({4}), tensor({0})),
                       doctest::Contains("embedding: expected a 2-D weight [num_embeddings, embedding_dim], got shape "
                                         "[4]"),
                       Error);
  // Dim out of range.
  CHECK_THROWS_WITH_AS(index_select(x, 2, tensor({0})), doctest::Contains("index_select: dim 2 is out of range"),
                       Error);
  CHECK_THROWS_WITH_AS(gather(x, -3, zeros({1, 1}, kInt64)), doctest::Contains("gather: dim -3 is out of range"),
                       Error);
  CHECK_THROWS_WITH_AS(scatter_add_(y, 5, zeros({1, 1}, kInt64), ones({1, 1})),
                       doctest::Contains("scatter_add_: dim 5 is out of range"), Error);
  // dtypes of src and self, bool sums.
  CHECK_THROWS_WITH_AS(scatter_(y, 0, zeros({1, 1}, kInt64), ones({1, 1}, kFloat64)),
                       "scatter_: expected self and src of the same dtype, got float32 and float64", Error);
  Tensor b = zeros({3}, kBool);
  CHECK_THROWS_WITH_AS(scatter_add_(b, 0, tensor({0}), ones({1}, kBool)),
                       doctest::Contains("scatter_add_: unsupported dtype bool"), Error);
  // An expanded target cannot be written in place.
  Tensor e = ones({1, 4}).expand({3, 4});
  CHECK_THROWS_WITH_AS(scatter_(e, 1, zeros({1, 1}, kInt64), 2.0),
                       doctest::Contains("scatter_: the tensor written to (shape [3, 4], strides [0, 1]) has elements "
                                         "that share memory"),
                       Error);
  // Undefined arguments.
  CHECK_THROWS_WITH_AS(gather(x, 0, Tensor()), "gather: argument 'index' is an undefined tensor", Error);
  CHECK(equal(y, x));  // nothing above wrote into y
}

TEST_CASE("method forms of the indexing ops") {
  manual_seed(310);
  const Tensor x = random({3, 4});
  const Tensor index = tensor({{1, 0, 2, 2}});
  CHECK(equal(x.index_select(1, tensor({3, 0})), index_select(x, 1, tensor({3, 0}))));
  CHECK(equal(x.gather(0, index), gather(x, 0, index)));
  CHECK(equal(x.scatter(0, index, ones({1, 4})), scatter(x, 0, index, ones({1, 4}))));
  CHECK(equal(x.scatter(0, index, 5), scatter(x, 0, index, 5)));
  CHECK(equal(x.scatter_add(0, index, ones({1, 4})), scatter_add(x, 0, index, ones({1, 4}))));
  Tensor a = x.clone(), b = x.clone();
  CHECK(&a.scatter_(0, index, ones({1, 4})) == &a);
  CHECK(equal(a, scatter_(b, 0, index, ones({1, 4}))));
  CHECK(equal(a.scatter_(0, index, 2.5), scatter_(b, 0, index, 2.5)));
  CHECK(equal(a.scatter_add_(0, index, ones({1, 4})), scatter_add_(b, 0, index, ones({1, 4}))));
}
