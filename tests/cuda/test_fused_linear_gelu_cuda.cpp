// fused_linear_gelu on the GPU: the kernel, called through its table into NaN-poisoned output
// (and pre-activation) buffers so an element it fails to write cannot pass, against a float64
// reference computed on the host and against the unfused gelu(linear(...)) at M, N, K in
// {1, 7, 127, 1000, 4095, 4097} (each size in each position with the others moderate, plus
// corners), both GELU modes, float32 (true fp32: 1e-5, a bound TF32 misses), TF32 (2e-3),
// bfloat16 (1e-2) and float16 (2e-3) relative norm error; NaN and Inf where the unfused path
// puts them; the backward op against float64 references and the unfused autograd gradients,
// with and without the saved pre-activation; the DGELU_BGRAD helper; the device check. Which
// kernel path runs for which case is ops/fused_linear_gelu_cuda.cu's file comment.
#ifdef KILN_WITH_CUDA

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "cuda/cuda_testing.h"
#include "ops/cuda/fused_linear_gelu_cuda.h"
#include "ops/fused_linear_gelu_reference.h"
#include "ops/kernels.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const Device kGpu = Device::cuda(0);

/// The arithmetic a case runs in: a dtype, and for float32 whether TF32 is allowed.
struct Precision {
  DType dtype;
  bool tf32;
  double tol;  ///< relative norm error against the float64 reference
  const char* name;
};
const std::vector<Precision> kPrecisions = {{kFloat32, false, 1e-5, "float32"},
                                            {kFloat32, true, 2e-3, "tf32"},
                                            {kBFloat16, false, 1e-2, "bfloat16"},
                                            {kFloat16, false, 2e-3, "float16"}};

/// Sets allow_tf32 for a scope.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool on) : previous_(allow_tf32()) { set_allow_tf32(on); }
  ~Tf32Scope() { set_allow_tf32(previous_); }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool previous_;
};

/// h = x w^T + b in float64 on the host, i-k-j order (w transposed once) so 10^9-term cases
/// take about a second.
std::vector<double> reference_pre(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t m = x.sizes()[0], k = x.sizes()[1], n = w.sizes()[0];
  const std::vector<double> vx = values(x), vw = values(w), vb = values(b);
  std::vector<double> wt(static_cast<size_t>(k * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < k; ++c) wt[static_cast<size_t>(c * n + j)] = vw[static_cast<size_t>(j * k + c)];
  std::vector<double> h(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    double* row = h.data() + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] = vb[static_cast<size_t>(j)];
    for (int64_t c = 0; c < k; ++c) {
      const double xv = vx[static_cast<size_t>(i * k + c)];
      const double* wr = wt.data() + c * n;
      for (int64_t j = 0; j < n; ++j) row[j] += xv * wr[j];
    }
  }
  return h;
}

std::vector<double> gelu_of(const std::vector<double>& h, bool tanh_mode) {
  std::vector<double> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = gelu_reference(h[i], tanh_mode);
  return out;
}

/// x [m, k] in [-1, 1), w [n, k] and b [n] scaled so h is O(1), on the host in `dtype`.
std::array<Tensor, 3> host_operands(int64_t m, int64_t n, int64_t k, DType dtype) {
  const double s = 1.0 / std::sqrt(static_cast<double>(k));
  return {random({m, k}, dtype, -1, 1), random({n, k}, dtype, -2 * s, 2 * s), random({n}, dtype, -0.5, 0.5)};
}

double norm_error(const Tensor& got, const std::vector<double>& want) {
  return relative_norm_error(values(got.cpu()), want);
}

/// One shape in one precision: the kernel through its table into poisoned buffers (with and
/// without the pre-activation), the op, and the unfused path, all against the reference.
void check_shape(int64_t m, int64_t n, int64_t k) {
  for (const Precision& p : kPrecisions) {
    const auto [x, w, b] = host_operands(m, n, k, p.dtype);
    const std::vector<double> h = reference_pre(x, w, b);
    const Tensor gx = x.to(kGpu), gw = w.to(kGpu), gb = b.to(kGpu);
    Tf32Scope tf32(p.tf32);
    for (bool tanh_mode : {false, true}) {
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      CAPTURE(p.name);
      CAPTURE(tanh_mode);
      const char* mode = tanh_mode ? "tanh" : "none";
      const std::vector<double> want = gelu_of(h, tanh_mode);
      const UnaryOp activation = tanh_mode ? UnaryOp::GeluTanh : UnaryOp::Gelu;
      const FusedLinearGeluKernel kernel = dispatch::fused_linear_gelu_kernels.get("test", kGpu);
      for (bool with_pre : {false, true}) {
        CAPTURE(with_pre);
        const Tensor out = full({m, n}, kNaN, TensorOptions(p.dtype).device(kGpu));
        const Tensor pre = with_pre ? full({m, n}, kNaN, TensorOptions(p.dtype).device(kGpu)) : Tensor();
        kernel(out, pre, gx, gw, gb, activation);
        const double err = norm_error(out, want);
        CHECK(err <= p.tol);  // NaN (an unwritten element) fails
        if (with_pre) CHECK(norm_error(pre, h) <= p.tol);
      }
      const double fused = norm_error(fused_linear_gelu(gx, gw, gb, mode), want);
      const double unfused = norm_error(gelu(linear(gx, gw, gb), mode), want);
      CAPTURE(unfused);
      CHECK(fused <= p.tol);
    }
  }
}

}  // namespace

TEST_CASE("fused_linear_gelu on the GPU: each size in {1, 7, 127, 1000, 4095, 4097} in each position") {
  manual_seed(171);
  const int64_t moderate = 64;
  for (int64_t v : {1, 7, 127, 1000, 4095, 4097}) {
    check_shape(v, moderate, moderate);
    check_shape(moderate, v, moderate);
    check_shape(moderate, moderate, v);
  }
}

TEST_CASE("fused_linear_gelu on the GPU: corners of the size cross product") {
  manual_seed(172);
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {4097, 4095, 7}, {7, 4097, 4095}, {4095, 7, 4097}, {1000, 1000, 1000}, {1, 4097, 127},
           {4097, 1, 127}, {127, 127, 4097}, {4096, 1024, 256}})
    check_shape(m, n, k);
}

TEST_CASE("fused_linear_gelu on the GPU: 3-D, strided and expanded inputs, no bias, float64, zero sizes") {
  manual_seed(173);
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16})
    for (const char* mode : {"none", "tanh"}) {
      CAPTURE(dt);
      CAPTURE(mode);
      const Tensor w = random({24, 16}, dt, -0.5, 0.5), b = random({24}, dt, -0.5, 0.5);
      const std::vector<Tensor> xs = {random({2, 5, 16}, dt, -1, 1), random({16, 9}, dt, -1, 1).t(),
                                      random({9, 33}, dt, -1, 1).slice(1, 1, 33, 2),
                                      random({1, 16}, dt, -1, 1).expand({6, 16})};
      for (const Tensor& x : xs)
        for (const Tensor& bias : {b, Tensor()}) {
          const Tensor want = gelu(linear(x, w, bias), mode);  // the CPU's unfused result
          const Tensor got = fused_linear_gelu(x.to(kGpu), w.to(kGpu), bias.defined() ? bias.to(kGpu) : bias, mode);
          CHECK(relative_norm_error(values(got.cpu()), values(want)) <= norm_tolerance(dt));
        }
      const Tensor wt = random({16, 24}, dt, -0.5, 0.5).t();  // a transposed weight
      const Tensor x = random({5, 16}, dt, -1, 1);
      CHECK(relative_norm_error(values(fused_linear_gelu(x.to(kGpu), wt.to(kGpu), b.to(kGpu), mode).cpu()),
                                values(gelu(linear(x, wt, b), mode))) <= norm_tolerance(dt));
      CHECK(fused_linear_gelu(random({0, 16}, dt).to(kGpu), w.to(kGpu), b.to(kGpu), mode).sizes() == Shape{0, 24});
      const Tensor k0 = fused_linear_gelu(random({3, 0}, dt).to(kGpu), random({24, 0}, dt).to(kGpu), b.to(kGpu), mode);
      CHECK(relative_norm_error(values(k0.cpu()), values(gelu(b, mode).expand({3, 24}))) <= norm_tolerance(dt));
    }
}

TEST_CASE("fused_linear_gelu on the GPU: NaN and Inf land where gelu(linear(...)) puts them") {
  manual_seed(177);
  for (const Precision& p : kPrecisions)
    for (bool tanh_mode : {false, true})
      for (int64_t n : {24, 7}) {  // 24: cuBLASLt's epilogue paths can take it; 7: the portable path
        CAPTURE(p.name);
        CAPTURE(tanh_mode);
        CAPTURE(n);
        Tf32Scope tf32(p.tf32);
        const char* mode = tanh_mode ? "tanh" : "none";
        std::vector<double> vx = values(random({6, 16}, kFloat64, -1, 1));
        std::vector<double> vw = values(random({n, 16}, kFloat64, -1, 1));
        vx[0 * 16 + 1] = kInf;   // row 0: +-Inf outputs (GELU(-Inf) is NaN, as in PyTorch)
        vx[1 * 16 + 2] = -kInf;  // row 1
        vx[2 * 16 + 0] = kNaN;   // row 2: NaN
        vw[0 * 16 + 1] = 0.5;    // so output 0 of row 0 and of row 1 is +Inf
        vw[0 * 16 + 2] = -0.5;
        const Tensor x = from_vector(vx, {6, 16}).to(p.dtype).to(kGpu);
        const Tensor w = from_vector(vw, {n, 16}).to(p.dtype).to(kGpu);
        const Tensor b = random({n}, p.dtype, -0.5, 0.5).to(kGpu);
        for (bool with_grad : {false, true}) {  // with the pre-activation written, and without
          CAPTURE(with_grad);
          const Tensor wl = with_grad ? w.detach().clone().requires_grad_() : w;
          const std::vector<double> f = values(fused_linear_gelu(x, wl, b, mode).detach().cpu());
          const std::vector<double> u = values(gelu(linear(x, w, b), mode).cpu());
          int specials = 0;
          for (size_t i = 0; i < f.size(); ++i) {
            CAPTURE(i);
            CHECK(std::isnan(f[i]) == std::isnan(u[i]));
            CHECK(std::isinf(f[i]) == std::isinf(u[i]));
            if (std::isinf(u[i])) CHECK(f[i] == u[i]);
            specials += !std::isfinite(u[i]);
          }
          CHECK(specials >= 3 * n);  // rows 0 to 2: every output is +-Inf through a nonzero weight, or NaN
        }
      }
}

TEST_CASE("fused_linear_gelu's backward on the GPU: against float64 and the unfused autograd gradients") {
  manual_seed(174);
  // Out widths that are and are not multiples of 8 (cuBLASLt's BGRADB / GELU_AUX paths and
  // their fallbacks), M from one row to many.
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 8, 16}, {7, 7, 7}, {127, 64, 96}, {1000, 24, 33},
                                                                    {64, 4097, 64}, {4097, 64, 127}})
    for (const Precision& p : kPrecisions)
      for (bool tanh_mode : {false, true}) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        CAPTURE(p.name);
        CAPTURE(tanh_mode);
        Tf32Scope tf32(p.tf32);
        const char* mode = tanh_mode ? "tanh" : "none";
        const auto [x, w, b] = host_operands(m, n, k, p.dtype);
        const Tensor g = random({m, n}, p.dtype, -1, 1);
        // The backward op on its own, against float64 (h from the forward, rounded as stored).
        const Tensor h = linear(x, w, b);
        const BackwardReference ref = backward_reference(g, x, w, values(h), tanh_mode);
        const FusedLinearGeluGrads r =
            fused_linear_gelu_backward(g.to(kGpu), x.to(kGpu), w.to(kGpu), h.to(kGpu), mode);
        // dH is rounded to the dtype before the GEMMs, as gelu_backward's result is.
        const double tol = p.dtype == kFloat32 && !p.tf32 ? 1e-5 : p.tol;
        CHECK(norm_error(r.input, ref.input) <= tol);
        CHECK(norm_error(r.weight, ref.weight) <= tol);
        CHECK(norm_error(r.bias, ref.bias) <= tol);
        // Through autograd (the pre-activation saved by the forward) against the unfused path.
        auto grads = [&](bool fused) {
          std::vector<Tensor> leaf = {x.to(kGpu).requires_grad_(), w.to(kGpu).requires_grad_(),
                                      b.to(kGpu).requires_grad_()};
          const Tensor y = fused ? fused_linear_gelu(leaf[0], leaf[1], leaf[2], mode)
                                 : gelu(linear(leaf[0], leaf[1], leaf[2]), mode);
          y.backward(g.to(kGpu));
          return std::vector<std::vector<double>>{values(leaf[0].grad().cpu()), values(leaf[1].grad().cpu()),
                                                  values(leaf[2].grad().cpu())};
        };
        const auto f = grads(true), u = grads(false);
        CHECK(relative_norm_error(f[0], ref.input) <= tol);
        CHECK(relative_norm_error(f[1], ref.weight) <= tol);
        CHECK(relative_norm_error(f[2], ref.bias) <= tol);
        for (size_t i = 0; i < 3; ++i) CHECK(relative_norm_error(f[i], u[i]) <= 2 * tol);
      }
}

TEST_CASE("the backward kernel writes every element of poisoned gradient buffers, each subset of them") {
  manual_seed(175);
  const auto [x, w, b] = host_operands(37, 24, 19, kFloat32);
  const Tensor g = random({37, 24}, kFloat32, -1, 1), h = linear(x, w, b);
  const BackwardReference ref = backward_reference(g, x, w, values(h), false);
  const FusedLinearGeluBackwardKernel kernel = dispatch::fused_linear_gelu_backward_kernels.get("test", kGpu);
  for (int mask = 1; mask < 8; ++mask) {
    CAPTURE(mask);
    const TensorOptions o = TensorOptions(kFloat32).device(kGpu);
    const Tensor gi = (mask & 1) ? full({37, 19}, kNaN, o) : Tensor();
    const Tensor gw = (mask & 2) ? full({24, 19}, kNaN, o) : Tensor();
    const Tensor gb = (mask & 4) ? full({24}, kNaN, o) : Tensor();
    kernel(gi, gw, gb, g.to(kGpu), h.to(kGpu), x.to(kGpu), w.to(kGpu), UnaryOp::Gelu);
    if (gi.defined()) CHECK(norm_error(gi, ref.input) <= 1e-5);
    if (gw.defined()) CHECK(norm_error(gw, ref.weight) <= 1e-5);
    if (gb.defined()) CHECK(norm_error(gb, ref.bias) <= 1e-5);
  }
}

TEST_CASE("linear_dgelu_bgrad_cuda: dH and the bias gradient from the next layer's GEMM (tanh GELU)") {
  manual_seed(176);
  for (DType dt : {kFloat32, kBFloat16, kFloat16})
    for (const auto& [m, p, n] : std::vector<std::array<int64_t, 3>>{{64, 32, 48}, {7, 16, 8}, {33, 40, 12}}) {
      CAPTURE(dt);
      CAPTURE(n);
      const Tensor gz = random({m, p}, dt, -1, 1), v = random({p, n}, dt, -0.5, 0.5), h = random({m, n}, dt, -2, 2);
      const TensorOptions o = TensorOptions(dt).device(kGpu);
      const Tensor dh = full({m, n}, kNaN, o), db = full({n}, kNaN, o);
      const bool ran = cuda_kernels::linear_dgelu_bgrad_cuda(dh, db, gz.to(kGpu), v.to(kGpu), h.to(kGpu));
      if (n % 8 != 0) {
        CHECK_FALSE(ran);  // cuBLASLt's aux leading dimension must be a multiple of 8
        continue;
      }
      if (!ran) {
        MESSAGE("cuBLASLt declines DGELU_BGRAD for " << dt << " here; callers fall back");
        continue;
      }
      // Reference: (gz @ v) * gelu_tanh'(h), and its column sums.
      const std::vector<double> vg = values(gz), vv = values(v), vh = values(h);
      std::vector<double> want(static_cast<size_t>(m * n)), want_b(static_cast<size_t>(n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < p; ++c) acc += vg[i * p + c] * vv[c * n + j];
          const double d = acc * gelu_derivative_reference(vh[i * n + j], true);
          want[i * n + j] = d;
          want_b[j] += d;
        }
      // float32: held to TF32's bound, the precision the helper is meant for (its header).
      const double tol = dt == kFloat32 ? 2e-3 : norm_tolerance(dt);
      CHECK(norm_error(dh, want) <= tol);
      CHECK(norm_error(db, want_b) <= tol);
    }
}

TEST_CASE("fused_linear_gelu on the GPU refuses operands on two devices") {
  const Tensor x = random({2, 3}), w = random({4, 3});
  CHECK_THROWS_WITH_AS(fused_linear_gelu(x, w.to(kGpu)),
                       doctest::Contains("fused_linear_gelu: expected all tensors to be on the same device"), Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu(x.to(kGpu), w.to(kGpu), random({4})),
                       doctest::Contains("fused_linear_gelu: expected all tensors to be on the same device"), Error);
  CHECK_THROWS_WITH_AS(
      fused_linear_gelu_backward(random({2, 4}).to(kGpu), x.to(kGpu), w, random({2, 4}).to(kGpu), "none"),
      doctest::Contains("fused_linear_gelu_backward: expected all tensors to be on the same device"), Error);
}

#endif  // KILN_WITH_CUDA
