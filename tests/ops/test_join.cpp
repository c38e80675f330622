// cat and stack: every dim (negative too), PyTorch's dtype promotion across the parts,
// strided parts, the legacy rule that skips 1-D empty tensors, zero-size parts, and error
// messages that name the offending tensor and sizes. Joining only moves (and converts)
// values, so results are compared exactly against an index-by-index float64 reference.
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr Tolerance kExact{0, 0};

const std::vector<DType> kAllTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool};

// float64 reference of cat: output element idx comes from the part whose range along `dim`
// holds idx[dim]; values are rounded to the output dtype as the conversion does.
std::vector<double> cat_ref(const std::vector<Tensor>& parts, int64_t dim, const Shape& out_shape, DType out_dtype) {
  std::vector<std::vector<double>> vals;
  for (const Tensor& p : parts) vals.push_back(values(p));
  std::vector<double> r(static_cast<size_t>(shape_numel(out_shape)));
  for (int64_t i = 0; i < shape_numel(out_shape); ++i) {
    std::vector<int64_t> idx = unravel(i, out_shape);
    int64_t pos = idx[dim];
    size_t k = 0;
    while (pos >= parts[k].sizes()[dim]) pos -= parts[k++].sizes()[dim];
    idx[dim] = pos;
    r[i] = round_to(vals[k][ravel(idx, parts[k].sizes())], out_dtype);
  }
  return r;
}

}  // namespace

TEST_CASE("cat along every dim, negative dims included") {
  manual_seed(21);
  for (DType dt : kAllTypes) {
    const Shape base{2, 3, 4};
    for (int64_t dim = -3; dim < 3; ++dim) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      std::vector<Tensor> parts;
      Shape out_shape = base;
      out_shape[d] = 0;
      for (int64_t n : {2, 1, 3}) {
        Shape s = base;
        s[d] = n;
        parts.push_back(random(s, dt));
        out_shape[d] += n;
      }
      INFO(dt, " dim ", dim);
      const Tensor out = cat(parts, dim);
      CHECK(out.dtype() == dt);
      check_close(out, cat_ref(parts, d, out_shape, dt), out_shape, kExact);
    }
    // A single part is a copy, not the input itself.
    const Tensor x = random({3, 2}, dt);
    const Tensor y = cat({x}, 1);
    CHECK_FALSE(y.is_alias_of(x));
    check_close(y, values(x), {3, 2}, kExact);
  }
}

TEST_CASE("cat promotes mixed dtypes as torch.cat does") {
  manual_seed(22);
  struct Case {
    DType a, b, out;
  };
  const std::vector<Case> cases = {
      {kInt32, kInt64, kInt64},    {kInt64, kFloat16, kFloat16},   {kFloat16, kBFloat16, kFloat32},
      {kBool, kInt32, kInt32},     {kFloat32, kFloat64, kFloat64}, {kBFloat16, kInt64, kBFloat16},
      {kBool, kFloat16, kFloat16}, {kFloat64, kInt32, kFloat64},
  };
  for (const Case& c : cases) {
    const std::vector<Tensor> parts = {random({2, 3}, c.a), random({4, 3}, c.b), random({1, 3}, c.a)};
    INFO(c.a, " + ", c.b);
    const Tensor out = cat(parts, 0);
    CHECK(out.dtype() == c.out);
    check_close(out, cat_ref(parts, 0, {7, 3}, c.out), {7, 3}, kExact);
    const Tensor swapped = cat({parts[1], parts[0]}, 0);
    CHECK(swapped.dtype() == c.out);
  }
}

TEST_CASE("cat reads transposed, sliced and expanded parts") {
  manual_seed(23);
  for (DType dt : {kFloat32, kFloat16, kInt64})
    for (Layout la : kLayouts)
      for (Layout lb : kLayouts)
        for (int64_t dim : {0, 1, -1}) {
          const int64_t d = dim < 0 ? dim + 3 : dim;
          Shape sa{3, 4, 5}, sb{3, 4, 5};
          sb[d] = 2;
          const std::vector<Tensor> parts = {random_with_layout(sa, la, dt), random_with_layout(sb, lb, dt)};
          Shape out_shape = sa;
          out_shape[d] += 2;
          INFO(dt, " ", layout_name(la), " + ", layout_name(lb), " dim ", dim);
          check_close(cat(parts, dim), cat_ref(parts, d, out_shape, dt), out_shape, kExact);
        }
}

TEST_CASE("cat skips legacy 1-D empty tensors and keeps zero-size parts") {
  manual_seed(24);
  const Tensor x = random({2, 3}), y = random({2, 4});
  // [0] tensors are skipped whatever the dim and rank of the others...
  for (const std::vector<Tensor>& parts : {std::vector<Tensor>{empty({0}), x, y}, std::vector<Tensor>{x, empty({0}), y},
                                           std::vector<Tensor>{x, y, empty({0})}}) {
    const Tensor out = cat(parts, 1);
    std::vector<Tensor> kept = {x, y};
    check_close(out, cat_ref(kept, 1, {2, 7}, kFloat32), {2, 7}, kExact);
  }
  CHECK(cat({empty({0}), x}, -1).sizes() == Shape{2, 3});
  // ...but still take part in type promotion, as in torch.cat.
  const Tensor xi = random({2, 3}, kInt64);
  const Tensor promoted = cat({empty({0}, kFloat64), xi}, 0);
  CHECK(promoted.dtype() == kFloat64);
  check_close(promoted, values(xi), {2, 3}, kExact);
  // Only empties: the result is empty too.
  CHECK(cat({empty({0}), empty({0})}).sizes() == Shape{0});
  // A 1-D [0] with 1-D parts is an ordinary zero-size part.
  const Tensor v = random({5});
  check_close(cat({v, empty({0}), v}), cat_ref({v, v}, 0, {10}, kFloat32), {10}, kExact);
  // Zero-size parts of full rank contribute nothing but must still match the other dims.
  const Tensor z = random({2, 0}), a = random({2, 2}), b = random({0, 2});
  check_close(cat({z, a, z}, 1), values(a), {2, 2}, kExact);
  check_close(cat({b, a, b}, 0), values(a), {2, 2}, kExact);
  CHECK(cat({random({0, 3}), random({0, 3})}, 0).sizes() == Shape{0, 3});
  CHECK(cat({random({2, 0, 3}), random({2, 0, 3})}, 2).sizes() == Shape{2, 0, 6});
}

TEST_CASE("cat errors") {
  manual_seed(25);
  CHECK_THROWS_WITH_AS(cat({}), doctest::Contains("cat: expected a non-empty list of tensors"), kiln::Error);
  CHECK_THROWS_WITH_AS(cat({random({2, 3}), random({2, 3, 1})}),
                       doctest::Contains("cat: tensors must have the same number of dimensions: tensor 0 has shape [2, "
                                         "3] but tensor 1 has shape [2, 3, 1]"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(cat({random({2, 3}), random({2, 4})}, 0),
                       doctest::Contains("cat: sizes of tensors must match except in dimension 0: expected size 3 but "
                                         "got size 4 for tensor 1 in dimension 1 (shapes [2, 3] and [2, 4])"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(cat({random({2, 3}), random({2, 3}), random({5, 3})}, 1),
                       doctest::Contains("cat: sizes of tensors must match except in dimension 1: expected size 2 but "
                                         "got size 5 for tensor 2 in dimension 0"),
                       kiln::Error);
  // The legacy-empty skip must not hide a real mismatch, and names the right tensors.
  CHECK_THROWS_WITH_AS(cat({empty({0}), random({2, 3}), random({2, 3, 1})}),
                       doctest::Contains("cat: tensors must have the same number of dimensions: tensor 1 has shape [2, "
                                         "3] but tensor 2 has shape [2, 3, 1]"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(cat({random({3}), random({})}), doctest::Contains("cat: tensors must have the same number"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(cat({random({}), random({})}),
                       doctest::Contains("cat: zero-dimensional tensor cannot be concatenated"), kiln::Error);
  CHECK_THROWS_WITH_AS(cat({random({2, 3}), random({2, 3})}, 2),
                       doctest::Contains("cat: dim 2 is out of range for a 2-D tensor"), kiln::Error);
  CHECK_THROWS_WITH_AS(cat({random({2, 3}), random({2, 3})}, -3),
                       doctest::Contains("cat: dim -3 is out of range for a 2-D tensor"), kiln::Error);
  CHECK_THROWS_WITH_AS(cat({random({2, 3}), Tensor()}), doctest::Contains("cat: tensor 1 of the list is undefined"),
                       kiln::Error);
}

TEST_CASE("stack along every dim, negative dims included") {
  manual_seed(26);
  for (DType dt : kAllTypes) {
    const std::vector<Tensor> parts = {random({3, 4}, dt), random_with_layout({3, 4}, Layout::Transposed, dt),
                                       random_with_layout({3, 4}, Layout::Sliced, dt)};
    const std::vector<std::vector<double>> vals = {values(parts[0]), values(parts[1]), values(parts[2])};
    for (int64_t dim = -3; dim < 3; ++dim) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Shape out_shape{3, 4};
      out_shape.insert(out_shape.begin() + d, 3);
      // out[..., k (at d), ...] = parts[k][...].
      std::vector<double> expect(static_cast<size_t>(shape_numel(out_shape)));
      for (int64_t i = 0; i < shape_numel(out_shape); ++i) {
        std::vector<int64_t> idx = unravel(i, out_shape);
        const int64_t k = idx[d];
        idx.erase(idx.begin() + d);
        expect[i] = vals[k][ravel(idx, {3, 4})];
      }
      INFO(dt, " dim ", dim);
      const Tensor out = stack(parts, dim);
      CHECK(out.dtype() == dt);
      check_close(out, expect, out_shape, kExact);
    }
  }
  // 0-dim parts stack into a vector; 1-D into rows; mixed dtypes promote.
  const Tensor s0 = random({}), s1 = random({});
  check_close(stack({s0, s1}), {values(s0)[0], values(s1)[0]}, {2}, kExact);
  const Tensor i = random({4}, kInt32), f = random({4}, kFloat64);
  const Tensor mixed = stack({i, f}, 1);
  CHECK(mixed.dtype() == kFloat64);
  std::vector<double> expect;
  for (int64_t k = 0; k < 4; ++k) {
    expect.push_back(values(i)[k]);
    expect.push_back(values(f)[k]);
  }
  check_close(mixed, expect, {4, 2}, kExact);
}

TEST_CASE("stack errors") {
  manual_seed(27);
  CHECK_THROWS_WITH_AS(stack({}), doctest::Contains("stack: expected a non-empty list of tensors"), kiln::Error);
  CHECK_THROWS_WITH_AS(stack({random({2, 3}), random({2, 3}), random({3, 2})}),
                       doctest::Contains("stack: expects each tensor to be equal size, but got [2, 3] at entry 0 and "
                                         "[3, 2] at entry 2"),
                       kiln::Error);
  // A legacy empty is not special for stack.
  CHECK_THROWS_WITH_AS(stack({empty({0}), random({2})}),
                       doctest::Contains("stack: expects each tensor to be equal size, but got [0] at entry 0 and [2] "
                                         "at entry 1"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(stack({random({2, 3}), random({2, 3})}, 3),
                       doctest::Contains("stack: dim 3 is out of range for a 3-D tensor"), kiln::Error);
  CHECK_THROWS_WITH_AS(stack({random({2, 3}), random({2, 3})}, -4),
                       doctest::Contains("stack: dim -4 is out of range for a 3-D tensor"), kiln::Error);
  CHECK_THROWS_WITH_AS(stack({random({2}), Tensor()}), doctest::Contains("stack: tensor 1 of the list is undefined"),
                       kiln::Error);
}
