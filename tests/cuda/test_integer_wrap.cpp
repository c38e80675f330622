// Integer arithmetic at the edges of int32/int64 on the GPU, against the CPU: the CUDA
// binary, unary, sum and integer GEMM kernels wrap through ops/wrapping.h as the CPU's do,
// so results must agree bit for bit (tests/ops/test_integer_wrap.cpp checks the CPU's
// against hand-computed values). Sums also run at sizes that take the split, two-kernel
// reduction path.
#ifdef KILN_WITH_CUDA

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "testing.h"

using namespace kiln;

namespace {

const Device kGpu = Device::cuda(0);
constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();

// Runs `make(device)` on the CPU and on the GPU and requires the same dtype, shape and bits.
void same_on_both(const std::string& what, const std::function<Tensor(Device)>& make) {
  INFO(what);
  const Tensor want = make(Device::cpu());
  const Tensor got = make(kGpu);
  REQUIRE(got.device() == kGpu);
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.sizes() == want.sizes());
  CHECK(got.cpu().to_vector<int64_t>() == want.to_vector<int64_t>());
}

// The edge values of int64 and int32 and a few ordinary ones, as a 1-D tensor on `d`.
Tensor edges64(Device d) {
  return from_vector<int64_t>({kMax64, kMin64, kMax64 - 1, kMin64 + 1, 0, 1, -1, int64_t{1} << 32, int64_t{1} << 62,
                               -(int64_t{1} << 62), 3, -7},
                              {12})
      .to(d);
}
Tensor edges32(Device d) {
  return from_vector<int32_t>({kMax32, kMin32, kMax32 - 1, kMin32 + 1, 0, 1, -1, 1 << 20, 65536, 46341, 3, -7}, {12})
      .to(d);
}

}  // namespace

TEST_CASE("cuda: integer add, sub, mul, neg and abs wrap as on the CPU") {
  for (DType dt : {kInt64, kInt32}) {
    const auto x = [dt](Device d) { return dt == kInt64 ? edges64(d) : edges32(d); };
    // Every pair of edge values: x as a column against x as a row.
    const auto col = [x](Device d) { return x(d).view({12, 1}); };
    const auto row = [x](Device d) { return x(d).view({1, 12}); };
    const std::string t(dtype_name(dt));
    same_on_both(t + " add", [&](Device d) { return add(col(d), row(d)); });
    same_on_both(t + " sub", [&](Device d) { return sub(col(d), row(d)); });
    same_on_both(t + " mul", [&](Device d) { return mul(col(d), row(d)); });
    same_on_both(t + " add alpha 3", [&](Device d) { return add(col(d), row(d), 3); });
    same_on_both(t + " sub alpha -5", [&](Device d) { return sub(col(d), row(d), -5); });
    same_on_both(t + " add alpha 2^62", [&](Device d) { return add(col(d), row(d), int64_t{1} << 62); });
    // A number operand takes the kernel's by-value path, on either side.
    same_on_both(t + " x + MAX", [&](Device d) { return x(d) + kMax64; });
    same_on_both(t + " MIN - x", [&](Device d) { return kMin64 - x(d); });
    same_on_both(t + " x * MIN", [&](Device d) { return x(d) * kMin64; });
    same_on_both(t + " add number alpha", [&](Device d) { return add(x(d), kMax64, 7); });
    same_on_both(t + " neg", [&](Device d) { return neg(x(d)); });
    same_on_both(t + " abs", [&](Device d) { return abs(x(d)); });
    same_on_both(t + " strided mul", [&](Device d) { return mul(x(d).slice(0, 0, 12, 2), x(d).slice(0, 1, 12, 2)); });
  }
}

TEST_CASE("cuda: integer pow wraps as on the CPU, with PyTorch's negative-exponent rule") {
  const auto base64 = [](Device d) {
    return from_vector<int64_t>({3, 2, 2, -2, -3, 3, 1, -1, -1, 2, 0, 7}, {12}).to(d);
  };
  const auto exp64 = [](Device d) {
    return from_vector<int64_t>({39, 62, 63, 63, 39, 40, -5, -3, kMin64, -1, 0, 25}, {12}).to(d);
  };
  same_on_both("int64 pow", [&](Device d) { return pow(base64(d), exp64(d)); });
  same_on_both("int64 pow of every edge value", [](Device d) {
    const Tensor e = from_vector<int64_t>({0, 1, 2, 3, 5, 17, 31, 32, 33, 62, 63, 64}, {1, 12}).to(d);
    return pow(edges64(d).view({12, 1}), e);
  });
  same_on_both("int32 pow of every edge value", [](Device d) {
    const Tensor e = from_vector<int32_t>({0, 1, 2, 3, 5, 17, 30, 31, 32, 33, -1, -2}, {1, 12}).to(d);
    return pow(edges32(d).view({12, 1}), e);
  });
  same_on_both("int64 pow by a number", [](Device d) { return pow(edges64(d), 3); });
  same_on_both("int64 number to a power", [](Device d) {
    return pow(3, from_vector<int64_t>({39, 40, 41}, {3}).to(d));
  });
  same_on_both("int32 pow", [](Device d) {
    return pow(from_vector<int32_t>({3, 2, 46341, -1, 5}, {5}).to(d),
               from_vector<int32_t>({20, 31, 2, 7, 30}, {5}).to(d));
  });
}

TEST_CASE("cuda: integer sums wrap as on the CPU, on every reduction path") {
  same_on_both("int64 sum of edges", [](Device d) { return sum(edges64(d)); });
  same_on_both("int32 sum of edges (int64 result)", [](Device d) { return sum(edges32(d)); });
  same_on_both("int64 row sums", [](Device d) { return sum(edges64(d).view({3, 4}), {1}); });
  same_on_both("int64 column sums", [](Device d) { return sum(edges64(d).view({3, 4}), {0}); });
  // Millions of elements: split across blocks and combined by a second kernel.
  same_on_both("int64 sum of 3M large values",
               [](Device d) { return sum(full({3'000'001}, kMax64 / 5, TensorOptions().device(d))); });
  same_on_both("int64 row sums of 4 long rows", [](Device d) {
    return sum(full({4, 1'000'001}, int64_t{1} << 44, TensorOptions().device(d)), {1});
  });
  same_on_both("int64 column sums over a million rows", [](Device d) {
    return sum(full({1'000'003, 3}, kMin64 + 12345, TensorOptions().device(d)), {0});
  });
}

TEST_CASE("cuda: integer matmul wraps as on the CPU") {
  for (DType dt : {kInt64, kInt32}) {
    const auto x = [dt](Device d) { return dt == kInt64 ? edges64(d) : edges32(d); };
    same_on_both(std::string(dtype_name(dt)) + " matmul of edge values", [&](Device d) {
      return matmul(x(d).view({3, 4}), x(d).view({4, 3}));
    });
    same_on_both(std::string(dtype_name(dt)) + " batched matmul, transposed operand", [&](Device d) {
      return matmul(x(d).view({2, 2, 3}), x(d).view({2, 2, 3}).transpose(1, 2));
    });
    same_on_both(std::string(dtype_name(dt)) + " addmm with alpha and beta", [&](Device d) {
      return addmm(x(d).narrow(0, 0, 9).view({3, 3}), x(d).view({3, 4}), x(d).view({4, 3}), 3, 5);
    });
    same_on_both(std::string(dtype_name(dt)) + " addmm with a vector bias and alpha", [&](Device d) {
      return addmm(x(d).narrow(0, 3, 3), x(d).view({3, 4}), x(d).view({4, 3}), 1, -7);
    });
  }
}

#endif  // KILN_WITH_CUDA
