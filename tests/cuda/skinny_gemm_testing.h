// What the skinny GEMM's test files share (test_skinny_gemm.cpp: both kernels through the
// interface, the routing and the errors; test_skinny_wgmma.cpp: the sm_90a kernel's own cases):
// operands with their float64 reference, one checked call into NaN-poisoned outputs, a shape's
// every epilogue on every kernel that takes the knobs, bitwise equality, an x with unaligned rows.
#pragma once

#ifdef KILN_WITH_CUDA

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/cuda_testing.h"
#include "ops/cuda/skinny_gemm.h"
#include "ops/cuda/skinny_wgmma.h"
#include "ops/fused_linear_gelu_reference.h"
#include "testing.h"

namespace kiln::testing::skinny_tests {

using kiln::cuda_kernels::skinny_gemm;
using kiln::cuda_kernels::skinny_gemm_accepts;
using kiln::cuda_kernels::skinny_gemm_max_m;
using kiln::cuda_kernels::skinny_gemm_supported;
using kiln::cuda_kernels::skinny_wgmma_ready;
using kiln::cuda_kernels::SkinnyEpilogue;
using kiln::cuda_kernels::SkinnyGemmArgs;
using kiln::cuda_kernels::SkinnyKernel;
using kiln::cuda_kernels::SkinnyType;

inline const Device kGpu = Device::cuda(0);

/// Well-formed arguments on made-up, 256-byte aligned addresses (never dereferenced): what
/// accepts() and supported() judge without touching memory.
inline SkinnyGemmArgs dummy_args(int64_t m = 64, int64_t n = 4096, int64_t k = 1024) {
  SkinnyGemmArgs a;
  a.m = m, a.n = n, a.k = k;
  a.x = reinterpret_cast<const void*>(uintptr_t{0x100000});
  a.ldx = k;
  a.w = reinterpret_cast<const void*>(uintptr_t{0x200000});
  a.ldw = k;
  a.out = reinterpret_cast<void*>(uintptr_t{0x300000});
  a.ldo = n;
  return a;
}

/// The batch the routing cases use: 64 (the MLP block's), or the size policy's limit if lower
/// (a function: the limit depends on the device, asked at run time, not at static initialisation).
inline int64_t policy_m() { return std::min<int64_t>(64, skinny_gemm_max_m()); }

/// Whether this machine's current device runs the kernel (asked with one row, which every size
/// policy takes: a refusal then means the device or the build, never the shape).
inline bool kernel_available() { return skinny_gemm_supported(dummy_args(1)); }

/// The kernels this machine's current device runs (the portable one first).
inline std::vector<SkinnyKernel> available_kernels() {
  std::vector<SkinnyKernel> kernels;
  SkinnyGemmArgs a = dummy_args(1);
  a.kernel = SkinnyKernel::Portable;
  if (skinny_gemm_supported(a)) kernels.push_back(SkinnyKernel::Portable);
  if (skinny_wgmma_ready()) kernels.push_back(SkinnyKernel::Wgmma);
  return kernels;
}

inline cudaStream_t current_stream() { return reinterpret_cast<cudaStream_t>(cuda::current_stream(kGpu).id()); }

inline DType dtype_of(SkinnyType t) { return t == SkinnyType::BFloat16 ? kBFloat16 : kFloat16; }

/// h = x w^T (+ b) in float64 on the host (w transposed once, i-k-j order).
inline std::vector<double> reference_h(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t m = x.sizes()[0], k = x.sizes()[1], n = w.sizes()[0];
  const std::vector<double> vx = values(x), vw = values(w);
  std::vector<double> wt(static_cast<size_t>(k * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < k; ++c) wt[static_cast<size_t>(c * n + j)] = vw[static_cast<size_t>(j * k + c)];
  std::vector<double> h(static_cast<size_t>(m * n), 0.0);
  if (b.defined()) {
    const std::vector<double> vb = values(b);
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(h.data() + i * n, vb.data(), static_cast<size_t>(n) * sizeof(double));
  }
  for (int64_t i = 0; i < m; ++i) {
    double* row = h.data() + i * n;
    for (int64_t c = 0; c < k; ++c) {
      const double xv = vx[static_cast<size_t>(i * k + c)];
      const double* wr = wt.data() + c * n;
      for (int64_t j = 0; j < n; ++j) row[j] += xv * wr[j];
    }
  }
  return h;
}

/// Host operands of one problem: x in [-1, 1), w and b scaled so h is O(1).
struct Operands {
  Tensor x, w, b;  // host
  Tensor gx, gw, gb;  // device
  std::vector<double> h;  // float64 reference, with the bias
};

inline Operands make_operands(int64_t m, int64_t n, int64_t k, DType dtype) {
  Operands o;
  const double s = 2.0 / std::sqrt(static_cast<double>(k));
  o.x = random({m, k}, dtype, -1, 1);
  o.w = random({n, k}, dtype, -s, s);
  o.b = random({n}, dtype, -0.5, 0.5);
  o.gx = o.x.to(kGpu);
  o.gw = o.w.to(kGpu);
  o.gb = o.b.to(kGpu);
  o.h = reference_h(o.x, o.w, o.b);
  return o;
}

/// The sm_90a kernel's arguments for out[m, n] = epilogue(x w^T + bias), all dense device tensors.
inline SkinnyGemmArgs wgmma_args(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                                 SkinnyEpilogue e) {
  const SkinnyType type = x.dtype() == kBFloat16 ? SkinnyType::BFloat16 : SkinnyType::Float16;
  SkinnyGemmArgs a = skinny_dense_args(type, e, x.sizes()[0], w.sizes()[0], x.sizes()[1], x.data_ptr(), w.data_ptr(),
                                       bias.data_ptr(), out.data_ptr());
  a.kernel = SkinnyKernel::Wgmma;
  return a;
}

/// The leading dimension a case stores out and pre with: n, or wider (padding that must stay
/// poisoned, and rows whose 8-byte stores are misaligned).
struct Knobs {
  int64_t pad_o = 0;
  int split_k = 0;
  int warps_k = 0;
  SkinnyKernel kernel = SkinnyKernel::Auto;  ///< check_shape: Auto runs every available kernel
  int block_n = 0;
  bool programmatic = true;
  int stages = 0;
  bool prefetch_l2 = true;
  int epilogue_batch = 0;
};

/// One direct call into poisoned [m, n + pad] buffers, checked against the float64 reference.
inline void check_call(const Operands& o, SkinnyType type, SkinnyEpilogue e, bool with_bias, bool with_pre, Knobs knobs) {
  const int64_t m = o.x.sizes()[0], k = o.x.sizes()[1], n = o.w.sizes()[0], ld = n + knobs.pad_o;
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(static_cast<int>(type));
  CAPTURE(static_cast<int>(e));
  CAPTURE(with_bias);
  CAPTURE(with_pre);
  CAPTURE(knobs.pad_o);
  CAPTURE(knobs.split_k);
  CAPTURE(knobs.warps_k);
  CAPTURE(static_cast<int>(knobs.kernel));
  CAPTURE(knobs.block_n);
  CAPTURE(knobs.programmatic);
  CAPTURE(knobs.stages);
  CAPTURE(knobs.prefetch_l2);
  CAPTURE(knobs.epilogue_batch);
  const DType dtype = dtype_of(type);
  const Tensor out = full({m, ld}, kNaN, TensorOptions(dtype).device(kGpu));
  const Tensor pre = with_pre ? full({m, ld}, kNaN, TensorOptions(dtype).device(kGpu)) : Tensor();
  SkinnyGemmArgs a = skinny_dense_args(type, e, m, n, k, o.gx.data_ptr(), o.gw.data_ptr(),
                                       with_bias ? o.gb.data_ptr() : nullptr, out.data_ptr());
  a.ldo = ld;
  a.pre = with_pre ? pre.data_ptr() : nullptr, a.ldp = ld;
  a.split_k = knobs.split_k;
  a.warps_k = knobs.warps_k;
  a.kernel = knobs.kernel;
  a.block_n = knobs.block_n;
  a.programmatic = knobs.programmatic;
  a.stages = knobs.stages;
  a.prefetch_l2 = knobs.prefetch_l2;
  a.epilogue_batch = knobs.epilogue_batch;
  REQUIRE(skinny_gemm_accepts(a));
  skinny_gemm(a, current_stream());
  cuda::synchronize();

  const std::vector<double> vb = values(o.b);
  std::vector<double> want_h(static_cast<size_t>(m * n)), want_out(want_h.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t idx = static_cast<size_t>(i * n + j);
      const double h = o.h[idx] - (with_bias ? 0.0 : vb[static_cast<size_t>(j)]);
      want_h[idx] = h;
      want_out[idx] = e == SkinnyEpilogue::Bias ? h : gelu_reference(h, e == SkinnyEpilogue::GeluTanh);
    }
  const auto split = [&](const Tensor& t, std::vector<double>& inside, int64_t& padding_written) {
    const std::vector<double> v = values(t.cpu());
    inside.resize(static_cast<size_t>(m * n));
    padding_written = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < ld; ++j) {
        const double x = v[static_cast<size_t>(i * ld + j)];
        if (j < n) inside[static_cast<size_t>(i * n + j)] = x;
        else padding_written += std::isnan(x) ? 0 : 1;
      }
  };
  std::vector<double> got;
  int64_t stray = 0;
  split(out, got, stray);
  CHECK(stray == 0);
  CHECK(relative_norm_error(got, want_out) <= norm_tolerance(dtype));  // NaN (unwritten) fails
  if (with_pre) {
    split(pre, got, stray);
    CHECK(stray == 0);
    CHECK(relative_norm_error(got, want_h) <= norm_tolerance(dtype));
  }
}

/// Every epilogue, bias on/off, pre on/off (GELU only), both types, for one shape; on the kernel
/// the knobs name, or (Auto) on every kernel the device runs that takes the knobs (warps_k: the
/// portable one only).
inline void check_shape(int64_t m, int64_t n, int64_t k, Knobs knobs = {}) {
  std::vector<SkinnyKernel> kernels = {knobs.kernel};
  if (knobs.kernel == SkinnyKernel::Auto) {
    kernels = available_kernels();
    if (knobs.warps_k != 0) std::erase(kernels, SkinnyKernel::Wgmma);
  }
  for (SkinnyType type : {SkinnyType::BFloat16, SkinnyType::Float16}) {
    const Operands o = make_operands(m, n, k, dtype_of(type));
    for (SkinnyKernel kernel : kernels) {
      Knobs kn = knobs;
      kn.kernel = kernel;
      check_call(o, type, SkinnyEpilogue::Bias, true, false, kn);
      check_call(o, type, SkinnyEpilogue::Bias, false, false, kn);
      for (SkinnyEpilogue e : {SkinnyEpilogue::GeluExact, SkinnyEpilogue::GeluTanh}) {
        check_call(o, type, e, true, true, kn);
        check_call(o, type, e, true, false, kn);
        check_call(o, type, e, false, true, kn);
      }
    }
  }
}

/// Bitwise equality of two tensors of one shape (NaN equal to NaN).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<double> va = values(a.cpu()), vb = values(b.cpu());
  if (va.size() != vb.size()) return false;
  for (size_t i = 0; i < va.size(); ++i)
    if (!(va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i]))) || std::signbit(va[i]) != std::signbit(vb[i]))
      return false;
  return true;
}

/// x with rows K + 4 apart (a column slice of a wider matrix): the skinny kernel declines it
/// (ldx not a multiple of 8), cuBLASLt takes it, with the same values.
inline Tensor unaligned_rows(const Tensor& x) {
  const int64_t m = x.sizes()[0], k = x.sizes()[1];
  Tensor wide = full({m, k + 4}, 0.0, TensorOptions(x.dtype()).device(x.device()));
  wide.slice(1, 0, k).copy_(x);
  return wide.slice(1, 0, k);
}

}  // namespace kiln::testing::skinny_tests

#endif  // KILN_WITH_CUDA
