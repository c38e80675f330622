// One float tile of the CPU GEMM through oneDNN's matmul primitive, on the calling thread.
//
// Why the primitive and not dnnl_sgemm (the tile kernel before 2026-12-03): oneDNN 2.6's
// matmul primitive runs its brgemm kernels (`brg:avx512_core` on AVX-512 machines), which on
// one thread of the development VM took linear (64,1024,4096) in 4.3 ms against sgemm's 5.4
// and (1024,1024,4096) in 56 ms against 86 (BENCHMARKS.md 9, "fifth session"). A primitive
// is built once per tile shape and layout (its kernels are generated code) and kept in a
// process-wide cache; each call wraps the caller's buffers and runs it single-threaded, so a
// tile's bits depend on its shape and layout only, on whichever thread runs it.
#pragma once

#include <cstdint>

namespace kiln::cpu {

/// A strided float matrix operand: element (r, c) is data[r * row_stride + c * col_stride].
struct FloatOperand {
  const float* data;
  int64_t row_stride, col_stride;
};

/// out (mt x nt, row stride ldo) = alpha * a (mt x K) @ b (K x nt) + (bias ? bias[0..nt)
/// broadcast over the rows : beta * out), single-threaded, through oneDNN's matmul primitive
/// (KILN_ONEDNN builds only). beta == 0 ignores out's contents. K must be at least 1, and a
/// bias needs alpha == 1 (oneDNN would scale it). Throws kiln::Error naming the tile when
/// oneDNN refuses it.
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
};

/// Test hook: the next such event on any thread fails as the real failure would, so the
/// error paths can be tested. Does nothing in builds without oneDNN.
void onednn_matmul_inject_fault_for_testing(OnednnFault fault);

}  // namespace kiln::cpu
