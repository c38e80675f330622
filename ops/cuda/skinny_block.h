// The MLP block y = gelu(x w1^T + b1) w2^T + b2 (exact GELU) at a small batch in one sm_90a
// launch (kernel: skinny_block_kernel.cuh; host: skinny_block.cu): every weight byte of both
// layers in flight from the start, the down-projection starting on each k block of h as soon
// as the up-projection has stored it. Rounding per layer as the skinny GEMM's (h =
// round16(gelu(round16(x w1^T + b1))), y = round16(h w2^T + b2)); with the same split of the
// up-projection's K, h equals skinny_gemm's GELU epilogue bit for bit.
//
// Experimental: reached from the benchmark and the tests, not from an op or the graph pass,
// because it is not yet faster: 19.4 us against 15.4 for the two skinny launches at (64, 1024,
// 4096, 1024) on an H200 (docs/notes/skinny_gemm.md, v6 and v9: its split-K exchange through
// global memory is what is left). Plain C++ types; CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "skinny_gemm.h"

namespace kiln::cuda_kernels {

/// One block call: row-major matrices, leading dimensions (row strides) in elements.
struct SkinnyBlockArgs {
  SkinnyType type = SkinnyType::BFloat16;
  int64_t m = 0, k = 0, hidden = 0, n = 0;  ///< x [m, k], w1 [hidden, k], w2 [n, hidden]
  const void* x = nullptr;
  int64_t ldx = 0;
  const void* w1 = nullptr;
  int64_t ldw1 = 0;
  const void* b1 = nullptr;  ///< [hidden] or null
  const void* w2 = nullptr;
  int64_t ldw2 = 0;
  const void* b2 = nullptr;  ///< [n] or null
  void* h = nullptr;         ///< [m, hidden] out: gelu(x w1^T + b1)
  int64_t ldh = 0;
  void* y = nullptr;         ///< [m, n] out
  int64_t ldy = 0;
  /// Device memory of at least skinny_block_workspace_bytes(): partial tiles and counters.
  /// Zero it once before its first use; every launch leaves its counters at zero again.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  /// Launch with programmatic dependent launch (the kernel waits for the previous one before
  /// touching memory, as the skinny kernel does).
  bool programmatic = true;
  /// The down-projection's CTAs start loading w2 once this many of the up-projection's CTAs
  /// have their whole share of w1 in shared memory, so that DRAM serves w1 first; 0: at once,
  /// with an L2 prefetch of w2 before the previous kernel ends; -1 (default): half of them
  /// (measured best, docs/notes/skinny_gemm.md v9). A benchmark knob otherwise.
  int w2_after_up_ctas = -1;
  /// Benchmark only: each CTA's kSkinnyBlockTracePoints %globaltimer stamps (entry, waited, first
  /// input ready, first stage landed, last input ready, mainloop done, partials exchanged, last
  /// group stored, exit) at trace + blockIdx.x * kSkinnyBlockTracePoints; null: no stamps.
  unsigned long long* trace = nullptr;
};

/// Stamps per CTA of SkinnyBlockArgs::trace.
inline constexpr int kSkinnyBlockTracePoints = 9;

/// The workspace a call of these sizes needs (0 when the sizes are out of range).
size_t skinny_block_workspace_bytes(int64_t m, int64_t k, int64_t hidden, int64_t n);

/// How many of the grid's CTAs (the first ones) compute the up-projection (0 when the sizes
/// are out of range); the rest compute the down-projection. For reading SkinnyBlockArgs::trace.
int64_t skinny_block_up_ctas(int64_t m, int64_t k, int64_t hidden, int64_t n);

/// Whether the current device runs the block kernel for `args`: skinny_wgmma_ready(), m in
/// [1, 64], k and hidden in [1, 4096], n in [1, 2^20], row strides that TMA takes (multiples of
/// 8 elements, 16-byte aligned x, w1, w2, h), all CTAs resident at once, a large enough workspace.
bool skinny_block_accepts(const SkinnyBlockArgs& args);

/// Enqueues the block on `stream`; throws kiln::Error (naming the refused value) when
/// skinny_block_accepts() is false.
void skinny_mlp_block(const SkinnyBlockArgs& args, cudaStream_t stream);

/// A dense call: x [m, k], w1 [hidden, k], w2 [n, hidden], h [m, hidden], y [m, n].
inline SkinnyBlockArgs skinny_block_dense_args(SkinnyType type, int64_t m, int64_t k, int64_t hidden, int64_t n,
                                               const void* x, const void* w1, const void* b1, const void* w2,
                                               const void* b2, void* h, void* y, void* workspace,
                                               size_t workspace_bytes) {
  SkinnyBlockArgs a;
  a.type = type;
  a.m = m, a.k = k, a.hidden = hidden, a.n = n;
  a.x = x, a.ldx = k;
  a.w1 = w1, a.ldw1 = k, a.b1 = b1;
  a.w2 = w2, a.ldw2 = hidden, a.b2 = b2;
  a.h = h, a.ldh = hidden;
  a.y = y, a.ldy = n;
  a.workspace = workspace, a.workspace_bytes = workspace_bytes;
  return a;
}

}  // namespace kiln::cuda_kernels
