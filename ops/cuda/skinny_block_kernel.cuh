// The MLP block y = gelu(x w1^T + b1) w2^T + b2 at a small batch (M <= 64) in ONE sm_90a launch
// (host side: skinny_block.cu; interface: skinny_block.h). At M = 64 each of the block's two
// linears reads an 8 MiB weight in ~1.75 us of DRAM time, yet as two skinny kernels
// (skinny_wgmma_kernel.cuh) each costs ~5-6 us: a ring fill per kernel that nothing overlaps,
// a launch, a tail (docs/notes/skinny_gemm.md, v5). Here every CTA of both layers starts at
// once and loads its whole share of its weight into shared memory (the down-projection's once
// w2_after of the up-projection's CTAs have all of theirs, so that DRAM serves w1 first); the
// down-projection's CTAs then wait, k block by k block, only for the up-projection tiles they
// read.
//
// The grid: the up-projection's CTAs first (tiles1 = ceil(hidden / 64) tiles of 64 rows of w1,
// each split over split1 CTAs along K), then the down-projection's (tiles2 = ceil(n / 64)
// tiles of w2, split2 CTAs each). Every CTA is one warpgroup computing out^T = w x^T for its
// 64 rows of w and the batch (BM = 64 columns, rows past M arrive as zeros), as the skinny
// kernel does: w's k blocks (at most kWBlocks per CTA) all go into shared memory at once, x's
// through a short ring. The host launches only grids whose CTAs are all resident at once (two
// per SM), so no CTA waits for one that cannot run.
//
// The split-K reduction goes through global memory instead of a cluster (the two layers want
// different splits, and a launch has one cluster shape): each CTA parks its fp32 partial tile
// in the workspace and counts itself in (`parked`, a release add after a barrier); once the
// tile's every rank has, each rank reduces its slice of the tile with the skinny GEMM's
// split-K epilogue (skinny_gemm_epilogue.cuh, reading the partials through BlockPartials): a
// batch of groups per thread, all ranks' partials loaded at once and summed in rank order, so
// at the same split the bits equal the two-kernel path's. Up-projection tile j is the
// down-projection's k block j (both 64 wide): each rank counts its stored slice into ready[j]
// (a release add); a down-projection CTA acquires ready[kb] == split1 before its TMA load of
// that k block of h, with a proxy fence on both sides (h is written by ordinary stores, read
// by TMA). Counters are left at zero for the next launch: each down-projection tile's last
// rank (`finished2`) resets its tile's, and the down-projection's last CTA past its loads
// (`done`) resets the up-projection's (ready, parked1, w1_landed).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "skinny_gemm_epilogue.cuh"
#include "skinny_wgmma_kernel.cuh"
#include "sm90_ptx.cuh"
#include "sm90_wgmma.cuh"

namespace kiln::cuda_kernels::skinny {

/// The run-time part of one block launch (checked on the host: skinny_block_accepts).
struct BlockParams {
  const void* b1 = nullptr;  ///< [hidden] or null
  const void* b2 = nullptr;  ///< [n] or null
  void* h = nullptr;         ///< [m, hidden], row stride ldh: gelu(x w1^T + b1)
  void* y = nullptr;         ///< [m, n], row stride ldy
  int64_t ldh = 0, ldy = 0;
  int32_t m = 0, hidden = 0, n = 0;
  int32_t kb1 = 0, kb2 = 0;                  ///< k blocks of each layer (kb2 == tiles1)
  int32_t split1 = 1, per1 = 0, split2 = 1, per2 = 0;  ///< CTAs per tile, k blocks per CTA
  int32_t tiles1 = 0, tiles2 = 0;
  float* ws1 = nullptr;  ///< [tiles1][split1][64][64] partial tiles
  float* ws2 = nullptr;  ///< [tiles2][split2][64][64]
  uint32_t* parked1 = nullptr;    ///< [tiles1] CTAs of the tile whose partial is parked
  uint32_t* parked2 = nullptr;    ///< [tiles2]
  uint32_t* finished2 = nullptr;  ///< [tiles2]
  uint32_t* ready = nullptr;   ///< [tiles1] up-projection tile stored
  uint32_t* done = nullptr;    ///< [1] down-projection CTAs past their loads
  uint32_t* w1_landed = nullptr;  ///< [1] up-projection CTAs whose share of w1 has landed
  uint32_t w2_after = 0;       ///< down-projection CTAs load w2 once w1_landed reaches it (0: at once)
  uint32_t vec_h = 0, vec_y = 0;  ///< rows may be stored 4 elements at a time
  unsigned long long* trace = nullptr;  ///< benchmark stamps (SkinnyBlockArgs::trace) or null
};

/// Compile-time sizes of the block kernel.
struct BlockTile {
  static constexpr int kBlockN = 64;  ///< rows of w per CTA (one wgmma atom)
  static constexpr int kBlockM = 64;  ///< columns of the transposed product: the batch, padded
  static constexpr int kBlockK = 64;
  static constexpr int kThreads = 128;
  static constexpr int kWBlocks = 8;  ///< a CTA's whole share of w, in k blocks
  static constexpr int kXStages = 3;
  static constexpr int kWBytes = kBlockN * 128;
  static constexpr int kXBytes = kBlockM * 128;
  static constexpr int kRedLd = kBlockN + 4;
  static constexpr int kRedBytes = kBlockM * kRedLd * 4;
  static constexpr int kPartial = kBlockM * kBlockN;  ///< floats of one parked partial tile
  /// Dynamic shared memory: w's blocks, x's ring, the partial tile, alignment slack. Two CTAs
  /// per SM: 2 x (106 KB + 1 KB reserved) within the H100/H200's 228 KB.
  static constexpr int kSmemBytes = kWBlocks * kWBytes + kXStages * kXBytes + kRedBytes + 1024;
  static_assert(2 * (kSmemBytes + 1024) <= 228 * 1024, "BlockTile: two CTAs per SM");
};

/// The split-K epilogue's source of partials in the block kernel (ClusterPartials' shape): this
/// rank's own tile from shared memory, the others' parked in global memory (read through L2).
template <int MaxRanks>
struct BlockPartials {
  static constexpr bool kCluster = false;
  const float* red;  ///< this CTA's partial, [m][BlockTile::kRedLd]
  const float* ws;   ///< the tile's parked partials, [split][m][BlockTile::kBlockN]
  int rank;
  __device__ __forceinline__ float4 operator()(int r, int row, int col) const {
    return r == rank ? *reinterpret_cast<const float4*>(red + row * BlockTile::kRedLd + col)
                     : __ldcg(reinterpret_cast<const float4*>(ws + r * BlockTile::kPartial + row * BlockTile::kBlockN +
                                                               col));
  }
};

/// The kernel: grid tiles1 * split1 + tiles2 * split2 CTAs of BlockTile::kThreads threads.
template <typename T>
__global__ void __launch_bounds__(BlockTile::kThreads, 2)
    skinny_block_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w1,
                        const __grid_constant__ CUtensorMap map_h, const __grid_constant__ CUtensorMap map_w2,
                        const BlockParams p) {
#if defined(KILN_SM90A_DEVICE)
  using C = BlockTile;
  __shared__ __align__(8) uint64_t w_full[C::kWBlocks];
  __shared__ __align__(8) uint64_t x_full[C::kXStages];
  extern __shared__ __align__(16) uint8_t dynamic_smem[];
  const uint32_t base = sm90::smem_address(dynamic_smem);
  const uint32_t w_smem = (base + 1023u) & ~1023u;
  const uint32_t x_smem = w_smem + C::kWBlocks * C::kWBytes;
  float* red = reinterpret_cast<float*>(dynamic_smem + (w_smem - base) + C::kWBlocks * C::kWBytes +
                                        C::kXStages * C::kXBytes);
  const uint32_t w_full0 = sm90::smem_address(&w_full[0]);
  const uint32_t x_full0 = sm90::smem_address(&x_full[0]);
  const int tid = static_cast<int>(threadIdx.x);

  const int first_down = p.tiles1 * p.split1;
  const bool up = static_cast<int>(blockIdx.x) < first_down;
  const int local = up ? static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x) - first_down;
  const int split = up ? p.split1 : p.split2;
  const int per = up ? p.per1 : p.per2;
  const int tile = local / split, rank = local % split;
  const int n0 = tile * C::kBlockN;
  const int kb_begin = rank * per;
  const int nkb = max(min(kb_begin + per, up ? p.kb1 : p.kb2) - kb_begin, 0);
  const CUtensorMap* map_w = up ? &map_w1 : &map_w2;
  const CUtensorMap* map_in = up ? &map_x : &map_h;
  // Benchmark stamps (BlockParams::trace), kept by thread 0 in registers and stored at the exit.
  unsigned long long stamps[kSkinnyBlockTracePoints] = {};
  const bool traced = p.trace != nullptr && tid == 0;
  if (traced) stamps[0] = sm90::global_timer_ns();

  if (tid == 0) {
    for (int i = 0; i < C::kWBlocks; ++i) sm90::mbarrier_init(w_full0 + 8 * i, 1);
    for (int s = 0; s < C::kXStages; ++s) sm90::mbarrier_init(x_full0 + 8 * s, 1);
    sm90::fence_mbarrier_init();
    sm90::prefetch_tensor_map(map_w);
    sm90::prefetch_tensor_map(map_in);
    if (up || p.w2_after == 0)
      for (int i = 0; i < nkb; ++i) prefetch_l2_2d(map_w, (kb_begin + i) * C::kBlockK, n0);  // safe: see skinny_wgmma_kernel.cuh
  }
  __syncthreads();
  sm90::griddepcontrol_wait();
  sm90::griddepcontrol_launch_dependents();
  if (traced) stamps[1] = sm90::global_timer_ns();

  // The whole share of w at once (the down-projection's after enough of w1, if asked); x (or h)
  // block i into ring stage i % kXStages (thread 0).
  if (tid == 0 && !up && p.w2_after > 0)
    while (sm90::load_acquire_gpu(p.w1_landed) < p.w2_after) __nanosleep(64);
  if (tid == 0)
    for (int i = 0; i < nkb; ++i) {
      sm90::mbarrier_arrive_expect_tx(w_full0 + 8 * i, C::kWBytes);
      sm90::tma_load_2d(w_smem + i * C::kWBytes, map_w, w_full0 + 8 * i, (kb_begin + i) * C::kBlockK, n0);
    }
  auto issue_in = [&](int i) {
    const int kb = kb_begin + i;
    if (!up) {
      while (sm90::load_acquire_gpu(p.ready + kb) < static_cast<uint32_t>(p.split1)) __nanosleep(40);
      sm90::fence_proxy_async_global();  // the acquired ordinary stores of h before this TMA read
    }
    if (traced && i == 0) stamps[2] = sm90::global_timer_ns();
    if (traced && i == nkb - 1) stamps[4] = sm90::global_timer_ns();
    const int s = i % C::kXStages;
    sm90::mbarrier_arrive_expect_tx(x_full0 + 8 * s, C::kXBytes);
    sm90::tma_load_2d(x_smem + s * C::kXBytes, map_in, x_full0 + 8 * s, kb * C::kBlockK, 0);
  };
  if (tid == 0)
    for (int i = 0; i < C::kXStages && i < nkb; ++i) issue_in(i);

  float acc[C::kBlockM / 2];
#pragma unroll
  for (int j = 0; j < C::kBlockM / 2; ++j) acc[j] = 0.0f;
  for (int i = 0; i < nkb; ++i) {
    const int s = i % C::kXStages;
    sm90::mbarrier_wait(w_full0 + 8 * i, 0u);
    sm90::mbarrier_wait(x_full0 + 8 * s, static_cast<uint32_t>(i / C::kXStages) & 1u);
    if (traced && i == 0) stamps[3] = sm90::global_timer_ns();
    if (up && tid == 0 && i == nkb - 1) atomicAdd(p.w1_landed, 1u);  // the whole share of w1 is here
    const uint64_t desc_a = sm90::smem_descriptor_sw128(w_smem + i * C::kWBytes);
    const uint64_t desc_b = sm90::smem_descriptor_sw128(x_smem + s * C::kXBytes);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < C::kBlockK / 16; ++kk)
      sm90::wgmma_m64_narrow<C::kBlockM, T>(acc, desc_a + 2 * kk, desc_b + 2 * kk, (i > 0 || kk > 0) ? 1u : 0u);
    sm90::wgmma_commit_group();
    if (i > 0) {
      sm90::wgmma_wait_group<1>();  // block i - 1's wgmma have read its stage: refill it
      if (tid == 0 && i - 1 + C::kXStages < nkb) issue_in(i - 1 + C::kXStages);
    }
  }
  sm90::wgmma_wait_group<0>();
#pragma unroll
  for (int j = 0; j < C::kBlockM / 2; ++j) sm90::fence_operand(acc[j]);
  if (traced) stamps[5] = sm90::global_timer_ns();

  // Every k block of h this CTA reads has landed: count it out; the last down-projection CTA
  // resets the up-projection's counters for the next launch (every ready count reached split1:
  // the k blocks cover the tiles, so every up-projection rank is past its parked wait and has
  // counted itself into w1_landed).
  if (!up && tid == 0) {
    if (atomicAdd(p.done, 1u) == static_cast<uint32_t>(p.tiles2 * p.split2) - 1u) {
      for (int j = 0; j < p.tiles1; ++j) p.ready[j] = 0u, p.parked1[j] = 0u;
      *p.w1_landed = 0u;
      *p.done = 0u;
    }
  }

  // The partial tile, [m][n], laid out as skinny_wgmma_kernel.cuh's (conflict-free).
  {
    const int warp = tid / 32, lane = tid % 32;
    const int nn = warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < C::kBlockM / 8; ++j) {
      const int m = j * 8 + 2 * (lane % 4);
      red[m * C::kRedLd + nn] = acc[4 * j];
      red[(m + 1) * C::kRedLd + nn] = acc[4 * j + 1];
      red[m * C::kRedLd + nn + 8] = acc[4 * j + 2];
      red[(m + 1) * C::kRedLd + nn + 8] = acc[4 * j + 3];
    }
  }
  __syncthreads();

  // Split K: park the partial, wait until every rank of the tile has (a release count and an
  // acquire spin by thread 0, the barrier around them), then each rank reduces its slice of the
  // tile with the skinny GEMM's epilogue: a batch of groups at a time, every rank's loads in
  // flight at once, summed in rank order.
  float* ws = (up ? p.ws1 : p.ws2) + static_cast<int64_t>(tile) * split * C::kPartial;
  constexpr int kGroupsPerRow = C::kBlockN / 4;
  const int groups = p.m * kGroupsPerRow;  // rows past m are zeros: never parked or read
  uint32_t* parked = (up ? p.parked1 : p.parked2) + tile;
  if (split > 1) {
    for (int g = tid; g < groups; g += C::kThreads) {
      const int m = g / kGroupsPerRow, c = (g % kGroupsPerRow) * 4;
      __stcg(reinterpret_cast<float4*>(ws + rank * C::kPartial + m * C::kBlockN + c),
             *reinterpret_cast<const float4*>(red + m * C::kRedLd + c));
    }
    __syncthreads();
    if (tid == 0) {
      sm90::red_release_gpu(parked, 1u);
      while (sm90::load_acquire_gpu(parked) < static_cast<uint32_t>(split)) __nanosleep(20);
    }
    __syncthreads();
  }
  if (traced) stamps[6] = sm90::global_timer_ns();
  Params ep;  // the skinny epilogue's view of this layer's output
  ep.bias = up ? p.b1 : p.b2;
  ep.out = up ? p.h : p.y;
  ep.ldo = up ? p.ldh : p.ldy;
  ep.n = up ? p.hidden : p.n;
  ep.vec_out = up ? p.vec_h : p.vec_y;
  float bias4[4];
  epilogue_bias<T, C::kBlockN, C::kThreads>(ep, split, rank, n0, p.m, tid, bias4);
  const auto parked_partials = [&](auto ranks) {
    return BlockPartials<decltype(ranks)::value>{red, ws, rank};
  };
  if (up) split_k_epilogue_from<T, C::kBlockN, C::kThreads, Epi::GeluExact>(parked_partials, ep, split, rank, n0, 0, p.m,
                                                                           tid, bias4, nullptr);
  else split_k_epilogue_from<T, C::kBlockN, C::kThreads, Epi::Bias>(parked_partials, ep, split, rank, n0, 0, p.m, tid,
                                                                   bias4, nullptr);
  if (traced) stamps[7] = sm90::global_timer_ns();
  if (up) {
    // Publish this rank's slice of h: it was stored by ordinary stores and is read by TMA (a
    // proxy fence by every storing thread), then counted into ready[tile] with release semantics
    // after the barrier; the down-projection waits for split1 counts.
    sm90::fence_proxy_async_global();
    __syncthreads();
    if (tid == 0) sm90::red_release_gpu(p.ready + tile, 1u);
  } else if (split > 1) {
    // The tile's last rank resets its counters (every rank is past its parked wait).
    __syncthreads();
    if (tid == 0 && atomicAdd(p.finished2 + tile, 1u) == static_cast<uint32_t>(split) - 1u) {
      *parked = 0u;
      p.finished2[tile] = 0u;
    }
  }
  if (traced) {
    stamps[8] = sm90::global_timer_ns();
    unsigned long long* row = p.trace + static_cast<size_t>(blockIdx.x) * kSkinnyBlockTracePoints;
#pragma unroll
    for (int j = 0; j < kSkinnyBlockTracePoints; ++j) row[j] = stamps[j];
  }
#endif  // KILN_SM90A_DEVICE
}

}  // namespace kiln::cuda_kernels::skinny
