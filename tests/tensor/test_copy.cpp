// copy_ (broadcasting, dtype conversion, strided and aliasing destinations, its errors),
// item() and to_vector() on strided tensors. Expected values come from the inputs' values
// and hand-written index arithmetic, never from another copy.
#include <cmath>

#include "testing.h"

using namespace kiln;

TEST_CASE("copy_ broadcasts the source") {
  manual_seed(601);
  Tensor dst = zeros({2, 3});
  const Tensor src = testing::random({3});
  Tensor& ret = dst.copy_(src);
  CHECK(&ret == &dst);
  const std::vector<double> s = src.to_vector<double>(), d = dst.to_vector<double>();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(d[i * 3 + j] == s[j]);
  CHECK_FALSE(dst.is_alias_of(src));

  Tensor col = zeros({3, 4}, kFloat64);
  const Tensor c = testing::random({3, 1}, kFloat64);
  col.copy_(c);
  const std::vector<double> cv = c.to_vector<double>(), colv = col.to_vector<double>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) CHECK(colv[i * 4 + j] == cv[i]);

  Tensor many = zeros({2, 2, 2});
  many.copy_(full({}, -3.5));
  for (double v : many.to_vector<double>()) CHECK(v == -3.5);
  // Zero elements: nothing to do, but the shapes must still agree.
  Tensor empty_dst = zeros({0, 3});
  empty_dst.copy_(ones({3}));
  CHECK(empty_dst.numel() == 0);
}

TEST_CASE("copy_ converts to the destination's dtype") {
  Tensor i = zeros({5}, kInt32);
  i.copy_(from_vector<double>({1.9, -1.9, 2.5, -0.5, 1e10}, {5}));
  CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{1, -1, 2, 0, INT32_MIN});
  Tensor b = zeros({4}, kBool);
  b.copy_(from_vector<float>({0.0f, -0.25f, 3.0f, NAN}, {4}));
  CHECK(b.to_vector<bool>() == std::vector<bool>{false, true, true, true});
  Tensor h = zeros({3}, kFloat16);
  h.copy_(from_vector<int64_t>({2049, -7, 70000}, {3}));
  const std::vector<double> hv = h.to_vector<double>();
  CHECK(hv[0] == 2048.0);  // 2049 is halfway between halves 2048 and 2050: ties to even
  CHECK(hv[1] == -7.0);
  CHECK(hv[2] == INFINITY);
  Tensor f = zeros({2}, kFloat64);
  f.copy_(from_vector(std::vector<BFloat16>{BFloat16(0.1f), BFloat16(-3.0f)}, {2}));
  CHECK(f.to_vector<double>() == std::vector<double>{static_cast<float>(BFloat16(0.1f)), -3.0});
}

TEST_CASE("copy_ into a strided destination writes only its elements") {
  manual_seed(602);
  // Every other column of a wider tensor.
  Tensor base = full({4, 6}, 7.25);
  Tensor dst = base.slice(1, 1, 6, 2);
  const Tensor src = testing::random({4, 3});
  dst.copy_(src);
  const std::vector<double> s = src.to_vector<double>(), b = base.to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) CHECK(b[i * 6 + j] == (j % 2 == 1 ? s[i * 3 + j / 2] : 7.25));

  // A transposed destination.
  Tensor m = full({3, 4}, 7.25, kFloat64);
  const Tensor src2 = testing::random({4, 3}, kFloat64);
  m.t().copy_(src2);
  const std::vector<double> s2 = src2.to_vector<double>(), mv = m.to_vector<double>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) CHECK(mv[i * 4 + j] == s2[j * 3 + i]);

  // A row with an offset, from a strided source (a column of a wider tensor, offset 1).
  Tensor grid = full({3, 5}, 7.25);
  const Tensor srcm = testing::random({5, 2});
  const Tensor column = srcm.select(1, 1);
  REQUIRE(column.strides() == Shape{2});
  grid.select(0, 2).copy_(column);
  const std::vector<double> sv = srcm.to_vector<double>(), gv = grid.to_vector<double>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) CHECK(gv[i * 5 + j] == (i == 2 ? sv[j * 2 + 1] : 7.25));
}

TEST_CASE("copy_ from a source that overlaps the destination") {
  manual_seed(603);
  // Shift right by one inside the same storage: the result is as if src were read first.
  Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {6});
  x.narrow(0, 1, 5).copy_(x.narrow(0, 0, 5));
  CHECK(x.to_vector<double>() == std::vector<double>{1, 1, 2, 3, 4, 5});
  Tensor y = from_vector<double>({1, 2, 3, 4, 5, 6}, {6});
  y.narrow(0, 0, 5).copy_(y.narrow(0, 1, 5));
  CHECK(y.to_vector<double>() == std::vector<double>{2, 3, 4, 5, 6, 6});
  // In-place transpose of a square matrix.
  Tensor m = testing::random({4, 4});
  const std::vector<double> before = m.to_vector<double>();
  m.copy_(m.t());
  const std::vector<double> after = m.to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) CHECK(after[i * 4 + j] == before[j * 4 + i]);
  // Broadcast from one element of itself, across a dtype change of nothing.
  Tensor z = from_vector<float>({5, 6, 7}, {3});
  z.copy_(z.select(0, 2));
  CHECK(z.to_vector<float>() == std::vector<float>{7, 7, 7});
  // A tensor copied onto itself is unchanged.
  Tensor w = from_vector<int64_t>({3, -1, 4}, {3});
  w.copy_(w);
  CHECK(w.to_vector<int64_t>() == std::vector<int64_t>{3, -1, 4});
}

TEST_CASE("copy_ errors") {
  Tensor expanded = zeros({1, 3}).expand({2, 3});
  CHECK_THROWS_WITH_AS(expanded.copy_(ones({2, 3})),
                       "copy_: the destination (shape [2, 3], strides [0, 1]) has elements that share memory (an expanded "
                       "view); call clone() on it first",
                       Error);
  Tensor dst = zeros({2, 3});
  CHECK_THROWS_WITH_AS(dst.copy_(zeros({4})),
                       doctest::Contains("copy_: shapes [4] and [2, 3] cannot be broadcast together"), Error);
  CHECK_THROWS_WITH_AS(zeros({3}).copy_(zeros({2, 3})),
                       "copy_: source of shape [2, 3] cannot be broadcast to destination shape [3]", Error);
  CHECK_THROWS_WITH_AS(dst.copy_(Tensor()), doctest::Contains("copy_: argument 'src' is an undefined tensor"), Error);
  // The destination is untouched by a failed copy.
  for (double v : dst.to_vector<double>()) CHECK(v == 0.0);
  // Expanding a size-1 dim to size 1 is not sharing: allowed.
  Tensor one = zeros({1}).expand({1, 1});
  CHECK_NOTHROW(one.copy_(full({}, 2.0)));
  CHECK(one.item<double>() == 2.0);
}

TEST_CASE("item returns the single element as a Scalar of the right kind") {
  CHECK(full({}, 2.5).item().is_floating());
  CHECK(full({}, 2.5).item<double>() == 2.5);
  CHECK(full({}, 0.1, kFloat64).item<double>() == 0.1);
  CHECK(full({}, 0.1, kFloat16).item<double>() == static_cast<double>(static_cast<float>(Half(0.1f))));
  CHECK(full({}, 0.1, kBFloat16).item<double>() == static_cast<double>(static_cast<float>(BFloat16(0.1f))));
  const Scalar big = full({}, int64_t{1} << 62, kInt64).item();
  CHECK(big.is_integral());
  CHECK(big.to_int() == int64_t{1} << 62);
  CHECK(full({}, -7, kInt32).item().to_int() == -7);
  CHECK(full({}, -7, kInt32).item<int32_t>() == -7);
  const Scalar t = full({}, true, kBool).item();
  CHECK(t.is_bool());
  CHECK(t.to_bool());
  CHECK_FALSE(full({}, false, kBool).item<bool>());
  CHECK(full({}, NAN).item().is_floating());
  CHECK(std::isnan(full({}, NAN).item<double>()));
  // Any shape with one element, including views with offsets.
  CHECK(full({1, 1, 1}, 4.0).item<double>() == 4.0);
  const Tensor v = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(v.select(0, 1).select(0, 2).item<double>() == 6.0);
  CHECK(v.t().narrow(0, 1, 1).narrow(1, 1, 1).item<double>() == 5.0);
  // item<T> converts as a Scalar does.
  CHECK(full({}, -2.75).item<int64_t>() == -2);
  CHECK(full({}, 3, kInt64).item<double>() == 3.0);

  CHECK_THROWS_WITH_AS(zeros({2, 3}).item(), "item: a tensor with 6 elements (shape [2, 3]) cannot be converted to a Scalar",
                       Error);
  CHECK_THROWS_WITH_AS(zeros({0}).item(), doctest::Contains("item: a tensor with 0 elements (shape [0])"), Error);
  CHECK_THROWS_WITH_AS(zeros({2}).item<float>(), doctest::Contains("item: a tensor with 2 elements"), Error);
}

TEST_CASE("to_vector reads strided tensors in row-major logical order") {
  manual_seed(604);
  const Tensor x = from_vector<double>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  // Transposed: element (i, j) of x.t() is x[j][i] = 4 j + i.
  const std::vector<double> t = x.t().to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(t[i * 3 + j] == 4 * j + i);
  // Sliced with a step and an offset: columns 1 and 3.
  CHECK(x.slice(1, 1, 4, 2).to_vector<double>() == std::vector<double>{1, 3, 5, 7, 9, 11});
  // Expanded (stride 0).
  CHECK(x.select(1, 2).unsqueeze(0).expand({2, 3}).to_vector<double>() == std::vector<double>{2, 6, 10, 2, 6, 10});
  // Offset row.
  CHECK(x[2].to_vector<int64_t>() == std::vector<int64_t>{8, 9, 10, 11});
  // Permuted 3-D.
  const Tensor y = testing::random({2, 3, 4}, kFloat64);
  const std::vector<double> yv = y.to_vector<double>(), pv = y.permute({2, 0, 1}).to_vector<double>();
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 3; ++c) CHECK(pv[(a * 2 + b) * 3 + c] == yv[(b * 3 + c) * 4 + a]);
  // 0-dim and empty.
  CHECK(full({}, 1.25).to_vector<double>() == std::vector<double>{1.25});
  CHECK(zeros({0, 3}).t().to_vector<float>().empty());
  // Conversion on the way out.
  CHECK(from_vector<float>({1.5f, -1.5f, 0.0f}, {3}).to_vector<int32_t>() == std::vector<int32_t>{1, -1, 0});
  CHECK(from_vector<float>({1.5f, -1.5f, 0.0f}, {3}).to_vector<bool>() == std::vector<bool>{true, true, false});
  const std::vector<Half> hv = from_vector<float>({0.5f, 2.0f}, {2}).t().to_vector<Half>();
  CHECK(static_cast<float>(hv[0]) == 0.5f);
  CHECK(static_cast<float>(hv[1]) == 2.0f);
  // Reading does not change the tensor.
  CHECK(x.is_contiguous());
  CHECK(x.to_vector<double>()[5] == 5.0);
}
