// GEMMs on the GPU (cuBLASLt for floats, Kiln's own kernel for integers) against the same
// call made on the CPU in float64. The error bound of a product is relative to |a| @ |b|
// (what rounding can reach), not to the result, which may cancel to ~0: c * (|a| @ |b|),
// with c tight enough that TF32 arithmetic fails the float32 bound, so the default path is
// shown to be true fp32, and set_allow_tf32(true) is shown to change it.
#ifdef KILN_WITH_CUDA

#include <functional>
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const Device kGpu = Device::cuda(0);
using Op = std::function<Tensor(const std::vector<Tensor>&)>;

/// Relative bound c per dtype (integers: exact).
double bound_factor(DType dtype, bool tf32) {
  switch (dtype) {
    case DType::Float64: return 1e-13;
    case DType::Float32: return tf32 ? 4e-3 : 1e-5;
    case DType::Float16: return 1.5e-3;
    case DType::BFloat16: return 1e-2;
    default: return 0.0;
  }
}

/// Runs `op` on `inputs` (GPU tensors in the test dtype) and checks the result against the
/// CPU float64 result, within c * op(|inputs|) (+ a tiny absolute slack for float64).
/// Returns the largest error seen relative to that scale.
double check_gemm(const std::string& what, const Op& op, const std::vector<Tensor>& inputs, bool tf32 = false) {
  INFO(what);
  std::vector<Tensor> gpu, ref, mag;
  for (const Tensor& t : inputs) {  // GPU tensors in their test layouts
    gpu.push_back(t);
    ref.push_back(t.cpu().to(kFloat64));
    mag.push_back(abs(ref.back()));
  }
  const Tensor got = op(gpu);
  const Tensor want = op(ref), scale = op(mag);
  REQUIRE(got.device() == kGpu);
  REQUIRE(got.sizes() == want.sizes());
  const std::vector<double> g = values(got.cpu()), w = values(want), s = values(scale);
  const double c = bound_factor(got.dtype(), tf32);
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::abs(g[i] - w[i]), lim = c * s[i] + (got.dtype() == kFloat64 ? 1e-300 : 0.0);
    if (s[i] > 0) worst = std::max(worst, err / s[i]);
    if (!(err <= lim)) {
      FAIL_CHECK("mismatch at flat index " << i << ": got " << g[i] << ", expected " << w[i] << " (bound " << lim
                                           << ")");
      return worst;
    }
  }
  return worst;
}

/// A [rows, cols] operand on the GPU in one of the test layouts (values random in [-3, 3)).
Tensor operand(int64_t rows, int64_t cols, Layout layout, DType dtype) {
  const Tensor host = (layout == Layout::Transposed && (rows < 2 || cols < 2))
                          ? random({rows, cols}, dtype, -3, 3)
                          : random_with_layout({rows, cols}, layout, dtype, -3, 3);
  Tensor g = host.contiguous().to(kGpu);
  if (host.is_contiguous() || host.numel() == 0) return g;
  if (layout == Layout::Transposed) return g.t().contiguous().t();
  if (layout == Layout::Expanded) return g.narrow(0, 0, 1).contiguous().expand({rows, cols});
  Tensor wide = zeros({rows, 2 * cols + 1}, TensorOptions(dtype).device(kGpu));
  wide.slice(-1, 1, 2 * cols + 1, 2).copy_(g);
  return wide.slice(-1, 1, 2 * cols + 1, 2);
}

const std::vector<DType> kGemmDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64};

}  // namespace

TEST_CASE("mm on the GPU agrees with float64 for every dtype, layout and odd shape") {
  manual_seed(31);
  struct MKN {
    int64_t m, k, n;
  };
  int checked = 0;
  for (DType dtype : kGemmDtypes) {
    for (const MKN& s : {MKN{1, 1, 1}, MKN{7, 33, 5}, MKN{64, 129, 17}, MKN{130, 64, 257}, MKN{0, 5, 3},
                         MKN{4, 0, 3}, MKN{4, 5, 0}}) {
      for (Layout la : kLayouts) {
        for (Layout lb : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
          CAPTURE(dtype_name(dtype));
          CAPTURE(s.m);
          CAPTURE(s.k);
          CAPTURE(s.n);
          CAPTURE(layout_name(la));
          CAPTURE(layout_name(lb));
          const Tensor a = operand(s.m, s.k, la, dtype), b = operand(s.k, s.n, lb, dtype);
          check_gemm("mm", [](const std::vector<Tensor>& in) { return mm(in[0], in[1]); }, {a, b});
          ++checked;
        }
      }
    }
  }
  MESSAGE(checked << " mm cases agree with float64");
}

TEST_CASE("batched and broadcast matmul, addmm with every bias shape, and linear on the GPU") {
  manual_seed(32);
  for (DType dtype : kGemmDtypes) {
    CAPTURE(dtype_name(dtype));
    const auto r = [&](const Shape& shape) { return random(shape, dtype, -3, 3).to(kGpu); };
    const Op mat = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
    check_gemm("batched [3,M,K] @ [K,N]", mat, {r({3, 9, 17}), r({17, 6})});
    check_gemm("broadcast batch [2,1,M,K] @ [3,K,N]", mat, {r({2, 1, 9, 17}), r({3, 17, 6})});
    check_gemm("batched transposed", mat, {r({3, 17, 9}).transpose(-1, -2), r({3, 6, 17}).transpose(-1, -2)});
    check_gemm("vector @ matrix", mat, {r({17}), r({17, 6})});
    check_gemm("matrix @ vector", mat, {r({9, 17}), r({17})});
    check_gemm("dot", mat, {r({33}), r({33})});
    const bool integral = !is_floating(dtype);
    for (const Shape& bias_shape : {Shape{6}, Shape{1, 6}, Shape{9, 1}, Shape{9, 6}}) {
      for (auto [beta, alpha] : {std::pair{1.0, 1.0}, std::pair{0.0, 1.0}, std::pair{0.5, 2.0}, std::pair{2.0, 3.0}}) {
        if (integral && (beta == 0.5)) continue;  // integer addmm takes integer scales
        CAPTURE(shape_str(bias_shape));
        CAPTURE(beta);
        CAPTURE(alpha);
        const Op op = [beta, alpha, integral](const std::vector<Tensor>& in) {
          if (integral) return addmm(in[0], in[1], in[2], static_cast<int64_t>(beta), static_cast<int64_t>(alpha));
          return addmm(in[0], in[1], in[2], beta, alpha);
        };
        check_gemm("addmm", op, {r(bias_shape), r({9, 17}), r({17, 6})});
      }
    }
    const Op lin = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor()); };
    check_gemm("linear with bias, 3-D input", lin, {r({2, 5, 17}), r({6, 17}), r({6})});
    check_gemm("linear without bias", lin, {r({5, 17}), r({6, 17})});
    check_gemm("linear, K = 0", lin, {r({5, 0}), r({6, 0}), r({6})});
  }
}

TEST_CASE("float32 GEMMs are true fp32 by default; set_allow_tf32(true) switches to TF32") {
  manual_seed(33);
  REQUIRE_FALSE(allow_tf32());
  const Tensor a = random({256, 1024}, kFloat32, -3, 3).to(kGpu), b = random({1024, 192}, kFloat32, -3, 3).to(kGpu);
  const Op op = [](const std::vector<Tensor>& in) { return mm(in[0], in[1]); };
  const double fp32_err = check_gemm("fp32", op, {a, b});
  set_allow_tf32(true);
  CHECK(allow_tf32());
  const double tf32_err = check_gemm("tf32", op, {a, b}, true);
  set_allow_tf32(false);
  CHECK_FALSE(allow_tf32());
  // TF32 keeps 10 mantissa bits: its error is orders of magnitude above fp32's.
  MESSAGE("largest error relative to |a|@|b|: fp32 " << fp32_err << ", tf32 " << tf32_err);
  CHECK(tf32_err > 20 * fp32_err);
  CHECK(fp32_err < 1e-6);
}

#endif  // KILN_WITH_CUDA
