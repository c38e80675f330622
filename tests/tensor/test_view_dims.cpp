// Views that add, drop or repeat dims without moving data: unsqueeze, squeeze, expand, and
// the raw as_strided. Strides are PyTorch's (including the strides it gives size-1 dims), and
// every view is checked against its base through hand-written index maps.
#include "view_testing.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("unsqueeze inserts a size-1 dim with PyTorch's stride") {
  manual_seed(301);
  Tensor x = random({2, 3});
  Tensor a = x.unsqueeze(0);
  CHECK(a.strides() == Shape{6, 3, 1});
  check_view_of(x, a, {1, 2, 3}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[1], i[2]}; });
  Tensor b = x.unsqueeze(1);
  CHECK(b.strides() == Shape{3, 3, 1});
  check_view_of(x, b, {2, 1, 3}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], i[2]}; });
  Tensor c = x.unsqueeze(2);
  CHECK(c.strides() == Shape{3, 1, 1});
  check_view_of(x, c, {2, 3, 1}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], i[1]}; });
  // Negative dims count in the result: -1 appends, -3 prepends.
  CHECK(x.unsqueeze(-1).sizes() == Shape{2, 3, 1});
  CHECK(x.unsqueeze(-3).sizes() == Shape{1, 2, 3});
  // Of a transposed tensor: the new stride is size * stride of the dim it precedes.
  Tensor t = random({2, 3}).t();  // [3, 2] strides [1, 3]
  CHECK(t.unsqueeze(1).strides() == Shape{1, 6, 3});
  CHECK(t.unsqueeze(0).strides() == Shape{3, 1, 3});
  // Of a 0-dim tensor.
  Tensor s = random({});
  Tensor s1 = s.unsqueeze(0);
  CHECK(s1.strides() == Shape{1});
  check_view_of(s, s1, {1}, [](const std::vector<int64_t>&) { return std::vector<int64_t>{}; });
  CHECK(s.unsqueeze(-1).sizes() == Shape{1});
  CHECK(zeros({0, 2}).unsqueeze(1).sizes() == Shape{0, 1, 2});
  CHECK_THROWS_WITH_AS(x.unsqueeze(3), doctest::Contains("unsqueeze: dim 3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(x.unsqueeze(3), doctest::Contains("(expected a dim in [-3, 2])"), Error);
  CHECK_THROWS_WITH_AS(x.unsqueeze(-4), doctest::Contains("unsqueeze: dim -4 is out of range"), Error);
  CHECK_THROWS_WITH_AS(s.unsqueeze(2), doctest::Contains("unsqueeze: dim 2 is out of range"), Error);
}

TEST_CASE("squeeze() removes every size-1 dim") {
  manual_seed(302);
  Tensor x = random({1, 3, 1, 2});
  Tensor s = x.squeeze();
  CHECK(s.strides() == Shape{2, 1});
  check_view_of(x, s, {3, 2}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{0, i[0], 0, i[1]}; });
  Tensor ones_shape = random({1, 1});
  Tensor s0 = ones_shape.squeeze();
  CHECK(s0.dim() == 0);
  check_view_of(ones_shape, s0, {}, [](const std::vector<int64_t>&) { return std::vector<int64_t>{0, 0}; });
  Tensor none = random({2, 3});
  CHECK(none.squeeze().sizes() == Shape{2, 3});
  CHECK(none.squeeze().is_alias_of(none));
  CHECK(zeros({1, 0, 1}).squeeze().sizes() == Shape{0});
  CHECK(random({}).squeeze().dim() == 0);
  // Of a strided view: the kept dims keep their strides and the offset.
  Tensor base = random({4, 6});
  Tensor col = base.narrow(1, 3, 1);  // [4, 1], offset 3
  Tensor sq = col.squeeze();
  CHECK(sq.strides() == Shape{6});
  CHECK(sq.storage_offset() == 3);
  check_view_of(base, sq, {4}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], 3}; });
}

TEST_CASE("squeeze(dim) removes only that dim, only if it has size 1") {
  manual_seed(303);
  Tensor x = random({1, 3, 1, 2});
  Tensor a = x.squeeze(2);
  CHECK(a.strides() == Shape{6, 2, 1});
  check_view_of(x, a, {1, 3, 2}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{0, i[1], 0, i[2]}; });
  Tensor b = x.squeeze(-4);
  CHECK(b.sizes() == Shape{3, 1, 2});
  Tensor c = x.squeeze(1);  // size 3: unchanged view
  CHECK(c.sizes() == x.sizes());
  CHECK(c.strides() == x.strides());
  CHECK(c.is_alias_of(x));
  Tensor s = random({});
  CHECK(s.squeeze(0).dim() == 0);
  CHECK(s.squeeze(-1).dim() == 0);
  CHECK(zeros({0, 1}).squeeze(0).sizes() == Shape{0, 1});
  CHECK(zeros({0, 1}).squeeze(1).sizes() == Shape{0});
  CHECK_THROWS_WITH_AS(x.squeeze(4), doctest::Contains("squeeze: dim 4 is out of range for a 4-D tensor"), Error);
  CHECK_THROWS_WITH_AS(s.squeeze(1), doctest::Contains("squeeze: dim 1 is out of range"), Error);
}

TEST_CASE("expand repeats size-1 dims with stride 0") {
  manual_seed(304);
  for (DType dt : {kFloat32, kFloat16, kInt32, kBool}) {
    INFO("dtype " << dtype_name(dt));
    Tensor x = random_input({3, 1}, dt);
    Tensor e = x.expand({3, 4});
    CHECK(e.strides() == Shape{1, 0});
    CHECK_FALSE(e.is_contiguous());
    check_view_of(x, e, {3, 4}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], 0}; });
  }
  Tensor x = random({3, 1});
  // -1 keeps a size.
  CHECK(x.expand({-1, 5}).sizes() == Shape{3, 5});
  CHECK(x.expand({-1, -1}).strides() == x.strides());
  // New leading dims get stride 0.
  Tensor lead = x.expand({2, 3, 4});
  CHECK(lead.strides() == Shape{0, 1, 0});
  check_view_of(x, lead, {2, 3, 4}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[1], 0}; });
  // ...except new size-1 leading dims, which PyTorch gives the stride of a dense outer dim:
  // torch.ones(3, 1).expand(1, 3, 4).stride() == (3, 1, 0).
  CHECK(x.expand({1, 3, 4}).strides() == Shape{3, 1, 0});
  CHECK(random({3}).expand({1, 1, 3}).strides() == Shape{3, 3, 1});
  CHECK(random({3}).expand({1, 2, 3}).strides() == Shape{0, 0, 1});  // torch: (0, 0, 1)
  CHECK(random({3}).expand({2, 1, 3}).strides() == Shape{0, 3, 1});  // torch: (0, 3, 1)
  // Expanding a 0-dim tensor.
  Tensor s = random({});
  Tensor se = s.expand({2, 3});
  CHECK(se.strides() == Shape{0, 0});
  CHECK(s.expand({1}).strides() == Shape{0});  // torch.tensor(1.).expand(1).stride() == (0,)
  CHECK(s.expand({1, 1}).strides() == Shape{0, 0});
  check_view_of(s, se, {2, 3}, [](const std::vector<int64_t>&) { return std::vector<int64_t>{}; });
  // Expanding an offset view keeps its offset.
  Tensor base = random({2, 5});
  Tensor cell = base.narrow(1, 4, 1);  // [2, 1] at offset 4
  Tensor ce = cell.expand({2, 3});
  CHECK(ce.storage_offset() == 4);
  CHECK(ce.strides() == Shape{5, 0});
  check_view_of(base, ce, {2, 3}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], 4}; });
  // Zero sizes: a size-1 dim may expand to 0.
  CHECK(random({1, 3}).expand({0, 3}).sizes() == Shape{0, 3});
  CHECK(zeros({0, 1}).expand({0, 4}).sizes() == Shape{0, 4});
  CHECK(zeros({0, 1}).expand({2, 0, 4}).sizes() == Shape{2, 0, 4});
  // expand_as.
  CHECK(x.expand_as(zeros({2, 3, 7})).sizes() == Shape{2, 3, 7});
}

TEST_CASE("expand errors") {
  Tensor x = zeros({3, 1});
  CHECK_THROWS_WITH_AS(x.expand({4, 4}),
                       doctest::Contains("expand: the expanded size of the tensor (4) must match the existing size (3) at "
                                         "non-singleton dimension 0"),
                       Error);
  CHECK_THROWS_WITH_AS(x.expand({4}), doctest::Contains("expand: the number of sizes provided (1) must be greater or equal "
                                                        "to the number of dimensions in the tensor (2)"),
                       Error);
  CHECK_THROWS_WITH_AS(x.expand({-1, 3, 4}),
                       doctest::Contains("expand: the expanded size -1 is not allowed in a leading, non-existing dimension 0"),
                       Error);
  CHECK_THROWS_WITH_AS(x.expand({3, -2}), doctest::Contains("expand: invalid size -2"), Error);
  CHECK_THROWS_WITH_AS(zeros({0}).expand({2}), doctest::Contains("expand: the expanded size of the tensor (2) must match "
                                                                 "the existing size (0)"),
                       Error);
}

TEST_CASE("as_strided builds any in-bounds layout over the storage") {
  manual_seed(305);
  Tensor x = random({6});  // storage position k holds element k
  Tensor a = x.as_strided({2, 2}, {1, 2}, 1);
  CHECK(a.strides() == Shape{1, 2});
  CHECK(a.storage_offset() == 1);
  check_view_of(x, a, {2, 2}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{1 + i[0] + 2 * i[1]}; });
  // Overlapping windows (a sliding window of 3 with step 1) read shared elements.
  Tensor w = x.as_strided({4, 3}, {1, 1}, 0);
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 3; ++c) CHECK(wv[r * 3 + c] == xv[r + c]);
  // The last element exactly.
  CHECK(x.as_strided({1}, {1}, 5).item<double>() == xv[5]);
  // Offsets are absolute in the storage, not relative to a view's offset.
  Tensor tail = x.narrow(0, 2, 4);
  Tensor abs = tail.as_strided({2}, {1}, 0);
  CHECK(abs.to_vector<double>() == std::vector<double>{xv[0], xv[1]});
  // 0-dim and empty views.
  CHECK(x.as_strided({}, {}, 3).item<double>() == xv[3]);
  CHECK(x.as_strided({0, 4}, {100, 100}, 6).numel() == 0);
  // 2-D base: as_strided over a [3, 4] storage gives the transpose.
  Tensor m = random({3, 4});
  Tensor mt = m.as_strided({4, 3}, {1, 4}, 0);
  check_view_of(m, mt, {4, 3}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[1], i[0]}; });
}

TEST_CASE("as_strided errors") {
  Tensor x = zeros({6});
  CHECK_THROWS_WITH_AS(x.as_strided({3}, {3}, 1),
                       doctest::Contains("as_strided: sizes [3] strides [3] offset 1 reach element 7, but the storage holds "
                                         "6 elements"),
                       Error);
  CHECK_THROWS_WITH_AS(x.as_strided({1}, {1}, 6), doctest::Contains("as_strided: sizes [1] strides [1] offset 6 reach element 6"),
                       Error);
  CHECK_THROWS_WITH_AS(x.as_strided({2}, {1, 1}, 0), doctest::Contains("as_strided: 1 sizes but 2 strides"), Error);
  CHECK_THROWS_WITH_AS(x.as_strided({2}, {1}, -1), doctest::Contains("as_strided: negative storage offset -1"), Error);
  CHECK_THROWS_WITH_AS(x.as_strided({2}, {-1}, 3), doctest::Contains("as_strided: negative size or stride"), Error);
  CHECK_THROWS_WITH_AS(x.as_strided({-2}, {1}, 0), doctest::Contains("as_strided: negative size or stride"), Error);
  // A narrow view does not widen the storage bound.
  CHECK_THROWS_WITH_AS(x.narrow(0, 0, 2).as_strided({7}, {1}, 0), doctest::Contains("as_strided: sizes [7]"), Error);
}
