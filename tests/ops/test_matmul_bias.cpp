// addmm's bias paths and the GEMM kernel's bias argument: a [N] or [1, N] bias with
// beta == 1 goes to the kernel as a vector (the cuBLASLt bias epilogue on CUDA), any other
// bias or beta keeps the copy-then-scale path; both must agree with a float64 reference
// written here. Also the TF32 setting, which the CPU ignores. Inputs are random multiples
// of 1/8, so every dtype differs from the reference only by its final rounding.
#include <cmath>

#include "ops/kernels.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const std::vector<DType> kGemmTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64};


// beta * bias (broadcast to [M, N]; ignored when beta == 0) + alpha * a @ b, in float64.
// a and b may carry leading batch dims of equal sizes; bias broadcasts to the output.
std::vector<double> reference(const Tensor& bias, const Tensor& a, const Tensor& b, double beta, double alpha,
                              Shape* out_shape) {
  const int64_t nd = a.dim();
  const int64_t M = a.sizes()[nd - 2], K = a.sizes()[nd - 1], N = b.sizes()[nd - 1];
  Shape shape = a.sizes();
  shape.back() = N;
  const int64_t batches = shape_numel(shape) / std::max<int64_t>(M * N, 1);
  const std::vector<double> va = values(a), vb = values(b);
  const std::vector<double> vbias = bias.defined() ? values(bias) : std::vector<double>();
  std::vector<double> r(static_cast<size_t>(shape_numel(shape)));
  for (int64_t z = 0; z < batches; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += va[(z * M + i) * K + k] * vb[(z * K + k) * N + j];
        const int64_t flat = (z * M + i) * N + j;
        const double bv = beta == 0.0 || !bias.defined()
                              ? 0.0
                              : beta * vbias[broadcast_source(unravel(flat, shape), bias.sizes())];
        r[flat] = bv + alpha * acc;
      }
  *out_shape = shape;
  return r;
}

void check_addmm(const Tensor& bias, const Tensor& a, const Tensor& b, double beta, double alpha) {
  INFO(a.dtype(), " bias ", shape_str(bias.sizes()), " (strides ", shape_str(bias.strides()), ") beta ", beta,
       " alpha ", alpha);
  Shape shape;
  const std::vector<double> expect = reference(bias, a, b, beta, alpha, &shape);
  const Tensor out = is_floating(a.dtype())
                         ? addmm(bias, a, b, beta, alpha)
                         : addmm(bias, a, b, static_cast<int64_t>(beta), static_cast<int64_t>(alpha));
  CHECK(out.dtype() == a.dtype());
  check_close(out, expect, shape);
}

}  // namespace

TEST_CASE("addmm with [N], [1, N], [M, 1] and [M, N] biases and beta 0, 1 and 0.5") {
  manual_seed(21);
  const int64_t M = 6, K = 9, N = 5;
  for (DType dt : kGemmTypes)
    for (const Shape& bs : std::vector<Shape>{{N}, {1, N}, {M, 1}, {M, N}})
      for (double beta : {0.0, 1.0, 0.5}) {
        if (!is_floating(dt) && beta == 0.5) continue;  // integer addmm takes integer coefficients
        for (double alpha : {1.0, 2.0}) {
          const Tensor bias = random_eighths(bs, dt), a = random_eighths({M, K}, dt), b = random_eighths({K, N}, dt);
          check_addmm(bias, a, b, beta, alpha);
          // linear's layout: b a transposed weight.
          check_addmm(bias, a, random_eighths({N, K}, dt).t(), beta, alpha);
        }
      }
}

TEST_CASE("addmm with strided and broadcast vector biases") {
  manual_seed(22);
  const int64_t M = 4, K = 7, N = 6;
  for (DType dt : kGemmTypes) {
    const Tensor a = random_eighths({M, K}, dt), b = random_eighths({K, N}, dt);
    // [N] with a step, [N] expanded from one element, [1, N] as a row of a transposed
    // [N, 1], and [1, N] sliced out of a wider matrix.
    check_addmm(random_eighths({2 * N}, dt).slice(0, 1, 2 * N, 2), a, b, 1.0, 1.0);
    check_addmm(random_eighths({1}, dt).expand({N}), a, b, 1.0, 1.0);
    check_addmm(random_eighths({N, 1}, dt).t(), a, b, 1.0, 1.0);
    check_addmm(random_eighths({3, 2 * N}, dt).slice(0, 1, 2).slice(1, 0, 2 * N, 2), a, b, 1.0, 2.0);
    // One output column: [1] bias, [1, 1] bias.
    check_addmm(random_eighths({1}, dt), a, random_eighths({K, 1}, dt), 1.0, 1.0);
    check_addmm(random_eighths({1, 1}, dt), a, random_eighths({K, 1}, dt), 1.0, 1.0);
  }
}

TEST_CASE("addmm's bias path with K = 0, with M or N = 0, and through linear") {
  manual_seed(23);
  for (DType dt : kGemmTypes) {
    INFO(dt);
    // K = 0: out is the bias (beta 1), zeros (beta 0, even over a NaN bias) or beta * bias.
    const Tensor bias = random_eighths({4}, dt), a = random_eighths({3, 0}, dt), b = random_eighths({0, 4}, dt);
    check_addmm(bias, a, b, 1.0, 1.0);
    check_addmm(bias, a, b, 0.0, 1.0);
    check_addmm(random_eighths({1, 4}, dt), a, b, 1.0, 3.0);
    if (is_floating(dt)) {
      check_addmm(bias, a, b, 0.5, 1.0);
      check_close(addmm(full({4}, kNaN, dt), a, b, 0, 1), std::vector<double>(12, 0.0), {3, 4});
    }
    CHECK(addmm(random_eighths({4}, dt), random_eighths({0, 5}, dt), random_eighths({5, 4}, dt)).sizes() == Shape{0, 4});
    CHECK(addmm(random_eighths({0}, dt), random_eighths({3, 5}, dt), random_eighths({5, 0}, dt)).sizes() == Shape{3, 0});
    // linear folds its bias the same way, for 3-D inputs too.
    const Tensor x = random_eighths({2, 3, 8}, dt), w = random_eighths({5, 8}, dt), wb = random_eighths({5}, dt);
    check_close(linear(x, w, wb), reference_linear(x, w, wb), {2, 3, 5});
  }
}

TEST_CASE("the GEMM kernel adds a bias vector to every row of every batch and ignores beta") {
  manual_seed(24);
  const int64_t B = 3, M = 4, K = 5, N = 6;
  for (DType dt : kGemmTypes) {
    INFO(dt);
    const Tensor a = random_eighths({B, M, K}, dt), b = random_eighths({B, K, N}, dt), bias = random_eighths({N}, dt);
    // out starts as garbage (NaN for floats): with a bias, beta must not read it.
    Tensor out = is_floating(dt) ? full({B, M, N}, kNaN, dt) : full({B, M, N}, 12345, dt);
    const double beta = is_floating(dt) ? 0.5 : 3.0, alpha = 2.0;
    dispatch::gemm_kernels.get("matmul", Device::cpu())(out, a, b, alpha, beta, bias);
    Shape shape;
    const std::vector<double> expect = reference(bias, a, b, 1.0, alpha, &shape);
    check_close(out, expect, shape);
    // An undefined bias keeps the beta semantics.
    Tensor out2 = random_eighths({B, M, N}, dt);
    const Tensor before = out2.clone();
    dispatch::gemm_kernels.get("matmul", Device::cpu())(out2, a, b, alpha, beta, Tensor());
    check_close(out2, reference(before, a, b, beta, alpha, &shape), shape);
  }
}

TEST_CASE("set_allow_tf32 round-trips and leaves CPU results unchanged") {
  manual_seed(25);
  const bool saved = allow_tf32();
  CHECK_FALSE(saved);  // true fp32 by default, as in PyTorch
  const Tensor a = random({7, 33}), b = random({33, 5}), bias = random({5});
  const std::vector<float> fp32 = addmm(bias, a, b).to_vector<float>();
  set_allow_tf32(true);
  CHECK(allow_tf32());
  const std::vector<float> with_tf32 = addmm(bias, a, b).to_vector<float>();
  set_allow_tf32(false);
  CHECK_FALSE(allow_tf32());
  CHECK(fp32 == with_tf32);  // the CPU ignores the setting: bit-identical
  set_allow_tf32(saved);
}
