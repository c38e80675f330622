// The sm_90a linear+GELU kernel itself: out = GELU_erf(x w^T + bias) (and pre = x w^T + bias
// when asked), persistent and warp-specialised.
//
// A CTA has three warpgroups. Warpgroup 0 is the producer: one thread walks this CTA's tiles
// and, per 128-byte-wide k block, waits for a free stage of the shared-memory ring (its
// "empty" mbarrier), announces the stage's bytes on its "full" mbarrier and issues the TMA
// loads of the x tile (128 rows) and the w tile (kBlockN rows), 128B-swizzled; out-of-bounds
// rows and columns arrive as zeros. Warpgroups 1 and 2 are consumers: they wait on "full",
// issue wgmma on the stage (4 k steps of 32 bytes), keep one wgmma group in flight and
// release the previous stage on "empty". Two ways to share the tiles, chosen by kPingpong:
//   - cooperative: both consumers work on one 128 x kBlockN tile, 64 rows each;
//   - ping-pong: each consumer owns every other tile (128 x kBlockN, two m64 atoms), so one
//     consumer's epilogue runs while the other's wgmma keeps the tensor cores busy. The two
//     mainloops take turns (a "turn" mbarrier per consumer, arrived on by the other when its
//     mainloop has issued its last k block): besides keeping the tensor cores to one tile at a
//     time, this is what makes the parity waits sound, since a consumer skips the other's
//     ring positions and must never wait on a stage whose previous fill has not landed yet.
// The epilogue adds the bias to the fp32 accumulators, stores pre if asked, applies the exact
// GELU and stores out, each element once, bounds-checked against M and N.
// With kCluster = 2, the two CTAs of a cluster take vertically adjacent tiles of one column of
// w: each loads its own x tile and half of the w tile, multicast into both CTAs' stage, so
// L2 serves w once per pair; a stage is refilled only when the consumers of both CTAs have
// released it (each consumer warp arrives on both CTAs' "empty" barriers).
// setmaxnreg moves registers from the producer (40) to the consumers (232): 128 fp32
// accumulators per consumer thread plus the epilogue's temporaries. Tiles are visited in
// groups of `group_m` tile rows (column by column inside a group) so that the CTAs running
// at one time share rows of x and columns of w in L2.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gelu_fast.cuh"
#include "sm90_ptx.cuh"
#include "sm90_wgmma.cuh"

namespace kiln::cuda_kernels::sm90 {

/// The run-time part of one launch (the tensor maps travel as their own parameters).
struct KernelParams {
  const void* bias = nullptr;  ///< [n] or null
  void* out = nullptr;         ///< [m, n], row stride ldo
  void* pre = nullptr;         ///< [m, n], row stride ldp, or null
  int64_t ldo = 0, ldp = 0;
  int32_t m = 0, n = 0;
  int32_t k_blocks = 0;           ///< ceil(k / kBlockK)
  int32_t units_m = 0;            ///< ceil(m tiles / kCluster): a unit is one cluster's tiles
  int32_t units_n = 0;            ///< n tiles
  int32_t group_m = 1;            ///< units of m per raster group
  uint32_t pair_out = 0;          ///< out may be stored two elements at a time
  uint32_t pair_pre = 0;          ///< likewise pre
};

/// A compile-time configuration: element type, tile width, tile sharing, cluster size, ring depth.
template <typename T, int BlockN, bool Pingpong, int Cluster, int Stages>
struct TileConfig {
  using Element = T;
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = BlockN;
  static constexpr bool kPingpong = Pingpong;
  static constexpr int kCluster = Cluster;
  static constexpr int kStages = Stages;
  static constexpr int kBlockK = 128 / static_cast<int>(sizeof(T));  ///< one 128-byte swizzle row
  static constexpr int kKSteps = 4;                                    ///< wgmma k steps (32 bytes) per stage
  static constexpr int kMAtoms = Pingpong ? 2 : 1;                     ///< m64 atoms per consumer
  static constexpr int kConsumerRows = 64 * kMAtoms;
  static constexpr int kABytes = kBlockM * 128;
  static constexpr int kBBytes = kBlockN * 128;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kDynamicSmem = kStages * kStageBytes + 1024;  // + alignment slack
  static constexpr int kThreads = 384;
  static constexpr uint32_t kEmptyArrivals = (Pingpong ? 4 : 8) * Cluster;  // consumer warps per stage
  static_assert(kMAtoms * kBlockN / 2 <= 128, "TileConfig: at most 128 accumulators per consumer thread");
  static_assert(Cluster == 1 || Cluster == 2, "TileConfig: clusters of 1 or 2 CTAs");
  static_assert(kDynamicSmem <= 227 * 1024, "TileConfig: the ring does not fit in shared memory");
};

/// (unit row, unit column) of scheduling unit `u` in the grouped raster order.
__device__ __forceinline__ int2 unit_coordinates(int u, const KernelParams& p) {
  const int per_group = p.group_m * p.units_n;
  const int group = u / per_group;
  const int first = group * p.group_m;
  const int rows = min(p.units_m - first, p.group_m);
  const int r = u - group * per_group;
  return make_int2(first + r % rows, r / rows);
}

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }

/// The exact GELU as the unfused path computes it for T: the shared fit for 16-bit results,
/// erff for float32.
template <typename T>
__device__ __forceinline__ float gelu_exact(float x) {
  if constexpr (sizeof(T) == 2) return gelu_fast(x);
  else return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
}

/// Stores (a, b) at p[0], p[1]: one vector store when `pair`, else p[0] and, when `second`, p[1].
template <typename T>
__device__ __forceinline__ void store_two(T* p, float a, float b, bool pair, bool second) {
  if (pair) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
    else if constexpr (std::is_same_v<T, __half>) *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
    else *reinterpret_cast<float2*>(p) = make_float2(a, b);
    return;
  }
  p[0] = static_cast<T>(a);
  if (second) p[1] = static_cast<T>(b);
}

#if defined(KILN_SM90A_DEVICE)

/// The consumers' epilogue for one tile: bias, optional pre store, GELU, out store.
template <class Cfg>
__device__ __forceinline__ void store_tile(float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2], const KernelParams& p,
                                           int row0, int col0) {
  using T = typename Cfg::Element;
  const T* bias = static_cast<const T*>(p.bias);
  T* out = static_cast<T*>(p.out);
  T* pre = static_cast<T*>(p.pre);
#pragma unroll
  for (int j = 0; j < Cfg::kBlockN / 8; ++j) {
    const int col = col0 + j * 8;
    const bool first_in = col < p.n, second_in = col + 1 < p.n;
    float b0 = 0.0f, b1 = 0.0f;
    if (bias != nullptr) {
      if (first_in) b0 = to_float(bias[col]);
      if (second_in) b1 = to_float(bias[col + 1]);
    }
#pragma unroll
    for (int mi = 0; mi < Cfg::kMAtoms; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + mi * 64 + h * 8;
        if (row >= p.m || !first_in) continue;
        const float v0 = acc[mi][j * 4 + h * 2] + b0;
        const float v1 = acc[mi][j * 4 + h * 2 + 1] + b1;
        if (pre != nullptr)
          store_two(pre + static_cast<int64_t>(row) * p.ldp + col, v0, v1, p.pair_pre != 0 && second_in, second_in);
        store_two(out + static_cast<int64_t>(row) * p.ldo + col, gelu_exact<T>(v0), gelu_exact<T>(v1),
                  p.pair_out != 0 && second_in, second_in);
      }
    }
  }
}

#endif  // KILN_SM90A_DEVICE

/// The kernel: grid = a multiple of kCluster CTAs (at most one per SM), 384 threads each.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    linear_gelu_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w,
                       const KernelParams p) {
#if defined(KILN_SM90A_DEVICE)
  constexpr int kStages = Cfg::kStages;
  // Static shared memory holds only the barriers (a build without this body has none:
  // sm90_linear_gelu_supported() tells the two apart by it).
  __shared__ __align__(8) uint64_t barriers[2 * kStages + 2];
  extern __shared__ uint8_t dynamic_smem[];
  const uint32_t ring = (smem_address(dynamic_smem) + 1023u) & ~1023u;
  const uint32_t full0 = smem_address(&barriers[0]);
  const uint32_t empty0 = smem_address(&barriers[kStages]);
  const uint32_t turn0 = smem_address(&barriers[2 * kStages]);  // ping-pong: consumer c waits on turn0 + 8c

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full0 + 8 * s, 1);
      mbarrier_init(empty0 + 8 * s, Cfg::kEmptyArrivals);
    }
    mbarrier_init(turn0, 1);
    mbarrier_init(turn0 + 8, 1);
    fence_mbarrier_init();
  }
  if constexpr (Cfg::kCluster > 1) cluster_sync();
  else __syncthreads();

  const uint32_t rank = Cfg::kCluster > 1 ? cluster_cta_rank() : 0;
  const int cluster = static_cast<int>(blockIdx.x) / Cfg::kCluster;
  const int clusters = static_cast<int>(gridDim.x) / Cfg::kCluster;
  const int units = p.units_m * p.units_n;
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;

  if (warpgroup == 0) {
    // ---- producer ----
    setmaxnreg_decrease<40>();
    if (threadIdx.x == 0) {
      prefetch_tensor_map(&map_x);
      prefetch_tensor_map(&map_w);
      int64_t it = 0;  // ring position (64-bit: tiles x k blocks may pass 2^31)
      for (int u = cluster; u < units; u += clusters) {
        const int2 unit = unit_coordinates(u, p);
        const int m0 = (unit.x * Cfg::kCluster + static_cast<int>(rank)) * Cfg::kBlockM;
        const int n0 = unit.y * Cfg::kBlockN;
        for (int kb = 0; kb < p.k_blocks; ++kb, ++it) {
          const int s = static_cast<int>(it % kStages);
          const uint32_t round = static_cast<uint32_t>(it / kStages);
          mbarrier_wait(empty0 + 8 * s, (round & 1u) ^ 1u);
          const uint32_t full = full0 + 8 * s;
          const uint32_t a = ring + s * Cfg::kStageBytes;
          const uint32_t b = a + Cfg::kABytes;
          mbarrier_arrive_expect_tx(full, Cfg::kStageBytes);
          tma_load_2d(a, &map_x, full, kb * Cfg::kBlockK, m0);
          if constexpr (Cfg::kCluster == 1) {
            tma_load_2d(b, &map_w, full, kb * Cfg::kBlockK, n0);
          } else {
            constexpr int kHalf = Cfg::kBlockN / 2;
            tma_load_2d_multicast(b + rank * kHalf * 128, &map_w, full, kb * Cfg::kBlockK,
                                  n0 + static_cast<int>(rank) * kHalf, static_cast<uint16_t>(0x3));
          }
        }
      }
    }
    __syncwarp();
  } else {
    // ---- consumers ----
    setmaxnreg_increase<232>();
    const int consumer = warpgroup - 1;
    const int thread = static_cast<int>(threadIdx.x) % 128;
    const int warp = thread / 32, lane = thread % 32;
    const int row_in_tile = Cfg::kPingpong ? 0 : consumer * 64;
    float acc[Cfg::kMAtoms][Cfg::kBlockN / 2];
#pragma unroll
    for (int mi = 0; mi < Cfg::kMAtoms; ++mi)
#pragma unroll
      for (int i = 0; i < Cfg::kBlockN / 2; ++i) acc[mi][i] = 0.0f;

    const int first = Cfg::kPingpong ? consumer : 0;
    const int step = Cfg::kPingpong ? 2 : 1;
    uint32_t turns = 0;  // ping-pong: turns waited for so far
    for (int local = first;; local += step) {
      const int u = cluster + local * clusters;
      if (u >= units) break;
      if constexpr (Cfg::kPingpong) {
        // The other consumer's previous tile has all its k blocks in (and issued).
        if (local > 0) mbarrier_wait(turn0 + 8 * consumer, turns++ & 1u);
      }
      const int2 unit = unit_coordinates(u, p);
      const int m0 = (unit.x * Cfg::kCluster + static_cast<int>(rank)) * Cfg::kBlockM;
      const int n0 = unit.y * Cfg::kBlockN;
      const int64_t it0 = static_cast<int64_t>(local) * p.k_blocks;  // ring position of this tile's first k block
      int previous_stage = 0;
      for (int kb = 0; kb < p.k_blocks; ++kb) {
        const int64_t it = it0 + kb;
        const int s = static_cast<int>(it % kStages);
        mbarrier_wait(full0 + 8 * s, static_cast<uint32_t>(it / kStages) & 1u);
        const uint32_t a = ring + s * Cfg::kStageBytes + row_in_tile * 128;
        const uint32_t b = ring + s * Cfg::kStageBytes + Cfg::kABytes;
        const uint64_t desc_b = smem_descriptor_sw128(b);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Cfg::kKSteps; ++kk) {
#pragma unroll
          for (int mi = 0; mi < Cfg::kMAtoms; ++mi) {
            const uint64_t desc_a = smem_descriptor_sw128(a + mi * 64 * 128);
            wgmma_m64<Cfg::kBlockN, typename Cfg::Element>(acc[mi], desc_a + 2 * kk, desc_b + 2 * kk,
                                                           (kb > 0 || kk > 0) ? 1u : 0u);
          }
        }
        wgmma_commit_group();
        if (kb > 0) {
          // The previous k block's wgmma group is done: its stage can be refilled.
          wgmma_wait_group<1>();
          if (lane == 0) {
            if constexpr (Cfg::kCluster == 1) mbarrier_arrive(empty0 + 8 * previous_stage);
            else
              for (uint32_t c = 0; c < Cfg::kCluster; ++c) mbarrier_arrive_cluster(empty0 + 8 * previous_stage, c);
          }
        }
        previous_stage = s;
      }
      if constexpr (Cfg::kPingpong) {
        if (thread == 0) mbarrier_arrive(turn0 + 8 * (1 - consumer));
      }
      wgmma_wait_group<0>();
#pragma unroll
      for (int mi = 0; mi < Cfg::kMAtoms; ++mi)
#pragma unroll
        for (int i = 0; i < Cfg::kBlockN / 2; ++i) fence_operand(acc[mi][i]);
      if (lane == 0) {
        if constexpr (Cfg::kCluster == 1) mbarrier_arrive(empty0 + 8 * previous_stage);
        else
          for (uint32_t c = 0; c < Cfg::kCluster; ++c) mbarrier_arrive_cluster(empty0 + 8 * previous_stage, c);
      }
      store_tile<Cfg>(acc, p, m0 + row_in_tile + warp * 16 + lane / 4, n0 + 2 * (lane % 4));
    }
  }
  // A cluster's CTAs leave together: a peer may still arrive on this CTA's barriers.
  if constexpr (Cfg::kCluster > 1) cluster_sync();
#endif  // KILN_SM90A_DEVICE
}

}  // namespace kiln::cuda_kernels::sm90
