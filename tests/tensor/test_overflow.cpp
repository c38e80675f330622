// Size arithmetic that overflows int64 (tensor/shape.h's checked helpers): each shape below
// once wrapped its element count, byte count, stride or storage extent into a small or
// negative number, handing kernels a null or too-short buffer. Every one must now be a
// kiln::Error whose message names the op and the shape. Nothing here allocates more than a
// few bytes: the large shapes come from stride-0 views (expand) or are refused up front.
#include <cstdint>
#include <limits>

#include "testing.h"

using namespace kiln;

namespace {
constexpr int64_t k2to31 = int64_t{1} << 31;  // 2147483648
constexpr int64_t k2to32 = int64_t{1} << 32;  // 4294967296
constexpr int64_t k2to40 = int64_t{1} << 40;  // 1099511627776
constexpr int64_t k2to62 = int64_t{1} << 62;  // 4611686018427387904
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// A tensor of `sizes` that holds one element: zeros(1) expanded (no memory behind the size).
Tensor huge(const Shape& sizes) {
  Shape ones(sizes.size(), 1);
  return zeros(ones).expand(sizes);
}
}  // namespace

TEST_CASE("checked size helpers: products, sums, element counts, strides, extents") {
  int64_t r = 0;
  CHECK_FALSE(mul_overflows(k2to31, k2to31, &r));
  CHECK(r == k2to62);
  CHECK(mul_overflows(k2to32, k2to32, &r));
  CHECK(mul_overflows(-k2to32, k2to32, &r));
  CHECK(add_overflows(kMax, 1, &r));
  CHECK_FALSE(add_overflows(kMax - 1, 1, &r));
  CHECK(r == kMax);

  CHECK(checked_numel(Shape{k2to31, 2, 2}) == std::optional<int64_t>(int64_t{1} << 33));
  CHECK_FALSE(checked_numel(Shape{k2to32, k2to32}).has_value());
  // A zero size makes the shape empty however large the rest is (PyTorch's rule too).
  CHECK(checked_numel(Shape{k2to40, k2to40, 0}) == std::optional<int64_t>(0));
  CHECK(shape_numel({k2to40, 0, k2to40}) == 0);
  CHECK_THROWS_WITH_AS(shape_numel({k2to40, k2to40}, "myop"),
                       doctest::Contains("myop: shape [1099511627776, 1099511627776] has too many elements"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(
      checked_mul(k2to62, 4, "myop", Shape{3}),
      doctest::Contains("myop: size arithmetic for shape [3] overflows int64 (4611686018427387904 * 4)"), kiln::Error);
  CHECK_THROWS_WITH_AS(
      checked_add(kMax, 2, "myop", Shape{3}),
      doctest::Contains("myop: size arithmetic for shape [3] overflows int64 (9223372036854775807 + 2)"), kiln::Error);
  CHECK(checked_nbytes({k2to31}, k2to31, 8, "myop") == int64_t{1} << 34);
  CHECK_THROWS_WITH_AS(checked_nbytes({k2to62}, k2to62, 4, "myop"),
                       doctest::Contains("myop: shape [4611686018427387904] is too large"), kiln::Error);

  // The product past the outermost size is never a stride: [2^62, 2] has strides [2, 1].
  CHECK(contiguous_strides({k2to62, 2}) == Shape{2, 1});
  CHECK(contiguous_strides({k2to40, k2to40}) == Shape{k2to40, 1});
  // An empty shape's outer strides can still overflow.
  CHECK_THROWS_WITH_AS(contiguous_strides({0, k2to40, k2to40}, "myop"),
                       doctest::Contains("myop: the row-major strides of shape [0, 1099511627776, 1099511627776] "
                                         "overflow int64"),
                       kiln::Error);

  CHECK(storage_extent({2, 3}, {3, 1}, 5, "myop") == 11);
  CHECK(storage_extent({2, 0}, {kMax, kMax}, kMax, "myop") == 0);
  CHECK(storage_extent({1, 1}, {kMax, kMax}, kMax - 1, "myop") == kMax);
  CHECK_THROWS_WITH_AS(storage_extent({3}, {k2to62}, 0, "myop"),
                       doctest::Contains("myop: sizes [3] with strides [4611686018427387904] and offset 0 reach past "
                                         "the largest int64 element index"),
                       kiln::Error);
  CHECK_THROWS_AS(storage_extent({2}, {1}, kMax - 1, "myop"), kiln::Error);
  CHECK_NOTHROW(check_byte_strides({2}, {k2to62 / 2}, 2, "myop"));
  CHECK_THROWS_WITH_AS(
      check_byte_strides({2}, {k2to62}, 2, "myop"),
      doctest::Contains("myop: stride 4611686018427387904 of 2-byte elements overflows int64 in bytes"), kiln::Error);
}

TEST_CASE("factories refuse shapes whose byte count overflows") {
  // 2^62 float32 elements are 2^64 bytes: the count once wrapped to 0, with a null data
  // pointer that zeros and randn then wrote through.
  CHECK_THROWS_WITH_AS(empty({k2to62}), doctest::Contains("empty: shape [4611686018427387904] is too large"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(zeros({k2to62}), doctest::Contains("zeros: shape [4611686018427387904] is too large"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(ones({k2to62}, kInt32), doctest::Contains("ones: shape [4611686018427387904] is too large"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(randn({k2to62}), doctest::Contains("randn: shape [4611686018427387904] is too large"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(rand({2, k2to62 / 2}), doctest::Contains("rand: shape [2, 2305843009213693952] is too large"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(full({k2to31, k2to31}, 1.5),
                       doctest::Contains("full: shape [2147483648, 2147483648] is too large"), kiln::Error);
  // Too many elements to count at all.
  CHECK_THROWS_WITH_AS(empty({k2to32, k2to32}),
                       doctest::Contains("empty: shape [4294967296, 4294967296] has too many elements"), kiln::Error);
  CHECK_THROWS_WITH_AS(zeros({k2to40, k2to40, 2}),
                       doctest::Contains("zeros: shape [1099511627776, 1099511627776, 2] has too many elements"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(eye(2, kMax), doctest::Contains("eye: shape [2, 9223372036854775807]"), kiln::Error);
  // Empty shapes are fine however large their other sizes, unless a stride overflows.
  CHECK(empty({k2to40, 0, k2to40}).numel() == 0);
  CHECK(empty({k2to40, 0, k2to40}).strides() == Shape{k2to40, k2to40, 1});
  CHECK_THROWS_WITH_AS(empty({0, k2to40, k2to40}),
                       doctest::Contains("empty: the row-major strides of shape [0, 1099511627776, 1099511627776] "
                                         "overflow int64"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(empty({4, k2to62, 0}, kFloat64),
                       doctest::Contains("empty: stride 4611686018427387904 of 8-byte elements overflows int64 in "
                                         "bytes (sizes [4, 4611686018427387904, 0]"),
                       kiln::Error);
  // from_vector counts the shape's elements before comparing them with the values.
  const std::vector<float> values{1.0f, 2.0f};
  CHECK_THROWS_WITH_AS(from_vector(values, {k2to32, k2to32}),
                       doctest::Contains("from_vector: shape [4294967296, 4294967296] has too many elements"),
                       kiln::Error);
}

TEST_CASE("arange refuses lengths past int64") {
  // (end - start) / step = 1e30 once went through an undefined double -> int64 cast and
  // came back as a "negative dimension".
  CHECK_THROWS_WITH_AS(arange(0, 1e30), doctest::Contains("arange: start=0, end=1e+30, step=1 give 1e+30 elements"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(arange(-1e300, 1e300, 1e-300), doctest::Contains("arange: start=-1e+300"), kiln::Error);
  // Fits int64, but not in bytes.
  CHECK_THROWS_WITH_AS(arange(0.0, 0x1p62, 1.0), doctest::Contains("arange: shape [4611686018427387904] is too large"),
                       kiln::Error);
  // Values past int32's range wrap as PyTorch's (computed in int64, then narrowed), not
  // through an undefined double -> int32 cast.
  const Tensor t = arange(0, 4e9, 1e9, TensorOptions().dtype(kInt32));
  CHECK(t.to_vector<int64_t>() == std::vector<int64_t>{0, 1000000000, 2000000000, 3000000000LL - k2to32});
}

TEST_CASE("views refuse element counts, strides and extents that overflow") {
  // expand: stride-0 dims need no memory, but the element count must fit int64.
  CHECK_THROWS_WITH_AS(zeros({1}).expand({k2to32, k2to32}),
                       doctest::Contains("expand: shape [4294967296, 4294967296] has too many elements"), kiln::Error);
  CHECK_THROWS_WITH_AS(zeros({1, 1}).expand({k2to40, 2, k2to40}),
                       doctest::Contains("expand: shape [1099511627776, 2, 1099511627776] has too many elements"),
                       kiln::Error);
  const Tensor big = huge({k2to62});
  CHECK(big.numel() == k2to62);
  // ... and copying it needs 2^64 bytes: the copy once wrote through a null pointer.
  CHECK_THROWS_WITH_AS(big.contiguous(), doctest::Contains("contiguous: shape [4611686018427387904] is too large"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(big.clone(), doctest::Contains("clone: shape [4611686018427387904] is too large"), kiln::Error);

  // view / reshape: [2^62, 4] multiplies to 2^64, which wrapped to 0 and matched an empty
  // tensor's size.
  const Tensor e = zeros({0});
  CHECK_THROWS_WITH_AS(e.view({k2to62, 4}),
                       doctest::Contains("view: shape [4611686018427387904, 4] is invalid for input of size 0"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(e.reshape({k2to62, 4}),
                       doctest::Contains("reshape: shape [4611686018427387904, 4] is invalid for input of size 0"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(e.reshape({k2to62, 4, -1}), doctest::Contains("reshape: shape [4611686018427387904, 4, -1]"),
                       kiln::Error);
  CHECK(e.view({k2to62, 0, 4}).sizes() == Shape{k2to62, 0, 4});  // empty: no overflow
  CHECK_THROWS_WITH_AS(e.view({0, k2to40, k2to40}),
                       doctest::Contains("view: the row-major strides of shape [0, 1099511627776, 1099511627776]"),
                       kiln::Error);

  // as_strided: (3 - 1) * 2^62 wrapped to a negative extent, which passed the bounds check
  // and gave a view far outside the storage.
  const Tensor s = zeros({4});
  CHECK_THROWS_WITH_AS(s.as_strided({3}, {k2to62 / 4}, 0),
                       doctest::Contains("as_strided: sizes [3] strides [1152921504606846976] offset 0 reach element"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(s.as_strided({3}, {k2to62}, 0),
                       doctest::Contains("as_strided: stride 4611686018427387904 of 4-byte elements overflows int64 in "
                                         "bytes"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(zeros({4}, kBool).as_strided({3}, {k2to62}, 0),
                       doctest::Contains("as_strided: sizes [3] with strides [4611686018427387904] and offset 0 reach "
                                         "past the largest int64 element index"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(s.as_strided({k2to32, k2to32}, {0, 0}, 0),
                       doctest::Contains("as_strided: shape [4294967296, 4294967296] has too many elements"),
                       kiln::Error);
  CHECK(s.as_strided({2, 2}, {0, 1}, 2).sizes() == Shape{2, 2});

  // narrow: start + length once overflowed past the size check.
  CHECK_THROWS_WITH_AS(s.narrow(0, 2, kMax),
                       doctest::Contains("narrow: start (2) + length (9223372036854775807) "
                                         "exceeds dimension size (4)"),
                       kiln::Error);
  // slice: a step past the end leaves one element; step * stride would overflow (in bytes),
  // and a size-1 dim keeps a stride that does not.
  const Tensor v = arange(0, 4, 1, TensorOptions().dtype(kFloat32));
  const Tensor one = v.slice(0, 1, 4, kMax);
  CHECK(one.sizes() == Shape{1});
  CHECK(one.strides() == Shape{1});  // kMax fits, but not kMax * 4 bytes
  CHECK(one.item<float>() == 1.0f);
  CHECK(v.slice(0, 2, 4, k2to62).item<float>() == 2.0f);
  CHECK(v.slice(0, 0, 4, 2).strides() == Shape{2});  // PyTorch's stride where it fits
  CHECK(v.slice(0, 0, 2, 2).strides() == Shape{2});
  // unsqueeze of an empty view whose size times stride overflows: the new size-1 dim gets
  // a stride that fits.
  const Tensor odd = s.as_strided({0, k2to40}, {k2to40, k2to40}, 0);
  // slice of an empty view, stepping along a dim that keeps two elements: that stride
  // would reach past int64 bytes.
  CHECK_THROWS_WITH_AS(odd.slice(1, 0, k2to40, k2to40 / 2),
                       doctest::Contains("slice: stride 1099511627776 times step 549755813888 overflows int64 in bytes"),
                       kiln::Error);
  CHECK(odd.slice(1, 0, k2to40, k2to40).sizes() == Shape{0, 1});
  const Tensor u = odd.unsqueeze(1);
  CHECK(u.sizes() == Shape{0, 1, k2to40});
  CHECK(u.strides() == Shape{k2to40, 1, k2to40});
  CHECK(s.unsqueeze(0).strides() == Shape{4, 1});

  // flatten of an empty tensor whose merged sizes multiply past int64.
  const Tensor flat = empty({k2to40, k2to40, 0});
  CHECK_THROWS_WITH_AS(flat.flatten(0, 1),
                       doctest::Contains("flatten: shape [1099511627776, 1099511627776] has too many elements"),
                       kiln::Error);
  CHECK(flat.flatten(1, 2).sizes() == Shape{k2to40, 0});
}

TEST_CASE("from_blob refuses shapes, strides and spans that overflow") {
  float buf[4] = {1, 2, 3, 4};
  CHECK_THROWS_WITH_AS(from_blob(buf, {k2to40, k2to40}),
                       doctest::Contains("from_blob: shape [1099511627776, 1099511627776] has too many elements"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(from_blob(buf, {2, 2}, {k2to62, 1}),
                       doctest::Contains("from_blob: stride 4611686018427387904 of 4-byte elements overflows int64 in "
                                         "bytes (sizes [2, 2], strides [4611686018427387904, 1])"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(from_blob(buf, {3}, {k2to62}, TensorOptions().dtype(kBool)),
                       doctest::Contains("from_blob: sizes [3] with strides [4611686018427387904] and offset 0 reach "
                                         "past the largest int64 element index"),
                       kiln::Error);
  // Stride and span fit in elements and the stride in bytes; the span's 2^61 elements of 4
  // bytes do not.
  CHECK_THROWS_WITH_AS(from_blob(buf, {2}, {k2to62 / 2 - 1}), doctest::Contains("from_blob: shape [2] is too large"),
                       kiln::Error);
  const Tensor t = from_blob(buf, {2, 2}, {1, 2});
  CHECK(t.to_vector<float>() == std::vector<float>{1, 3, 2, 4});
}

TEST_CASE("joins, broadcasts and matmul refuse output shapes that overflow") {
  const Tensor big = huge({k2to62});
  CHECK_THROWS_WITH_AS(cat({big, big}), doctest::Contains("cat: the output's size in dimension 0 overflows int64"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(cat({big, zeros({3})}), doctest::Contains("cat: shape [4611686018427387907] is too large"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(stack({big, big}),
                       doctest::Contains("stack: 2 tensors of shape [4611686018427387904] stack to shape [2, "
                                         "4611686018427387904], which has too many elements"),
                       kiln::Error);

  // [2^32, 1] + [1, 2^32]: valid operands whose broadcast shape has 2^64 elements.
  const Tensor col = huge({k2to32, 1}), row = huge({1, k2to32});
  CHECK_THROWS_WITH_AS(col + row,
                       doctest::Contains("add: shapes [4294967296, 1] and [1, 4294967296] broadcast to shape "
                                         "[4294967296, 4294967296], which has too many elements"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(mul(col, row), doctest::Contains("mul: shapes [4294967296, 1] and [1, 4294967296]"),
                       kiln::Error);

  // matmul: the batch dims broadcast to 2^64 ...
  CHECK_THROWS_WITH_AS(matmul(huge({k2to32, 1, 2, 2}), huge({1, k2to32, 2, 2})),
                       doctest::Contains("matmul: a (shape [4294967296, 1, 2, 2]) and b (shape [1, 4294967296, 2, 2]) "
                                         "need a tensor of shape [4294967296, 4294967296, 2, 2], which has too "
                                         "many elements"),
                       kiln::Error);
  // ... or a's rows and columns times b's batch do.
  CHECK_THROWS_WITH_AS(matmul(huge({k2to31, k2to31}), huge({8, k2to31, 1})),
                       doctest::Contains("matmul: a (shape [2147483648, 2147483648]) and b (shape [8, 2147483648, 1]) "
                                         "need a tensor of shape [8, 2147483648, 2147483648]"),
                       kiln::Error);
  // The output alone: [2^31, 1] @ [1, 2^33] is 2^64 elements.
  CHECK_THROWS_WITH_AS(
      matmul(huge({k2to31, 1}), huge({1, int64_t{1} << 33})),
      doctest::Contains("matmul: a (shape [2147483648, 1]) and b (shape [1, 8589934592]) need a tensor "
                        "of shape [2147483648, 8589934592]"),
      kiln::Error);
}
