// Kiln's own GEMM for 16-bit linears with few rows ("skinny": a batch of up to ~128 tokens),
// out[M, N] = epilogue(x[M, K] @ w[N, K]^T + bias[N]). At such M the work is reading w once
// from device memory; cuBLASLt's kernels for it (a split-K GEMM plus a reduce kernel, or a GEMM
// plus a separate GELU kernel) spend ~2x that. This kernel streams w exactly once into tensor
// cores, splits K over a thread-block cluster whose partial tiles are summed through distributed
// shared memory (one launch, no workspace, no counters: one CUDA graph node), and applies bias
// and GELU on the way out. Two kernels: a portable one (mma.sync fed by a cp.async ring,
// skinny_gemm_kernel.cuh) and, on compute capability 9.0, an sm_90a one computing out^T = w x^T
// with wgmma fed by TMA (skinny_wgmma_kernel.cuh, skinny_wgmma.cu); the choice of kernel,
// tiles and split and the launch are in skinny_gemm.cu. Both share the epilogue
// (skinny_gemm_epilogue.cuh).
//
// Rounding: h = round16(acc + bias) and out = round16(gelu(h)), exactly as a 16-bit linear
// followed by the gelu op rounds (the exact GELU is gelu_fast, the tanh GELU unary_math.h's
// formula in float), so a fused call and linear-then-gelu on this kernel agree bit for bit.
// Plain C++ types: the matmul and fused_linear_gelu kernels and the tests include it. CUDA
// builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kiln::cuda_kernels {

/// The element type of x, w, bias, out and pre (all the same); accumulation is fp32.
enum class SkinnyType : uint8_t { BFloat16, Float16 };

/// What is applied to h = x w^T + bias before out is stored.
enum class SkinnyEpilogue : uint8_t {
  Bias,      ///< out = h (a linear)
  GeluExact, ///< out = gelu(h), erf form (gelu_fast)
  GeluTanh,  ///< out = gelu(h), tanh approximation
};

/// Which of the two kernels runs a call.
enum class SkinnyKernel : uint8_t {
  Auto,      ///< the sm_90a kernel where the device runs it, else the portable one
  Portable,  ///< mma.sync through a cp.async ring (compute capability 8.0 and newer)
  Wgmma,     ///< wgmma fed by TMA (compute capability 9.0 with this build's sm_90a image)
};

/// One call: row-major matrices, leading dimensions (row strides) in elements.
struct SkinnyGemmArgs {
  SkinnyType type = SkinnyType::BFloat16;
  SkinnyEpilogue epilogue = SkinnyEpilogue::Bias;
  int64_t m = 0, n = 0, k = 0;
  const void* x = nullptr;     ///< [m, k], row stride ldx
  int64_t ldx = 0;
  const void* w = nullptr;     ///< [n, k], row stride ldw (a Linear's weight as stored)
  int64_t ldw = 0;
  const void* bias = nullptr;  ///< [n], contiguous, or null for no bias
  void* out = nullptr;         ///< [m, n], row stride ldo
  int64_t ldo = 0;
  void* pre = nullptr;         ///< optional [m, n], row stride ldp: h (GELU epilogues only)
  int64_t ldp = 0;
  int split_k = 0;             ///< benchmark override: cluster size along K (1..8); 0 = chosen
  int warps_k = 0;             ///< benchmark override: warps sharing a k block (2 or 4); 0 = chosen
                               ///< (the portable kernel's; not with SkinnyKernel::Wgmma)
  SkinnyKernel kernel = SkinnyKernel::Auto;  ///< benchmark/test override: which kernel runs
  int block_n = 0;  ///< benchmark override: rows of w per CTA of the sm_90a kernel (64, 128); 0 = 64
                    ///< (not with SkinnyKernel::Portable; unused where Auto picks the portable one)
  /// The sm_90a kernel launches with programmatic dependent launch (it may start while the
  /// previous kernel on the stream finishes, and waits for it before touching memory); false
  /// is a benchmark's comparison. The portable kernel launches without it either way.
  bool programmatic = true;
  /// Benchmark override: the sm_90a kernel's shared-memory ring depth (2..8, capped at what the
  /// tile is built for); 0 = the default, shallow enough for two CTAs per SM.
  int stages = 0;
  /// The sm_90a kernel asks L2 to prefetch its share of w before it waits for the previous
  /// kernel (safe: skinny_wgmma.cu); false is a benchmark's comparison.
  bool prefetch_l2 = true;
  /// Benchmark override: at most this many 4-column groups one thread of the split-K epilogue
  /// sums and rounds at once (1..4); 0 = the kernel's choice (4 at splits 1-2, 2 at 3-4, 1
  /// above). Any value gives the same bits.
  int epilogue_batch = 0;
  /// Benchmark only: the sm_90a kernel writes each CTA's %globaltimer stamps here (CTA c =
  /// blockIdx.y * gridDim.x + blockIdx.x at [8 c, 8 c + 8): entry, past the wait for the previous
  /// kernel, first stage landed, mainloop done, partials exchanged, the epilogue's first group
  /// summed, its last stored, exit). It must hold 8 x the grid's CTAs (at most 8 x 8 x
  /// ceil(n / 64) x ceil(m / 128 or less)); null: no stamps.
  unsigned long long* trace = nullptr;
};

/// The arguments for dense row-major operands, x [m, k], w [n, k], bias [n] (or null) and
/// out [m, n] (benchmarks and tests; the ops pass their own strides).
inline SkinnyGemmArgs skinny_dense_args(SkinnyType type, SkinnyEpilogue epilogue, int64_t m, int64_t n, int64_t k,
                                        const void* x, const void* w, const void* bias, void* out) {
  SkinnyGemmArgs a;
  a.type = type;
  a.epilogue = epilogue;
  a.m = m, a.n = n, a.k = k;
  a.x = x, a.ldx = k;
  a.w = w, a.ldw = k;
  a.bias = bias;
  a.out = out, a.ldo = n;
  return a;
}

/// The largest m that skinny_gemm_supported() takes on the current device (measured on an H200:
/// docs/notes/skinny_gemm.md): 16 for the portable kernel, 64 where the sm_90a kernel runs;
/// above it a plain linear through cuBLASLt is faster.
int64_t skinny_gemm_max_m();

/// Whether the kernel can compute this call on some device: m, n, k > 0 (m < 4 Mi, n and
/// k below 2^31 - 128), k a multiple of 8, x and w 16-byte aligned with ldx, ldw multiples of 8 and
/// at least k, ldo (ldp) at least n, pre only with a GELU epilogue, valid overrides (warps_k
/// not with SkinnyKernel::Wgmma, block_n not with SkinnyKernel::Portable), non-null pointers.
/// Touches no device.
bool skinny_gemm_accepts(const SkinnyGemmArgs& args);

/// accepts(), and the current device runs it (compute capability 8.0 or newer, an image of the
/// kernel in this build; the kernel override's, if set) and the size policy says it pays:
/// m <= skinny_gemm_max_m(), and on
/// GPUs without thread-block clusters enough tiles to fill half the SMs; the tile's shared memory
/// within the device's limit. Touches no stream;
/// per-device facts are cached on first use, so a call made before a CUDA graph capture keeps
/// runtime queries out of the capture.
bool skinny_gemm_supported(const SkinnyGemmArgs& args);

/// Enqueues the kernel on `stream` (the current device's): the sm_90a one where the device runs
/// it (unless overridden), else the portable one. Throws kiln::Error when accepts() says no or
/// the current device cannot run the kernel; the size policy is not applied (benchmarks call it
/// past skinny_gemm_max_m()).
void skinny_gemm(const SkinnyGemmArgs& args, cudaStream_t stream);

}  // namespace kiln::cuda_kernels
