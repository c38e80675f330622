// The sm_90a variant of the skinny GEMM (host side: skinny_wgmma.cu; the portable mma.sync
// kernel: skinny_gemm_kernel.cuh). out[M, N] = epilogue(x w^T + bias) is computed as its
// transpose, out^T = w x^T, so that the operand with many rows (w, a Linear's weight) is
// wgmma's A operand (64-row atoms) and the batch is wgmma's N (16, 32, 64 or 128: BM, the
// smallest that holds M). Both operands arrive K-major exactly as stored (w[N, K] and x[M, K]
// row-major), so TMA copies them into shared memory unchanged, 128B-swizzled, and wgmma reads
// them there.
//
// One CTA = one warpgroup (128 threads) takes BN rows of w (from n0; 64, or 128 for the
// benchmark: two wgmma atoms, each row of x read from L2 serving twice the rows of w, measured
// slower) by BM rows of x (from m0) over its cluster rank's share of the k blocks (64 wide: one
// 128-byte row). Its thread 0 issues the TMA loads of a whole stage (the w box and the x box;
// rows past N or M and columns past K arrive as zeros) into a ring of p.stages stages (at most
// kMaxStages), each stage completing on its own mbarrier; at the start it fills the whole ring,
// so a rank's share of up to p.stages k blocks is in flight at once. Every thread waits on a stage's mbarrier, the
// warpgroup issues its wgmma (4 k16 steps per atom), keeps one group in flight, and once the
// previous stage's group has completed thread 0 refills that stage with the block p.stages ahead
// (the stage's only reader is this warpgroup's wgmma, so its completion is the "empty" signal;
// no second barrier). The host picks the ring depth so that two CTAs fit on an SM (next
// paragraph).
//
// The accumulators (D = w x^T: row = n, column = m) go to a [BM][BN + 4] fp32 tile in shared
// memory (m-major, so out's rows come out contiguous; conflict-free: see skinny_wgmma.cu), and
// the split-K epilogue shared with the portable kernel (skinny_gemm_epilogue.cuh) reduces the
// cluster's tiles through distributed shared memory in rank order and stores.
//
// Programmatic dependent launch: the kernel waits (griddepcontrol.wait) before its first
// global read or write and lets its dependent start (launch_dependents) right after that, so
// when the host launches the next kernel with the programmatic attribute (skinny_wgmma.cu does
// by default), that kernel's CTAs start while this one runs, on the SMs beside this one's CTAs
// (a CTA takes under half an SM's shared memory). Before its wait such a CTA asks L2 to fetch
// its share of w (cp.async.bulk.prefetch, with p.prefetch_l2): the next layer's weights then
// stream from DRAM while this layer computes, and its TMA loads after the wait hit L2. This is
// safe even when the previous kernel writes w (an optimizer step): a prefetch only moves lines
// into L2, which every SM's writes reach and which TMA reads, so the loads after the wait see
// the new values. Without the attribute both are no-ops and the prefetch merely precedes the
// loads.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "skinny_gemm_epilogue.cuh"
#include "sm90_ptx.cuh"
#include "sm90_wgmma.cuh"

namespace kiln::cuda_kernels::skinny {

/// Asks L2 to fetch the box of `map` at (c0, c1) (columns, rows), completing on nothing: a hint
/// that moves no data into the CTA.
__device__ __forceinline__ void prefetch_l2_2d(const CUtensorMap* map, int32_t c0, int32_t c1) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1)
               : "memory");
}

/// Compile-time sizes of the wgmma kernel for BN rows of w and BM rows of x per CTA.
template <int BN, int BM>
struct WgTile {
  static_assert(BN == 64 || BN == 128, "WgTile: BN is 64 or 128");
  static_assert(BM == 16 || BM == 32 || BM == 64 || BM == 128, "WgTile: BM is 16, 32, 64 or 128");
  static constexpr int kBlockN = BN;   ///< rows of w per CTA
  static constexpr int kAtoms = BN / 64;  ///< wgmma's 64-row A atoms per k step
  static constexpr int kBlockK = 64;   ///< k per stage: one 128-byte swizzle row of 16-bit elements
  static constexpr int kThreads = 128; ///< one warpgroup
  static constexpr int kWBytes = kBlockN * 128;
  static constexpr int kXBytes = BM * 128;
  static constexpr int kStageBytes = kWBytes + kXBytes;  ///< a multiple of 1024: stages stay swizzle-aligned
  static constexpr int kRedLd = kBlockN + 4;             ///< floats per partial-tile row (bank spread)
  static constexpr int kRedBytes = BM * kRedLd * 4;
  /// The deepest ring the kernel is built for: 8 stages, fewer when they and the partial tile
  /// would pass ~200 KB. The host runs fewer (Params::stages; default_stages()).
  static constexpr int kMaxStages =
      (200 * 1024 - kRedBytes) / kStageBytes < 8 ? (200 * 1024 - kRedBytes) / kStageBytes : 8;
  static constexpr int kAccumulators = BM / 2;  ///< fp32 per thread and atom: 64 x BM over 128 threads
  /// Dynamic shared memory of a ring of `stages` stages.
  static constexpr int smem_bytes(int stages) { return stages * kStageBytes + kRedBytes + 1024; }  // + alignment slack
  /// The ring depth the host runs by default: the deepest (at most kMaxStages, at least 2) with
  /// which two CTAs share an SM (2 x (smem + 1 KB reserved) <= 228 KB), so that a programmatic
  /// dependent's CTAs start beside this kernel's.
  static constexpr int default_stages() {
    int stages = kMaxStages;
    while (stages > 2 && 2 * (smem_bytes(stages) + 1024) > 228 * 1024) --stages;
    return stages;
  }
  static_assert(kStageBytes % 1024 == 0 && kMaxStages >= 2, "WgTile: stage layout");
};

/// The kernel: grid (BN-row tiles of w x split, BM-row tiles of x), clusters of `split` CTAs
/// along x (the host's cluster attribute), WgTile<BN, BM>::kThreads threads.
template <typename T, int BN, int BM, Epi E>
__global__ void __launch_bounds__(WgTile<BN, BM>::kThreads, 1)
    skinny_wgmma_kernel(const __grid_constant__ CUtensorMap map_w, const __grid_constant__ CUtensorMap map_x,
                        const Params p) {
#if defined(KILN_SM90A_DEVICE)
  using Cfg = WgTile<BN, BM>;
  const int stages = p.stages;  // 2..Cfg::kMaxStages, checked by the host
  // Static shared memory: the stages' mbarriers (a build without this body has none: the host
  // tells an image with the body from one without by it).
  __shared__ __align__(8) uint64_t full[Cfg::kMaxStages];
  extern __shared__ __align__(16) uint8_t dynamic_smem[];
  const uint32_t base = sm90::smem_address(dynamic_smem);
  const uint32_t ring = (base + 1023u) & ~1023u;
  float* red = reinterpret_cast<float*>(dynamic_smem + (ring - base) + stages * Cfg::kStageBytes);
  const uint32_t full0 = sm90::smem_address(&full[0]);
  const int tid = static_cast<int>(threadIdx.x);

  const int split = p.split;
  const int rank = static_cast<int>(blockIdx.x) % split;  // the cluster rank: clusters tile grid x
  const int n0 = static_cast<int>(blockIdx.x) / split * Cfg::kBlockN;
  const int m0 = static_cast<int>(blockIdx.y) * BM;  // (accepts() keeps m below 2^22)
  const int m_valid = p.m - m0 < BM ? p.m - m0 : BM;
  const int kb_begin = rank * p.blocks_per_rank;
  const int nkb = max(min(kb_begin + p.blocks_per_rank, p.k_blocks) - kb_begin, 0);
  // Benchmark stamps (Params::trace), kept by thread 0 in registers and stored at the exit.
  unsigned long long stamps[kSkinnyTracePoints] = {};
  const bool traced = p.trace != nullptr && tid == 0;
  if (traced) stamps[0] = sm90::global_timer_ns();

  if (tid == 0) {
    for (int s = 0; s < stages; ++s) sm90::mbarrier_init(full0 + 8 * s, 1);
    sm90::fence_mbarrier_init();
    sm90::prefetch_tensor_map(&map_w);
    sm90::prefetch_tensor_map(&map_x);
    // This rank's share of w into L2 (see the top of the file: safe before the wait).
    if (p.prefetch_l2)
      for (int i = 0; i < nkb; ++i) prefetch_l2_2d(&map_w, (kb_begin + i) * Cfg::kBlockK, n0);
  }
  __syncthreads();
  // Nothing global is read into the CTA before this point: a dependent launch may have started
  // us early (the L2 prefetch above brings nothing into the CTA).
  sm90::griddepcontrol_wait();
  sm90::griddepcontrol_launch_dependents();
  if (traced) stamps[1] = sm90::global_timer_ns();
  // The epilogue's bias, read now (after the wait: a previous kernel may write it) so that its
  // latency hides under the mainloop instead of stalling the epilogue.
  float bias4[4];
  epilogue_bias<T, Cfg::kBlockN, Cfg::kThreads>(p, split, rank, n0, m_valid, tid, bias4);

  // Local block i (k block kb_begin + i) into stage i % stages (thread 0 only).
  auto issue = [&](int i) {
    const int s = i % stages;
    const uint32_t bar = full0 + 8 * s;
    const uint32_t a = ring + s * Cfg::kStageBytes;
    const int k0 = (kb_begin + i) * Cfg::kBlockK;
    sm90::mbarrier_arrive_expect_tx(bar, Cfg::kStageBytes);  // zero-filled boxes count in full
    sm90::tma_load_2d(a, &map_w, bar, k0, n0);
    sm90::tma_load_2d(a + Cfg::kWBytes, &map_x, bar, k0, m0);
  };
  if (tid == 0)
    for (int i = 0; i < stages && i < nkb; ++i) issue(i);

  float acc[Cfg::kAtoms][Cfg::kAccumulators];
#pragma unroll
  for (int t = 0; t < Cfg::kAtoms; ++t)
#pragma unroll
    for (int j = 0; j < Cfg::kAccumulators; ++j) acc[t][j] = 0.0f;
  for (int i = 0; i < nkb; ++i) {
    const int s = i % stages;
    sm90::mbarrier_wait(full0 + 8 * s, static_cast<uint32_t>(i / stages) & 1u);
    if (traced && i == 0) stamps[2] = sm90::global_timer_ns();
    const uint32_t a = ring + s * Cfg::kStageBytes;
    const uint64_t desc_a = sm90::smem_descriptor_sw128(a);
    const uint64_t desc_b = sm90::smem_descriptor_sw128(a + Cfg::kWBytes);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockK / 16; ++kk) {
      const uint32_t scale_d = (i > 0 || kk > 0) ? 1u : 0u;
#pragma unroll
      for (int t = 0; t < Cfg::kAtoms; ++t) {
        // Atom t: rows 64 t.. of the w tile, 64 x 128 bytes further (the descriptor counts 16 bytes).
        const uint64_t da = desc_a + t * (64 * 128 / 16) + 2 * kk;
        if constexpr (BM == 128) sm90::wgmma_m64<128, T>(acc[t], da, desc_b + 2 * kk, scale_d);
        else sm90::wgmma_m64_narrow<BM, T>(acc[t], da, desc_b + 2 * kk, scale_d);
      }
    }
    sm90::wgmma_commit_group();
    if (i > 0) {
      // Block i - 1's wgmma have read their stage: refill it with the block stages ahead.
      sm90::wgmma_wait_group<1>();
      if (tid == 0 && i - 1 + stages < nkb) issue(i - 1 + stages);
    }
  }
  sm90::wgmma_wait_group<0>();
#pragma unroll
  for (int t = 0; t < Cfg::kAtoms; ++t)
#pragma unroll
    for (int j = 0; j < Cfg::kAccumulators; ++j) sm90::fence_operand(acc[t][j]);
  if (traced) stamps[3] = sm90::global_timer_ns();

  // The partial tile, [m][n]: in atom t, thread i holds D rows (n) 64 t + 16 (i / 32) +
  // (i % 32) / 4 and + 8, columns (m) 8 j + 2 (i % 4) and + 1, as d[4j], d[4j + 1] (row n) and
  // d[4j + 2], d[4j + 3] (row n + 8).
  {
    const int warp = tid / 32, lane = tid % 32;
#pragma unroll
    for (int t = 0; t < Cfg::kAtoms; ++t) {
      const int n = t * 64 + warp * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < BM / 8; ++j) {
        const int m = j * 8 + 2 * (lane % 4);
        red[m * Cfg::kRedLd + n] = acc[t][4 * j];
        red[(m + 1) * Cfg::kRedLd + n] = acc[t][4 * j + 1];
        red[m * Cfg::kRedLd + n + 8] = acc[t][4 * j + 2];
        red[(m + 1) * Cfg::kRedLd + n + 8] = acc[t][4 * j + 3];
      }
    }
  }
  if (split > 1) sm90::cluster_sync();  // release our partial, acquire the others'
  else __syncthreads();
  if (traced) stamps[4] = sm90::global_timer_ns();
  split_k_epilogue<T, Cfg::kBlockN, Cfg::kRedLd, Cfg::kThreads, E>(p, red, split, rank, n0, m0, m_valid, tid, bias4,
                                                                   traced ? stamps + 5 : nullptr);
  if (split > 1) sm90::cluster_wait_acquire();  // the others may still be reading our partial (the epilogue arrived)
  if (traced) {
    stamps[7] = sm90::global_timer_ns();
    unsigned long long* row = p.trace + (static_cast<size_t>(blockIdx.y) * gridDim.x + blockIdx.x) * kSkinnyTracePoints;
#pragma unroll
    for (int j = 0; j < kSkinnyTracePoints; ++j) row[j] = stamps[j];
  }
#endif  // KILN_SM90A_DEVICE
}

}  // namespace kiln::cuda_kernels::skinny
