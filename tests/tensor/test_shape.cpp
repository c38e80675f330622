// Shape arithmetic (tensor/shape.h): the pure functions every view and op relies on. Expected
// strides are PyTorch's; view_strides() results are also checked by an independent property:
// every element must land on the same storage position as before the view.
#include "testing.h"

using namespace kiln;
using kiln::testing::unravel;

namespace {
// Storage position of row-major element `flat` of a (sizes, strides) layout.
int64_t position(int64_t flat, const Shape& sizes, const Shape& strides) {
  const auto idx = unravel(flat, sizes);
  int64_t p = 0;
  for (size_t d = 0; d < sizes.size(); ++d) p += idx[d] * strides[d];
  return p;
}

// True when viewing (sizes, strides) as (new_sizes, new_strides) keeps every element of
// the row-major order at its storage position.
bool same_elements(const Shape& sizes, const Shape& strides, const Shape& new_sizes, const Shape& new_strides) {
  const int64_t n = shape_numel(sizes);
  if (n != shape_numel(new_sizes)) return false;
  for (int64_t i = 0; i < n; ++i)
    if (position(i, sizes, strides) != position(i, new_sizes, new_strides)) return false;
  return true;
}
}  // namespace

TEST_CASE("shape_numel and shape_str") {
  CHECK(shape_numel({}) == 1);
  CHECK(shape_numel({7}) == 7);
  CHECK(shape_numel({2, 3, 4}) == 24);
  CHECK(shape_numel({2, 0, 3}) == 0);
  CHECK(shape_str(Shape{}) == "[]");
  CHECK(shape_str({5}) == "[5]");
  CHECK(shape_str({2, 3}) == "[2, 3]");
  CHECK(shape_str({-1, 0}) == "[-1, 0]");
}

TEST_CASE("contiguous_strides are row-major, size-0 dims counted as 1") {
  CHECK(contiguous_strides({}) == Shape{});
  CHECK(contiguous_strides({5}) == Shape{1});
  CHECK(contiguous_strides({2, 3, 4}) == Shape{12, 4, 1});
  CHECK(contiguous_strides({3, 1, 2}) == Shape{2, 2, 1});
  // torch.empty(2, 0, 3).stride() == (3, 3, 1)
  CHECK(contiguous_strides({2, 0, 3}) == Shape{3, 3, 1});
  CHECK(contiguous_strides({0}) == Shape{1});
  // A fresh tensor gets exactly these strides.
  CHECK(empty({4, 5, 6}).strides() == Shape{30, 6, 1});
}

TEST_CASE("strides_are_contiguous") {
  CHECK(strides_are_contiguous({}, {}));
  CHECK(strides_are_contiguous({2, 3}, {3, 1}));
  CHECK_FALSE(strides_are_contiguous({2, 3}, {1, 2}));  // transposed
  CHECK_FALSE(strides_are_contiguous({2, 3}, {6, 2}));  // every other column
  CHECK_FALSE(strides_are_contiguous({2, 3}, {0, 1}));  // expanded
  CHECK_FALSE(strides_are_contiguous({3}, {2}));
  // Size-1 dims may have any stride, as in PyTorch.
  CHECK(strides_are_contiguous({2, 1, 3}, {3, 100, 1}));
  CHECK(strides_are_contiguous({1}, {7}));
  CHECK(strides_are_contiguous({1, 1}, {0, 0}));
  CHECK(strides_are_contiguous({3, 1}, {1, 5}));
  // A tensor with no elements is contiguous whatever its strides.
  CHECK(strides_are_contiguous({0, 3}, {5, 7}));
  CHECK(strides_are_contiguous({3, 0}, {1, 3}));
  // Tensors report it.
  const Tensor x = zeros({2, 3});
  CHECK(x.is_contiguous());
  CHECK_FALSE(x.t().is_contiguous());
  CHECK(x.unsqueeze(1).is_contiguous());
}

TEST_CASE("wrap_dim maps negative dims and rejects out-of-range ones") {
  CHECK(wrap_dim(0, 3, "op") == 0);
  CHECK(wrap_dim(2, 3, "op") == 2);
  CHECK(wrap_dim(-1, 3, "op") == 2);
  CHECK(wrap_dim(-3, 3, "op") == 0);
  CHECK_THROWS_WITH_AS(wrap_dim(3, 3, "myop"),
                       doctest::Contains("myop: dim 3 is out of range for a 3-D tensor (expected a dim in [-3, 2])"),
                       Error);
  CHECK_THROWS_WITH_AS(wrap_dim(-4, 3, "myop"), doctest::Contains("myop: dim -4 is out of range"), Error);
  // A 0-dim tensor accepts -1 and 0, as in PyTorch.
  CHECK(wrap_dim(0, 0, "op") == 0);
  CHECK(wrap_dim(-1, 0, "op") == 0);
  CHECK_THROWS_WITH_AS(wrap_dim(1, 0, "sum"), doctest::Contains("sum: dim 1 is out of range for a 0-D tensor"), Error);
  CHECK_THROWS_WITH_AS(wrap_dim(-2, 0, "sum"), doctest::Contains("sum: dim -2 is out of range"), Error);
  // The message starts with the op name.
  try {
    wrap_dim(5, 2, "transpose");
    FAIL("wrap_dim accepted dim 5 of a 2-D tensor");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).rfind("transpose: ", 0) == 0);
  }
  // Tensor::size and stride use it.
  const Tensor x = zeros({2, 3, 4});
  CHECK(x.size(-1) == 4);
  CHECK(x.stride(-3) == 12);
  CHECK_THROWS_WITH_AS(x.size(3), doctest::Contains("size: dim 3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(x.stride(-4), doctest::Contains("stride: dim -4 is out of range"), Error);
  // A 0-dim tensor has no size or stride to give, even for the dims wrap_dim accepts.
  const Tensor s = zeros({});
  CHECK_THROWS_WITH_AS(s.size(0), "size: a 0-dim tensor has no dimensions (asked for dim 0)", Error);
  CHECK_THROWS_WITH_AS(s.size(-1), doctest::Contains("size: a 0-dim tensor has no dimensions"), Error);
  CHECK_THROWS_WITH_AS(s.stride(0), "stride: a 0-dim tensor has no dimensions (asked for dim 0)", Error);
}

TEST_CASE("broadcast_shapes aligns from the right") {
  CHECK(broadcast_shapes({2, 1, 3}, {4, 1}, "op") == Shape{2, 4, 3});
  CHECK(broadcast_shapes({4, 1}, {2, 1, 3}, "op") == Shape{2, 4, 3});
  CHECK(broadcast_shapes({}, {3}, "op") == Shape{3});
  CHECK(broadcast_shapes({}, {}, "op") == Shape{});
  CHECK(broadcast_shapes({5, 4}, {5, 4}, "op") == Shape{5, 4});
  CHECK(broadcast_shapes({1}, {0}, "op") == Shape{0});
  CHECK(broadcast_shapes({2, 0}, {1, 1}, "op") == Shape{2, 0});
  CHECK(broadcast_shapes({8, 1, 6, 1}, {7, 1, 5}, "op") == Shape{8, 7, 6, 5});
  CHECK_THROWS_WITH_AS(broadcast_shapes({2, 3}, {3, 3}, "add"),
                       doctest::Contains("add: shapes [2, 3] and [3, 3] cannot be broadcast together (dim -2: 2 vs 3)"),
                       Error);
  CHECK_THROWS_WITH_AS(broadcast_shapes({3}, {4}, "mul"),
                       doctest::Contains("mul: shapes [3] and [4] cannot be broadcast together (dim -1: 3 vs 4)"),
                       Error);
  // Size 0 broadcasts only with 1 or 0.
  CHECK_THROWS_WITH_AS(broadcast_shapes({0}, {2}, "sub"), doctest::Contains("sub: shapes [0] and [2]"), Error);
}

TEST_CASE("broadcast_strides gives stride 0 to expanded and new dims") {
  CHECK(broadcast_strides({3, 1}, {1, 1}, {2, 3, 4}) == Shape{0, 1, 0});
  CHECK(broadcast_strides({2, 3}, {3, 1}, {2, 3}) == Shape{3, 1});
  CHECK(broadcast_strides({}, {}, {2, 2}) == Shape{0, 0});
  CHECK(broadcast_strides({1, 4}, {4, 1}, {1, 4}) == Shape{4, 1});  // size 1 kept at 1 keeps its stride
}

TEST_CASE("infer_shape resolves one -1 and checks the element count") {
  CHECK(infer_shape({-1, 3}, 12, "view") == Shape{4, 3});
  CHECK(infer_shape({2, -1, 2}, 12, "view") == Shape{2, 3, 2});
  CHECK(infer_shape({-1}, 12, "view") == Shape{12});
  CHECK(infer_shape({3, 4}, 12, "view") == Shape{3, 4});
  CHECK(infer_shape({}, 1, "view") == Shape{});
  CHECK(infer_shape({-1}, 1, "view") == Shape{1});
  CHECK(infer_shape({-1}, 0, "view") == Shape{0});
  CHECK(infer_shape({-1, 5}, 0, "view") == Shape{0, 5});
  CHECK_THROWS_WITH_AS(infer_shape({-1, -1}, 12, "view"),
                       doctest::Contains("view: only one dimension can be inferred, got shape [-1, -1]"), Error);
  CHECK_THROWS_WITH_AS(infer_shape({5, 3}, 12, "reshape"),
                       doctest::Contains("reshape: shape [5, 3] is invalid for input of size 12"), Error);
  CHECK_THROWS_WITH_AS(infer_shape({-1, 5}, 12, "view"),
                       doctest::Contains("view: shape [-1, 5] is invalid for input of size 12"), Error);
  CHECK_THROWS_WITH_AS(infer_shape({}, 2, "view"), doctest::Contains("view: shape [] is invalid for input of size 2"),
                       Error);
  // With a 0 beside the -1 the inferred size is ambiguous; PyTorch refuses it too.
  CHECK_THROWS_WITH_AS(infer_shape({0, -1}, 0, "view"), doctest::Contains("view: shape [0, -1] is invalid"), Error);
  CHECK_THROWS_WITH_AS(infer_shape({-2, 6}, 12, "view"),
                       doctest::Contains("view: invalid shape dimension -2 in [-2, 6]"), Error);
}

TEST_CASE("view_strides on contiguous layouts") {
  struct Case {
    Shape sizes, strides, new_sizes, want;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4}, {12, 4, 1}, {6, 4}, {4, 1}},
      {{2, 3, 4}, {12, 4, 1}, {24}, {1}},
      {{2, 3, 4}, {12, 4, 1}, {2, 12}, {12, 1}},
      {{2, 3, 4}, {12, 4, 1}, {4, 3, 2}, {6, 2, 1}},
      {{2, 3, 4}, {12, 4, 1}, {1, 24, 1}, {24, 1, 1}},
      {{6}, {1}, {2, 1, 3}, {3, 3, 1}},
      // A size-1 dim with an arbitrary stride does not break contiguity.
      {{1, 3}, {100, 1}, {3}, {1}},
      // An offset base is irrelevant: strides only.
      {{4}, {3}, {2, 2}, {6, 3}},
  };
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.sizes));
    CAPTURE(shape_str(c.new_sizes));
    const auto got = view_strides(c.sizes, c.strides, c.new_sizes);
    REQUIRE(got.has_value());
    CHECK(*got == c.want);
    CHECK(same_elements(c.sizes, c.strides, c.new_sizes, *got));
  }
}

TEST_CASE("view_strides on non-contiguous layouts: possible and impossible views") {
  // t() of a 2x3 tensor: sizes [3, 2], strides [1, 3].
  CHECK_FALSE(view_strides({3, 2}, {1, 3}, {6}).has_value());
  CHECK_FALSE(view_strides({3, 2}, {1, 3}, {2, 3}).has_value());
  {
    // Adding size-1 dims is always possible: torch.empty(2, 3).t().view(3, 2, 1).stride() == (1, 3, 3).
    const auto st = view_strides({3, 2}, {1, 3}, {3, 2, 1});
    REQUIRE(st.has_value());
    CHECK(*st == Shape{1, 3, 3});
  }
  {
    // Splitting a dim of a transposed tensor keeps it strided: [4, 3] strides [1, 4] -> [2, 2, 3].
    const auto st = view_strides({4, 3}, {1, 4}, {2, 2, 3});
    REQUIRE(st.has_value());
    CHECK(*st == Shape{2, 1, 4});
    CHECK(same_elements({4, 3}, {1, 4}, {2, 2, 3}, *st));
  }
  {
    // Every other column of a [2, 6] tensor is a single stride-2 run: viewable as [6].
    const auto st = view_strides({2, 3}, {6, 2}, {6});
    REQUIRE(st.has_value());
    CHECK(*st == Shape{2});
  }
  // Every other column of a [2, 7] tensor is not.
  CHECK_FALSE(view_strides({2, 3}, {7, 2}, {6}).has_value());
  CHECK_FALSE(view_strides({2, 3}, {7, 2}, {3, 2}).has_value());
  {
    const auto st = view_strides({2, 3}, {7, 2}, {1, 2, 3, 1});
    REQUIRE(st.has_value());
    CHECK(same_elements({2, 3}, {7, 2}, {1, 2, 3, 1}, *st));
    CHECK((*st)[1] == 7);
    CHECK((*st)[2] == 2);
  }
  // Expanded dims (stride 0) cannot be merged with their neighbours.
  CHECK_FALSE(view_strides({2, 3}, {0, 1}, {6}).has_value());
  {
    // ...but a stride-0 dim can be split.
    const auto st = view_strides({4, 3}, {0, 1}, {2, 2, 3});
    REQUIRE(st.has_value());
    CHECK(*st == Shape{0, 0, 1});
  }
  // Permuted 3-D: [2, 3, 4] with dims 0 and 2 swapped in memory.
  CHECK_FALSE(view_strides({4, 3, 2}, {1, 4, 12}, {12, 2}).has_value());
  {
    const auto st = view_strides({4, 3, 2}, {1, 4, 12}, {2, 2, 3, 2});
    REQUIRE(st.has_value());
    CHECK(same_elements({4, 3, 2}, {1, 4, 12}, {2, 2, 3, 2}, *st));
  }
}

TEST_CASE("view_strides of 0-dim and zero-size shapes") {
  {
    const auto st = view_strides({}, {}, {1, 1});
    REQUIRE(st.has_value());
    CHECK(*st == Shape{1, 1});
  }
  {
    const auto st = view_strides({1, 1}, {5, 9}, {});
    REQUIRE(st.has_value());
    CHECK(st->empty());
  }
  {
    // Zero elements can be viewed as any other zero-element shape, with contiguous strides.
    const auto st = view_strides({0, 3}, {3, 1}, {3, 0, 2});
    REQUIRE(st.has_value());
    CHECK(*st == Shape{2, 2, 1});
  }
  {
    // Same shape: PyTorch keeps the old strides.
    const auto st = view_strides({3, 0}, {1, 3}, {3, 0});
    REQUIRE(st.has_value());
    CHECK(*st == Shape{1, 3});
  }
}
