// Reshaping and reordering views: view, reshape (view or copy), transpose, t, permute,
// movedim, flatten. Values are checked against the base through hand-written index maps,
// layouts against the sizes/strides/offset PyTorch gives, and writes must reach the base.
#include "view_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {
// The row-major flat position is what view/reshape/flatten preserve.
IndexMap same_flat(const Shape& view_sizes, const Shape& base_sizes) {
  return [=](const std::vector<int64_t>& idx) { return unravel(ravel(idx, view_sizes), base_sizes); };
}
}  // namespace

TEST_CASE("view of a contiguous tensor keeps the row-major order") {
  manual_seed(101);
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool}) {
    INFO("dtype " << dtype_name(dt));
    Tensor x = random_input({2, 3, 4}, dt);
    Tensor v = x.view({6, 4});
    CHECK(v.strides() == Shape{4, 1});
    CHECK(v.storage_offset() == 0);
    CHECK(v.data_ptr() == x.data_ptr());
    check_view_of(x, v, {6, 4}, same_flat({6, 4}, {2, 3, 4}));
  }
  Tensor x = random({2, 3, 4});
  check_view_of(x, x.view({-1, 4}), {6, 4}, same_flat({6, 4}, {2, 3, 4}));
  check_view_of(x, x.view({4, -1}), {4, 6}, same_flat({4, 6}, {2, 3, 4}));
  check_view_of(x, x.view({24}), {24}, same_flat({24}, {2, 3, 4}));
  check_view_of(x, x.view({2, 1, 12, 1}), {2, 1, 12, 1}, same_flat({2, 1, 12, 1}, {2, 3, 4}));
  CHECK(x.view({2, 1, 12, 1}).strides() == Shape{12, 12, 1, 1});
}

TEST_CASE("view of strided tensors: allowed where the memory permits") {
  manual_seed(102);
  // Every other column of [2, 6] is one stride-2 run.
  Tensor wide = random({2, 6});
  Tensor cols = wide.slice(1, 0, 6, 2);
  Tensor flat = cols.view({6});
  CHECK(flat.strides() == Shape{2});
  CHECK(flat.storage_offset() == 0);
  check_view_of(wide, flat, {6}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0] / 3, 2 * (i[0] % 3)}; });

  // A view of a tensor with a storage offset keeps the offset.
  Tensor base = random({4, 5});
  Tensor rows = base.narrow(0, 1, 2);  // rows 1 and 2, offset 5
  Tensor v = rows.view({5, 2});
  CHECK(v.storage_offset() == 5);
  CHECK(v.strides() == Shape{2, 1});
  check_view_of(base, v, {5, 2}, [](const std::vector<int64_t>& i) {
    const int64_t f = i[0] * 2 + i[1];
    return std::vector<int64_t>{1 + f / 5, f % 5};
  });

  // Splitting a dim of a transposed tensor.
  Tensor m = random({3, 4});
  Tensor split = m.t().view({2, 2, 3});  // m.t() is [4, 3] with strides [1, 4]
  CHECK(split.strides() == Shape{2, 1, 4});
  check_view_of(m, split, {2, 2, 3}, [](const std::vector<int64_t>& i) {
    return std::vector<int64_t>{i[2], i[0] * 2 + i[1]};  // t()[r][c] = m[c][r], r = 2*i0 + i1
  });
}

TEST_CASE("view refuses layouts that would need a copy") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH_AS(x.t().view({6}),
                       doctest::Contains("view: size [6] is not compatible with input tensor's size [3, 2] and stride "
                                         "[1, 3]"),
                       Error);
  CHECK_THROWS_WITH_AS(x.view({4}), doctest::Contains("view: shape [4] is invalid for input of size 6"), Error);
  CHECK_THROWS_WITH_AS(x.view({-1, -1}), doctest::Contains("view: only one dimension can be inferred"), Error);
  CHECK_THROWS_WITH_AS(zeros({2, 7}).slice(1, 0, 6, 2).view({6}), doctest::Contains("view: size [6] is not compatible"),
                       Error);
}

TEST_CASE("view of 0-dim and zero-size tensors") {
  manual_seed(103);
  Tensor s = random({});
  Tensor one = s.view({1, 1});
  CHECK(one.strides() == Shape{1, 1});
  check_view_of(s, one, {1, 1}, [](const std::vector<int64_t>&) { return std::vector<int64_t>{}; });
  Tensor back = random({1}).view({});
  CHECK(back.dim() == 0);
  CHECK(back.numel() == 1);

  Tensor e = zeros({0, 3});
  Tensor ev = e.view({3, 0});
  CHECK(ev.sizes() == Shape{3, 0});
  CHECK(ev.is_alias_of(e));
  CHECK(e.view({-1, 3}).sizes() == Shape{0, 3});
  CHECK(e.view({2, 0, 5}).numel() == 0);
  CHECK(ev.to_vector<double>().empty());
  CHECK_THROWS_WITH_AS(e.view({0, -1}), doctest::Contains("view: shape [0, -1] is invalid"), Error);
}

TEST_CASE("reshape views when it can and copies when it must") {
  manual_seed(104);
  Tensor x = random({3, 4});
  Tensor v = x.reshape({2, 6});
  CHECK(v.is_alias_of(x));
  CHECK(v.strides() == Shape{6, 1});
  check_view_of(x, v, {2, 6}, same_flat({2, 6}, {3, 4}));

  // A transposed tensor cannot be flattened in place: reshape copies.
  Tensor y = random({3, 4});
  const std::vector<double> yv = y.to_vector<double>();
  Tensor c = y.t().reshape({12});
  CHECK_FALSE(c.is_alias_of(y));
  CHECK(c.is_contiguous());
  const std::vector<double> cv = c.to_vector<double>();
  REQUIRE(cv.size() == 12);
  for (int64_t k = 0; k < 12; ++k) {
    // Row-major order of y.t(): element (r, col) of the [4, 3] transpose is y[col][r].
    const int64_t r = k / 3, col = k % 3;
    CHECK(cv[k] == yv[col * 4 + r]);
  }
  c.fill_(kSentinel);  // the copy is independent of y
  CHECK(y.to_vector<double>() == yv);

  // A sliced tensor that forms one stride run reshapes as a view.
  Tensor w = random({2, 6});
  Tensor r = w.slice(1, 0, 6, 2).reshape({3, 2});
  CHECK(r.is_alias_of(w));
  CHECK(r.strides() == Shape{4, 2});

  CHECK(x.reshape({-1}).sizes() == Shape{12});
  CHECK_THROWS_WITH_AS(x.reshape({5, -1}), doctest::Contains("reshape: shape [5, -1] is invalid for input of size 12"),
                       Error);
  CHECK(zeros({0, 4}).reshape({4, 0, 2}).sizes() == Shape{4, 0, 2});
  CHECK(random({}).reshape({1}).sizes() == Shape{1});
}

TEST_CASE("transpose swaps sizes and strides") {
  manual_seed(105);
  for (DType dt : {kFloat32, kFloat16, kInt64}) {
    INFO("dtype " << dtype_name(dt));
    Tensor x = random_input({2, 3, 4}, dt);
    Tensor t = x.transpose(0, 2);
    CHECK(t.strides() == Shape{1, 4, 12});
    CHECK_FALSE(t.is_contiguous());
    check_view_of(x, t, {4, 3, 2}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[2], i[1], i[0]}; });
  }
  Tensor x = random({2, 3, 4});
  Tensor t = x.transpose(-1, 1);
  CHECK(t.strides() == Shape{12, 1, 4});
  check_view_of(x, t, {2, 4, 3}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], i[2], i[1]}; });
  CHECK(x.transpose(1, 1).strides() == x.strides());

  // Transposing a slice keeps its offset.
  Tensor base = random({4, 5});
  Tensor sub = base.narrow(1, 2, 3).transpose(0, 1);
  CHECK(sub.storage_offset() == 2);
  CHECK(sub.strides() == Shape{1, 5});
  check_view_of(base, sub, {3, 4}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[1], i[0] + 2}; });

  // Zero-size and 0-dim.
  Tensor e = zeros({0, 3});
  CHECK(e.transpose(0, 1).sizes() == Shape{3, 0});
  CHECK(e.transpose(0, 1).strides() == Shape{1, 3});
  Tensor s = random({});
  CHECK(s.transpose(0, -1).dim() == 0);
  CHECK_THROWS_WITH_AS(x.transpose(0, 3), doctest::Contains("transpose: dim 3 is out of range for a 3-D tensor"), Error);
  CHECK_THROWS_WITH_AS(x.transpose(-4, 0), doctest::Contains("transpose: dim -4 is out of range"), Error);
}

TEST_CASE("t transposes matrices and leaves vectors and scalars alone") {
  manual_seed(106);
  Tensor m = random({2, 5});
  Tensor t = m.t();
  CHECK(t.strides() == Shape{1, 5});
  check_view_of(m, t, {5, 2}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[1], i[0]}; });
  Tensor v = random({4});
  check_view_of(v, v.t(), {4}, [](const std::vector<int64_t>& i) { return i; });
  Tensor s = random({});
  CHECK(s.t().dim() == 0);
  CHECK(s.t().is_alias_of(s));
  CHECK_THROWS_WITH_AS(random({2, 3, 4}).t(),
                       doctest::Contains("t: expects a tensor with <= 2 dimensions, but got a 3-D tensor of shape [2, 3, 4]"),
                       Error);
}

TEST_CASE("permute reorders every dim") {
  manual_seed(107);
  Tensor x = random({2, 3, 4});
  Tensor p = x.permute({2, 0, 1});
  CHECK(p.strides() == Shape{1, 12, 4});
  check_view_of(x, p, {4, 2, 3}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[1], i[2], i[0]}; });
  Tensor q = x.permute({-1, -3, 1});  // same permutation with negative dims
  CHECK(q.sizes() == Shape{4, 2, 3});
  CHECK(q.strides() == Shape{1, 12, 4});
  Tensor id = x.permute({0, 1, 2});
  CHECK(id.strides() == x.strides());
  CHECK(id.is_contiguous());

  // Permuting a permuted view composes the index maps.
  Tensor y = random({2, 3, 4});
  Tensor pp = y.permute({1, 2, 0}).permute({2, 0, 1});  // back to [2, 3, 4]
  CHECK(pp.strides() == y.strides());
  check_view_of(y, pp, {2, 3, 4}, [](const std::vector<int64_t>& i) { return i; });

  Tensor e = zeros({2, 0, 3});
  CHECK(e.permute({2, 1, 0}).sizes() == Shape{3, 0, 2});
  CHECK(random({}).permute({}).dim() == 0);

  CHECK_THROWS_WITH_AS(x.permute({0, 0, 1}), doctest::Contains("permute: dim 0 appears more than once in [0, 0, 1]"), Error);
  CHECK_THROWS_WITH_AS(x.permute({0, -3, 1}), doctest::Contains("permute: dim 0 appears more than once"), Error);
  CHECK_THROWS_WITH_AS(x.permute({1, 0}), doctest::Contains("permute: number of dims in the permutation (2) does not match "
                                                            "the tensor's dims (3)"),
                       Error);
  CHECK_THROWS_WITH_AS(x.permute({0, 1, 3}), doctest::Contains("permute: dim 3 is out of range"), Error);
}

TEST_CASE("movedim moves one dim and keeps the others in order") {
  manual_seed(108);
  Tensor x = random({2, 3, 4});
  Tensor a = x.movedim(0, 2);  // torch: (3, 4, 2)
  CHECK(a.strides() == Shape{4, 1, 12});
  check_view_of(x, a, {3, 4, 2}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[2], i[0], i[1]}; });
  Tensor b = x.movedim(-1, 0);  // torch: (4, 2, 3)
  CHECK(b.strides() == Shape{1, 12, 4});
  check_view_of(x, b, {4, 2, 3}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[1], i[2], i[0]}; });
  Tensor c = x.movedim(1, 1);
  CHECK(c.sizes() == x.sizes());
  CHECK(c.strides() == x.strides());
  Tensor d = random({2, 3, 4, 5}).movedim(1, -1);
  CHECK(d.sizes() == Shape{2, 4, 5, 3});
  CHECK(d.strides() == Shape{60, 5, 1, 20});
  CHECK(random({}).movedim(0, -1).dim() == 0);
  CHECK_THROWS_WITH_AS(x.movedim(3, 0), doctest::Contains("movedim: dim 3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(x.movedim(0, -4), doctest::Contains("movedim: dim -4 is out of range"), Error);
}

TEST_CASE("flatten merges a range of dims") {
  manual_seed(109);
  Tensor x = random({2, 3, 4});
  Tensor all = x.flatten();
  CHECK(all.is_alias_of(x));
  CHECK(all.strides() == Shape{1});
  check_view_of(x, all, {24}, same_flat({24}, {2, 3, 4}));
  check_view_of(x, x.flatten(1), {2, 12}, same_flat({2, 12}, {2, 3, 4}));
  check_view_of(x, x.flatten(0, 1), {6, 4}, same_flat({6, 4}, {2, 3, 4}));
  check_view_of(x, x.flatten(-2, -1), {2, 12}, same_flat({2, 12}, {2, 3, 4}));
  CHECK(x.flatten(1, 1).sizes() == x.sizes());

  // Flattening a transposed tensor copies, in the transposed (logical) order.
  Tensor y = random({3, 4});
  const std::vector<double> yv = y.to_vector<double>();
  Tensor f = y.t().flatten();
  CHECK_FALSE(f.is_alias_of(y));
  const std::vector<double> fv = f.to_vector<double>();
  REQUIRE(fv.size() == 12);
  for (int64_t k = 0; k < 12; ++k) CHECK(fv[k] == yv[(k % 3) * 4 + k / 3]);

  // Transposed inner dims that are not merged stay a view.
  Tensor z = random({5, 3, 4});
  Tensor g = z.transpose(1, 2).flatten(0, 0);
  CHECK(g.is_alias_of(z));

  Tensor s = random({});
  CHECK(s.flatten().sizes() == Shape{1});
  CHECK(s.flatten().item<double>() == s.item<double>());
  CHECK(s.flatten(0, -1).sizes() == Shape{1});
  CHECK_THROWS_WITH_AS(s.flatten(0, 1), doctest::Contains("flatten: dim 1 is out of range for a 0-D tensor"), Error);
  CHECK(zeros({2, 0, 3}).flatten().sizes() == Shape{0});
  CHECK(zeros({2, 0, 3}).flatten(0, 1).sizes() == Shape{0, 3});
  CHECK_THROWS_WITH_AS(x.flatten(2, 1), doctest::Contains("flatten: start_dim (2) cannot come after end_dim (1)"), Error);
  CHECK_THROWS_WITH_AS(x.flatten(0, 3), doctest::Contains("flatten: dim 3 is out of range"), Error);
}
