// Kiln's sm_90a linear+GELU kernel (ops/cuda/sm90_linear_gelu.h), called through its own
// interface: what supported() declines (TMA strides and alignment, empty and tiny problems,
// on any device), and on an sm_90 GPU the results against a float64 reference on random data,
// with the outputs poisoned with NaN first so an unwritten element fails, for bf16, f16 and
// TF32, with and without bias and pre-activation, on shapes that are no tile multiples (the
// edge shapes down to 1 x 1 are in bench/sm90_linear_gelu_check.cu, which can run the kernel
// below the size threshold supported() applies), through both tile schedules the dispatch
// chooses between; and the programmatic launch: a kernel writing x, w and the bias right before
// it, and one reading its output buffer right before it overwrites that buffer, are ordered
// before its reads and writes. Elsewhere the numeric cases say they skip.
#ifdef KILN_WITH_CUDA

#include <cuda_runtime_api.h>

#include <cmath>
#include <utility>
#include <vector>

#include "ops/cuda/sm90_linear_gelu.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;
using kiln::cuda_kernels::sm90_linear_gelu;
using kiln::cuda_kernels::sm90_linear_gelu_supported;
using kiln::cuda_kernels::Sm90GemmType;
using kiln::cuda_kernels::Sm90LinearGeluArgs;

namespace {

const Device kGpu = Device::cuda(0);

DType dtype_of_type(Sm90GemmType t) {
  return t == Sm90GemmType::BFloat16 ? kBFloat16 : t == Sm90GemmType::Float16 ? kFloat16 : kFloat32;
}

/// A call on well-formed buffers that supported() accepts on an sm_90 device: bf16, 1024 x 4096
/// outputs (the size threshold), K = 64, contiguous, 256-byte aligned.
struct BaseCall {
  Tensor x = empty({1024, 64}, TensorOptions(kBFloat16).device(kGpu));
  Tensor w = empty({4096, 64}, TensorOptions(kBFloat16).device(kGpu));
  Tensor out = empty({1024, 4096}, TensorOptions(kBFloat16).device(kGpu));
  Sm90LinearGeluArgs args() const {
    Sm90LinearGeluArgs a;
    a.m = 1024, a.n = 4096, a.k = 64;
    a.x = x.data_ptr(), a.ldx = 64;
    a.w = w.data_ptr(), a.ldw = 64;
    a.out = out.data_ptr(), a.ldo = 4096;
    return a;
  }
};

/// Whether this machine's device 0 runs the kernel (an sm_90 GPU with the sm_90a image).
bool kernel_available() { return sm90_linear_gelu_supported(BaseCall().args()); }

/// The norm-wise relative error of out against float64 GELU(x @ w^T + b), and how many of its
/// elements are NaN (unwritten).
std::pair<double, int64_t> out_error(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b) {
  const std::vector<double> pre = reference_linear(x.cpu(), w.cpu(), b.defined() ? b.cpu() : Tensor());
  const std::vector<double> got = values(out.cpu());
  double err = 0, ref = 0;
  int64_t unwritten = 0;
  for (size_t i = 0; i < pre.size(); ++i) {
    const double g = 0.5 * pre[i] * (1.0 + std::erf(pre[i] / std::sqrt(2.0)));
    unwritten += std::isnan(got[i]) ? 1 : 0;
    err += (got[i] - g) * (got[i] - g);
    ref += g * g;
  }
  return {std::sqrt(err / ref), unwritten};
}

/// Runs one call and compares out (and pre) with float64: x @ w^T + b, then x Phi(x).
void check_call(Sm90GemmType type, int64_t m, int64_t n, int64_t k, bool with_bias, bool with_pre) {
  INFO("type " << static_cast<int>(type) << " m " << m << " n " << n << " k " << k << " bias " << with_bias << " pre "
               << with_pre);
  const DType dtype = dtype_of_type(type);
  const Tensor x = random({m, k}, dtype, -1.0, 1.0).to(kGpu);
  const double w_scale = std::sqrt(3.0 / static_cast<double>(k));
  const Tensor w = random({n, k}, dtype, -w_scale, w_scale).to(kGpu);
  const Tensor b = with_bias ? random({n}, dtype, -0.5, 0.5).to(kGpu) : Tensor();
  const Tensor out = full({m, n}, kNaN, TensorOptions(dtype).device(kGpu));
  const Tensor pre = with_pre ? full({m, n}, kNaN, TensorOptions(dtype).device(kGpu)) : Tensor();
  Sm90LinearGeluArgs a;
  a.type = type;
  a.m = m, a.n = n, a.k = k;
  a.x = x.data_ptr(), a.ldx = k;
  a.w = w.data_ptr(), a.ldw = k;
  a.bias = with_bias ? b.data_ptr() : nullptr;
  a.out = out.data_ptr(), a.ldo = n;
  a.pre = with_pre ? pre.data_ptr() : nullptr, a.ldp = n;
  REQUIRE(sm90_linear_gelu_supported(a));
  sm90_linear_gelu(a, reinterpret_cast<cudaStream_t>(cuda::current_stream(kGpu).id()));
  cuda::synchronize();

  const double tol = type == Sm90GemmType::TF32 ? 2e-3 : 1e-2;
  const auto [err_out, unwritten_out] = out_error(out, x, w, with_bias ? b : Tensor());
  CHECK(unwritten_out == 0);
  CHECK(err_out <= tol);
  if (!with_pre) return;
  const std::vector<double> want_pre = reference_linear(x.cpu(), w.cpu(), with_bias ? b.cpu() : Tensor());
  const std::vector<double> got_pre = values(pre.cpu());
  double err_pre = 0, ref_pre = 0;
  int64_t unwritten_pre = 0;
  for (size_t i = 0; i < want_pre.size(); ++i) {
    unwritten_pre += std::isnan(got_pre[i]) ? 1 : 0;
    err_pre += (got_pre[i] - want_pre[i]) * (got_pre[i] - want_pre[i]);
    ref_pre += want_pre[i] * want_pre[i];
  }
  CHECK(unwritten_pre == 0);
  CHECK(std::sqrt(err_pre / ref_pre) <= tol);
}

}  // namespace

TEST_CASE("sm90_linear_gelu_supported declines what the kernel cannot take") {
  const BaseCall base;
  Sm90LinearGeluArgs a = base.args();
  a.k = 7, a.ldx = 7, a.ldw = 7;  // bf16 rows of 14 bytes: no TMA row stride
  CHECK_FALSE(sm90_linear_gelu_supported(a));
  a = base.args(), a.type = Sm90GemmType::TF32, a.k = 6, a.ldx = 6, a.ldw = 6;  // 24-byte rows
  CHECK_FALSE(sm90_linear_gelu_supported(a));
  a = base.args(), a.x = static_cast<const char*>(a.x) + 2;  // base not 16-byte aligned
  CHECK_FALSE(sm90_linear_gelu_supported(a));
  a = base.args(), a.w = static_cast<const char*>(a.w) + 8;
  CHECK_FALSE(sm90_linear_gelu_supported(a));
  a = base.args(), a.m = 0;
  CHECK_FALSE(sm90_linear_gelu_supported(a));
  a = base.args(), a.k = 0;
  CHECK_FALSE(sm90_linear_gelu_supported(a));
  a = base.args(), a.ldo = 4095;  // row stride below n
  CHECK_FALSE(sm90_linear_gelu_supported(a));
  a = base.args(), a.ldx = 32;  // row stride below k
  CHECK_FALSE(sm90_linear_gelu_supported(a));
  a = base.args(), a.m = int64_t{1} << 32;  // past int32 tile coordinates
  CHECK_FALSE(sm90_linear_gelu_supported(a));
  a = base.args(), a.m = 256;  // 256 x 4096 outputs: below the size threshold
  CHECK_FALSE(sm90_linear_gelu_supported(a));
  a = base.args(), a.x = nullptr;
  CHECK_FALSE(sm90_linear_gelu_supported(a));
}

TEST_CASE("sm90_linear_gelu matches float64 on random data") {
  if (!kernel_available()) {
    MESSAGE("skipped: device 0 is not an sm_90 GPU (or the build has no sm_90a image of the kernel)");
    return;
  }
  // Outputs past the size threshold; N even and a multiple of 8 (the TMA-store epilogue) or
  // odd (direct stores); M, N, K no multiple of the 128 x 256 x 64 tile.
  for (Sm90GemmType type : {Sm90GemmType::BFloat16, Sm90GemmType::Float16, Sm90GemmType::TF32}) {
    check_call(type, 1027, 4104, 72, true, true);
    check_call(type, 4099, 1031, 24, false, true);
    check_call(type, 2049, 2056, 40, true, false);
    // At least 8 Mi outputs with K <= 1024: the dispatch's 64 x 256 ping-pong (v7), staged
    // (N a multiple of 8) and direct (odd N) epilogues.
    check_call(type, 4097, 2056, 40, true, true);
    check_call(type, 2049, 4097, 24, false, true);
  }
}

TEST_CASE("sm90_linear_gelu: the programmatic launch sees the previous kernel's writes and finishes its reads first") {
  if (!kernel_available()) {
    MESSAGE("skipped: device 0 is not an sm_90 GPU (or the build has no sm_90a image of the kernel)");
    return;
  }
  // The kernel's CTAs may start while the previous kernel on the stream runs. Before each
  // programmatic launch here a copy kernel overwrites x, w and the bias (as an optimizer step
  // or the previous layer would), and a clone reads the output buffer the launch is about to
  // overwrite: the result must come from the new operands, and the clone must hold the previous
  // result.
  manual_seed(1510);
  // (m, k): 2048 x 4096 outputs with K <= 1024 take the 64 x 256 ping-pong, 1024 x 4096 the
  // cooperative tile.
  for (const std::pair<int64_t, int64_t> shape : {std::pair<int64_t, int64_t>{2048, 64}, {1024, 72}}) {
    const int64_t m = shape.first, k = shape.second;
    CAPTURE(m);
    const int64_t n = 4096;
    const TensorOptions o = TensorOptions(kBFloat16).device(kGpu);
    const double s = std::sqrt(3.0 / static_cast<double>(k));
    Tensor x = random({m, k}, kBFloat16, -1.0, 1.0).to(kGpu), w = random({n, k}, kBFloat16, -s, s).to(kGpu);
    Tensor b = random({n}, kBFloat16, -0.5, 0.5).to(kGpu);
    const Tensor out = full({m, n}, kNaN, o);
    Sm90LinearGeluArgs a;
    a.m = m, a.n = n, a.k = k;
    a.x = x.data_ptr(), a.ldx = k;
    a.w = w.data_ptr(), a.ldw = k;
    a.bias = b.data_ptr();
    a.out = out.data_ptr(), a.ldo = n;
    REQUIRE(sm90_linear_gelu_supported(a));
    const cudaStream_t stream = reinterpret_cast<cudaStream_t>(cuda::current_stream(kGpu).id());
    sm90_linear_gelu(a, stream);
    cuda::synchronize();
    Tensor previous = out.clone();
    for (int round = 0; round < 3; ++round) {
      CAPTURE(round);
      const Tensor x_new = random({m, k}, kBFloat16, -1.0, 1.0).to(kGpu);
      const Tensor w_new = random({n, k}, kBFloat16, -s, s).to(kGpu);
      const Tensor b_new = random({n}, kBFloat16, -0.5, 0.5).to(kGpu);
      cuda::synchronize();
      x.copy_(x_new);  // kernels on the same stream, right before the launch
      w.copy_(w_new);
      b.copy_(b_new);
      const Tensor before = out.clone();  // reads the buffer the launch overwrites
      sm90_linear_gelu(a, stream);
      cuda::synchronize();
      CHECK(equal(before, previous));  // the clone finished reading before the kernel wrote
      const auto [err, unwritten] = out_error(out, x_new, w_new, b_new);
      CHECK(unwritten == 0);
      CHECK(err <= 1e-2);
      CHECK_FALSE(equal(out, previous));  // (the new operands give a new result)
      previous = out.clone();
    }
  }
}

#endif  // KILN_WITH_CUDA
