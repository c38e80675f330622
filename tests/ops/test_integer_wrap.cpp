// Integer arithmetic at the edges of int32/int64, on the CPU: results wrap modulo 2^32 or
// 2^64 as PyTorch's do (two's complement), computed without signed overflow, which C++
// leaves undefined (ops/wrapping.h). Expected values are worked out by hand, in the comments
// where the wrap is not obvious. tests/cuda/test_integer_wrap.cpp runs the same calls on the
// GPU against these CPU results.
#include <cstdint>
#include <limits>

#include "testing.h"

using namespace kiln;

namespace {
constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();

Tensor i64(std::vector<int64_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return from_vector(v, {n});
}
Tensor i32(std::vector<int32_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return from_vector(v, {n});
}
std::vector<int64_t> vals(const Tensor& t) { return t.to_vector<int64_t>(); }
}  // namespace

TEST_CASE("integer add, sub and mul wrap") {
  // INT64_MAX + 1 = INT64_MIN and back.
  CHECK(vals(add(i64({kMax64, kMin64, 5}), i64({1, -1, -7}))) == std::vector<int64_t>{kMin64, kMax64, -2});
  CHECK(vals(i64({kMax64}) + 1) == std::vector<int64_t>{kMin64});
  CHECK(vals(kMax64 + i64({2})) == std::vector<int64_t>{kMin64 + 1});
  CHECK(vals(sub(i64({kMin64, kMax64}), i64({1, -1}))) == std::vector<int64_t>{kMax64, kMin64});
  CHECK(vals(i64({kMin64}) - 1) == std::vector<int64_t>{kMax64});
  CHECK(vals(0 - i64({kMin64})) == std::vector<int64_t>{kMin64});
  // int32: INT32_MAX + 1, INT32_MIN - 1.
  CHECK(vals(add(i32({kMax32, 7}), i32({1, 8}))) == std::vector<int64_t>{kMin32, 15});
  CHECK(vals(sub(i32({kMin32}), i32({1}))) == std::vector<int64_t>{kMax32});
  CHECK(add(i32({1}), i32({2})).dtype() == kInt32);

  // (1 << 20) * (1 << 20) = 2^40 = 0 mod 2^32; 65536 * 65537 = 2^32 + 65536;
  // 46341^2 = 2147488281 = 2^31 + 4633 -> -2147479015.
  CHECK(vals(mul(i32({1 << 20, 65536, 46341, -3}), i32({1 << 20, 65537, 46341, 5}))) ==
        std::vector<int64_t>{0, 65536, -2147479015, -15});
  // INT64_MAX * 2 = 2^64 - 2 -> -2; INT64_MIN * -1 = INT64_MIN; 2^32 * 2^32 = 0.
  CHECK(vals(mul(i64({kMax64, kMin64, int64_t{1} << 32}), i64({2, -1, int64_t{1} << 32}))) ==
        std::vector<int64_t>{-2, kMin64, 0});
  CHECK(vals(i64({kMin64}) * -1) == std::vector<int64_t>{kMin64});
  // Broadcast and strided operands take the same path.
  const Tensor col = i64({kMax64, 1}).view({2, 1});
  CHECK(vals(col + i64({1, 2})) == std::vector<int64_t>{kMin64, kMin64 + 1, 2, 3});
  CHECK(vals(i64({kMax64, 0, kMax64}).slice(0, 0, 3, 2) * 2) == std::vector<int64_t>{-2, -2});
}

TEST_CASE("integer add and sub with alpha wrap") {
  const int64_t p62 = int64_t{1} << 62;
  // INT64_MAX + 2 * 2^62: 2 * 2^62 = 2^63 wraps to INT64_MIN, and INT64_MAX + INT64_MIN = -1.
  CHECK(vals(add(i64({kMax64, 5}), i64({p62, 3}), 2)) == std::vector<int64_t>{-1, 11});
  // 0 - 3 * 2^62: 3 * 2^62 = 2^64 - 2^62 -> -2^62, and 0 - (-2^62) = 2^62.
  CHECK(vals(sub(i64({0, 5}), i64({p62, 3}), 3)) == std::vector<int64_t>{p62, -4});
  // A number operand with alpha: 1 + INT64_MAX * 1 and 1 - 2 * INT64_MIN (= 1 - 0).
  CHECK(vals(add(i64({1}), kMax64, 1)) == std::vector<int64_t>{kMin64});
  CHECK(vals(sub(i64({1}), kMin64, 2)) == std::vector<int64_t>{1});
  // int32: 1 + 2^30 * 4 = 1 + 2^32 -> 1; INT32_MAX - (-1) * 1.
  CHECK(vals(add(i32({1, 0}), i32({1 << 30, -1}), 4)) == std::vector<int64_t>{1, -4});
  CHECK(vals(sub(i32({kMax32}), i32({-1}), 1)) == std::vector<int64_t>{kMin32});
}

TEST_CASE("integer neg and abs wrap at the minimum") {
  CHECK(vals(neg(i64({kMin64, kMax64, 0, -3}))) == std::vector<int64_t>{kMin64, -kMax64, 0, 3});
  CHECK(vals(-i64({kMin64})) == std::vector<int64_t>{kMin64});
  CHECK(vals(neg(i32({kMin32, 7}))) == std::vector<int64_t>{kMin32, -7});
  CHECK(vals(abs(i64({kMin64, -kMax64, -1, 4}))) == std::vector<int64_t>{kMin64, kMax64, 1, 4});
  CHECK(vals(abs(i32({kMin32, -5}))) == std::vector<int64_t>{kMin32, 5});
}

TEST_CASE("integer sums wrap modulo 2^64") {
  CHECK(sum(i64({kMax64, 1})).item<int64_t>() == kMin64);
  // 3 * (2^63 - 1) = 2^64 + 2^63 - 3 -> 2^63 - 3.
  CHECK(sum(i64({kMax64, kMax64, kMax64})).item<int64_t>() == kMax64 - 2);
  CHECK(sum(i64({kMin64, kMin64})).item<int64_t>() == 0);
  CHECK(sum(i64({kMin64, -1})).item<int64_t>() == kMax64);
  // Per row, over a strided (transposed) view.
  const Tensor m = i64({kMax64, kMax64, 1, 2, 3, kMin64}).view({3, 2}).t();  // rows {MAX, 1, 3}, {MAX, 2, MIN}
  CHECK(vals(sum(m, {1})) == std::vector<int64_t>{kMin64 + 3, 1});
  // int32 sums accumulate (and return) int64: no wrap at 2^31.
  const Tensor s32 = sum(i32({kMax32, kMax32, kMax32}));
  CHECK(s32.dtype() == kInt64);
  CHECK(s32.item<int64_t>() == 3 * int64_t{kMax32});
  // Many elements: 2^20 copies of 2^44 is 2^64 -> 0; plus one more 2^44.
  const Tensor many = full({(int64_t{1} << 20) + 1}, int64_t{1} << 44);
  CHECK(sum(many).item<int64_t>() == int64_t{1} << 44);
}

TEST_CASE("integer pow: exact where the result fits, wrapping where it does not") {
  // 3^39 and 2^62 fit int64; computing them once squared the base past 2^63 after the last
  // exponent bit.
  CHECK(vals(pow(i64({3, 2, 2, -2, -3}), i64({39, 62, 63, 63, 39}))) ==
        std::vector<int64_t>{4052555153018976267, int64_t{1} << 62, kMin64, kMin64, -4052555153018976267});
  CHECK(pow(i64({3}), 39).item<int64_t>() == 4052555153018976267);
  CHECK(pow(2, i64({62, 63, 64, 0})).to_vector<int64_t>() == std::vector<int64_t>{int64_t{1} << 62, kMin64, 0, 1});
  // Past int64: 3^40 = 12157665459056928801 -> 12157665459056928801 - 2^64.
  CHECK(pow(i64({3}), i64({40})).item<int64_t>() == -6289078614652622815);
  CHECK(pow(i64({kMax64, kMin64, 0, 0}), i64({1, 1, 0, 5})).to_vector<int64_t>() ==
        std::vector<int64_t>{kMax64, kMin64, 1, 0});
  // int32: 3^20 = 3486784401 -> 3486784401 - 2^32; 2^31 -> INT32_MIN; 46341^2 as in mul.
  CHECK(vals(pow(i32({3, 2, 46341, -1}), i32({20, 31, 2, 7}))) ==
        std::vector<int64_t>{-808182895, kMin32, -2147479015, -1});
  // PyTorch's rule for negative exponents: 1 and -1 survive, anything else truncates to 0.
  CHECK(vals(pow(i64({1, -1, -1, 2, -2, 0, -1}), i64({-5, -3, -4, -1, -1, -2, kMin64}))) ==
        std::vector<int64_t>{1, -1, 1, 0, 0, 0, 1});
  CHECK_THROWS_WITH_AS(pow(i64({2}), -1), doctest::Contains("integers to negative integer powers are not allowed"),
                       kiln::Error);
}

TEST_CASE("integer matmul wraps") {
  // [INT64_MAX, 1] . [1, 1] = INT64_MAX + 1 -> INT64_MIN; 2^32 * 2^32 + 3 * 5 -> 15.
  const Tensor a = from_vector<int64_t>({kMax64, 1, int64_t{1} << 32, 3}, {2, 2});
  const Tensor b = from_vector<int64_t>({1, int64_t{1} << 32, 1, 5}, {2, 2});
  // rows of a times columns of b:
  //   [MAX, 1] . [1, 1] = MIN;   [MAX, 1] . [2^32, 5] = MAX * 2^32 + 5 = -2^32 + 5
  //   [2^32, 3] . [1, 1] = 2^32 + 3;   [2^32, 3] . [2^32, 5] = 2^64 + 15 -> 15
  CHECK(vals(matmul(a, b).view({4})) ==
        std::vector<int64_t>{kMin64, -(int64_t{1} << 32) + 5, (int64_t{1} << 32) + 3, 15});
  // int32: 65536 * 65536 = 2^32 -> 0, plus 46341^2 -> -2147479015.
  const Tensor c = from_vector<int32_t>({65536, 46341}, {1, 2});
  const Tensor d = from_vector<int32_t>({65536, 46341}, {2, 1});
  CHECK(vals(matmul(c, d).view({1})) == std::vector<int64_t>{-2147479015});
  // addmm with integer alpha and beta: 2^62 * 2 + 1 * INT64_MAX = INT64_MIN + INT64_MAX = -1.
  const Tensor bias = from_vector<int64_t>({kMax64}, {1, 1});
  const Tensor x = from_vector<int64_t>({int64_t{1} << 62}, {1, 1});
  const Tensor y = from_vector<int64_t>({1}, {1, 1});
  CHECK(addmm(bias, x, y, 1, 2).item<int64_t>() == -1);
  // 3 * INT64_MAX + 2^62: 3 * (2^63 - 1) -> 2^63 - 3, and 2^63 - 3 + 2^62 -> -2^62 - 3.
  CHECK(addmm(bias, x, y, 3, 1).item<int64_t>() == -(int64_t{1} << 62) - 3);
}
