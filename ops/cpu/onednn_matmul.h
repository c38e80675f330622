// One float tile of the CPU GEMM through oneDNN, on the calling thread: its matmul primitive
// for most tiles, its sgemm for large tiles on Intel CPUs.
//
// Why the primitive and not dnnl_sgemm (the tile kernel before 2026-12-03): oneDNN 2.6's
// matmul primitive runs its brgemm kernels (`brg:avx512_core` on AVX-512 machines), which on
// one thread of the development VM took linear (64,1024,4096) in 4.3 ms against sgemm's 5.4
// and (1024,1024,4096) in 56 ms against 86 (BENCHMARKS.md 9, "fifth session"). A primitive
// is built once per tile shape and layout (its kernels are generated code) and kept in a
// process-wide cache; each call wraps the caller's buffers and runs it single-threaded, so a
// tile's bits depend on its shape and layout only, on whichever thread runs it.
//
// Why sgemm after all for large tiles on Intel (2026-12-04): on the H200 hosts' Xeons (Emerald
// Rapids) oneDNN's sgemm (`gemm:jit`) ran one-thread tiles with every edge 1024 or more 0-8%
// faster than the brgemm primitive, which lost to MKL (PyTorch's GEMM) by about that much at
// linear (1024,4096,1024); with an edge of 512 the two were even, at 64 rows sgemm was 30-40%
// slower, and on AMD EPYC VMs it was even or slower (BENCHMARKS.md 9). So the kernel is
// chosen by the CPU's vendor and the tile's sizes (onednn_tile_kernel), never by timing: the
// bits still depend on the tile alone. A bias is added after sgemm (beta = 0) rather than
// summed into (the tile filled with it, beta = 1): on those Xeons the second took 2-4% longer
// than sgemm without a bias, the first 0.5-4.8% less than the second in 5 of 6 pairs
// (BENCHMARKS.md 9, seventh and eighteenth sessions).
#pragma once

#include <cstdint>
#include <optional>

namespace kiln::cpu {

/// A strided float matrix operand: element (r, c) is data[r * row_stride + c * col_stride].
struct FloatOperand {
  const float* data;
  int64_t row_stride, col_stride;
};

/// The oneDNN kernels a float tile can run on (the rule picks the first two).
enum class OnednnTileKernel : uint8_t {
  Matmul,          ///< the matmul primitive (brgemm on AVX-512), the bias and beta applied by it
  Sgemm,           ///< dnnl_sgemm (`gemm:jit`) with beta = 0, then the bias added to the tile
  SgemmBiasFirst,  ///< dnnl_sgemm summing into the tile filled with the bias (beta = 1): the
                   ///< older order, reached only by forcing, for benchmarks' comparisons
};

/// Every OnednnTileKernel, in declaration order (tests and benchmarks force each in turn).
inline constexpr OnednnTileKernel kOnednnTileKernels[] = {OnednnTileKernel::Matmul, OnednnTileKernel::Sgemm,
                                                          OnednnTileKernel::SgemmBiasFirst};

/// The kernel's name as tests and benchmarks print and take it: "primitive", "sgemm", "sgemm-bias-first".
constexpr const char* onednn_tile_kernel_name(OnednnTileKernel kernel) {
  switch (kernel) {
    case OnednnTileKernel::Matmul: return "primitive";
    case OnednnTileKernel::Sgemm: return "sgemm";
    case OnednnTileKernel::SgemmBiasFirst: return "sgemm-bias-first";
  }
  return "unknown";
}

/// The kernel onednn_matmul_tile runs an mt x nt x K tile with: Sgemm for tiles of at least
/// 1024 x 1024 x 1024 on Intel CPUs, Matmul otherwise (and for operands sgemm cannot read).
OnednnTileKernel onednn_tile_kernel(int64_t mt, int64_t nt, int64_t K);

/// out (mt x nt, row stride ldo) = alpha * a (mt x K) @ b (K x nt) + (bias ? bias[0..nt)
/// broadcast over the rows : beta * out), single-threaded, through oneDNN (KILN_ONEDNN builds
/// only; the kernel: onednn_tile_kernel). beta == 0 ignores out's contents. K must be at
/// least 1, and a bias needs alpha == 1 (oneDNN's primitive would scale it). Throws
/// kiln::Error naming the tile when oneDNN refuses it.
void onednn_matmul_tile(float* out, int64_t ldo, const FloatOperand& a, const FloatOperand& b, int64_t mt,
                        int64_t nt, int64_t K, float alpha, float beta, const float* bias);

/// How many primitives the cache holds now (tests and benchmarks).
int64_t onednn_matmul_cached_primitives();

/// The calling thread's scratchpad size in bytes: the largest any tile it ran has asked for
/// (0 when none has; oneDNN asks for one or not by shape and CPU). Tests use it.
int64_t onednn_matmul_thread_scratchpad_bytes();

/// The failures onednn_matmul_inject_fault_for_testing can provoke.
enum class OnednnFault {
  PrimitiveBuild,  ///< oneDNN refuses a tile shape that is not cached yet
  Scratchpad,      ///< a thread's scratchpad cannot grow (aligned_alloc returns nullptr)
  Sgemm,           ///< dnnl_sgemm returns an error status
};

/// Test hook: the next such event on any thread fails as the real failure would, so the
/// error paths can be tested. Does nothing in builds without oneDNN.
void onednn_matmul_inject_fault_for_testing(OnednnFault fault);

/// Test and benchmark hook: every tile runs on `kernel` (nullopt: onednn_tile_kernel's rule
/// again), where the operands allow it. Process-wide; not for use while tiles run.
void onednn_matmul_force_kernel_for_testing(std::optional<OnednnTileKernel> kernel);

/// onednn_matmul_force_kernel_for_testing for a scope: the rule again when it ends.
class ScopedOnednnTileKernel {
 public:
  explicit ScopedOnednnTileKernel(std::optional<OnednnTileKernel> kernel) {
    onednn_matmul_force_kernel_for_testing(kernel);
  }
  ~ScopedOnednnTileKernel() { onednn_matmul_force_kernel_for_testing(std::nullopt); }
  ScopedOnednnTileKernel(const ScopedOnednnTileKernel&) = delete;
  ScopedOnednnTileKernel& operator=(const ScopedOnednnTileKernel&) = delete;
};

}  // namespace kiln::cpu
