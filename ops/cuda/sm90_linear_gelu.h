// Kiln's own Hopper (sm_90a) kernel for out = GELU(x @ w^T + bias) with exact (erf) GELU,
// the one cuBLASLt's epilogues do not compute: wgmma tensor cores fed by TMA loads through a
// multi-stage shared-memory pipeline, bias and GELU applied to the fp32 accumulator in
// registers, the result (and, when asked, the pre-activation for backward) stored once.
// fused_linear_gelu's CUDA kernel asks sm90_linear_gelu_supported() first and takes the
// portable path (cuBLASLt GEMM + bias, then one GELU kernel) when it says no. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kiln::cuda_kernels {

/// The element type of x, w, bias, out and pre (all the same); accumulation is fp32.
enum class Sm90GemmType : uint8_t { BFloat16, Float16, TF32 /* float32 storage, TF32 math */ };

/// One call: row-major matrices, leading dimensions in elements.
struct Sm90LinearGeluArgs {
  Sm90GemmType type = Sm90GemmType::BFloat16;
  int64_t m = 0, n = 0, k = 0;
  const void* x = nullptr;    ///< [m, k], row stride ldx
  int64_t ldx = 0;
  const void* w = nullptr;    ///< [n, k], row stride ldw (a Linear's weight as stored)
  int64_t ldw = 0;
  const void* bias = nullptr; ///< [n], contiguous, or null for no bias
  void* out = nullptr;        ///< [m, n], row stride ldo: GELU(x w^T + bias)
  int64_t ldo = 0;
  void* pre = nullptr;        ///< optional [m, n], row stride ldp: x w^T + bias (for backward)
  int64_t ldp = 0;
};

/// Whether the sm_90a kernel takes this call on the current device (compute capability 9.0,
/// a build with sm_90a code, sizes and alignments the TMA descriptors accept, and at least
/// 4 Mi outputs, below which cuBLASLt + a GELU kernel is as fast: sm90_linear_gelu.cu).
/// Touches no stream; the per-device facts it reads are cached on first use, so a call made
/// once before a CUDA graph capture keeps runtime queries out of the capture.
bool sm90_linear_gelu_supported(const Sm90LinearGeluArgs& args);

/// Enqueues the kernel on `stream` (the current device's); call only when supported() said yes.
/// The launch is a programmatic dependent one: the kernel's CTAs start and set up while the
/// previous kernel in the stream drains, and wait for it before touching global memory.
void sm90_linear_gelu(const Sm90LinearGeluArgs& args, cudaStream_t stream);

/// Benchmark and test hook: launches without (false) or with (true, the default) the
/// programmatic-dependent-launch attribute. Process-wide.
void sm90_linear_gelu_programmatic_launch_for_testing(bool enabled);

}  // namespace kiln::cuda_kernels
