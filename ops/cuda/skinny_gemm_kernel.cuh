// The skinny GEMM kernel (host side and rationale: skinny_gemm.h, skinny_gemm.cu).
//
// One CTA computes a BN x BM tile of out^T (BN = 64 rows of w, i.e. output columns, by BM rows
// of x, BM in {16, 32, 64, 128} chosen from M so no slice of x is multiplied for nothing but
// the padding of the last) over its cluster rank's share of K. Its warps are 4 (one per 16
// rows of w) x WK (2 or 4 parts of each 64-wide k block): per k block a warp first loads all
// its fragments (ldmatrix.x4: w as the A operand, x as B, the row.col layout both are stored
// in), so their latencies overlap, then runs its mma.sync m16n8k16 against every 8-row slice
// of x. Each w element read from device memory is used by exactly one warp, once. w and x
// reach shared memory through a kStages-deep cp.async ring of 64-wide k blocks (rows of 128
// bytes, 16-byte chunks XOR-swizzled by row so ldmatrix and the copies are conflict-free); x
// rows past M are zero-filled, not read.
//
// Split K: the CTAs of a cluster (along grid x) take consecutive shares of the k blocks (each
// column tile starting at its own rotation of its share, so side-by-side CTAs read different
// parts of x); each parks its WK fp32 partial tiles in its own shared memory and sums them
// into the first, the cluster synchronises, and each CTA reduces a slice of the tile by
// reading every rank's sum through distributed shared memory in rank order (so the result
// does not depend on which CTA does it), adds the bias, rounds h, applies the epilogue and stores; a
// second cluster barrier keeps every CTA's shared memory alive until the others have read it.
// Without a cluster (split 1, or a GPU before sm_90) the same code reads its own tiles.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "skinny_gemm_epilogue.cuh"

namespace kiln::cuda_kernels::skinny {

constexpr int kBlockK = 64;  ///< k per pipeline stage: one 128-byte row of 16-bit elements
constexpr int kStages = 6;   ///< depth of the cp.async ring

/// Compile-time sizes of a tile configuration: BN rows of w, BM rows of x, WK warps sharing
/// each k block (2: halves, 4: quarters).
template <int BN, int BM, int WK>
struct Tile {
  static_assert(BN % 16 == 0 && BM % 16 == 0, "tiles are whole mma fragments");
  static_assert(WK == 1 || WK == 2 || WK == 4, "a k block is 4 k16 steps");
  static constexpr int kWarpsN = BN / 16;  ///< warps along w's rows
  static constexpr int kWarpsK = WK;       ///< warps along each k block
  static constexpr int kSteps = kBlockK / 16 / kWarpsK;  ///< k16 steps per warp per k block
  static constexpr int kWarps = kWarpsN * kWarpsK;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kStageElems = (BN + BM) * kBlockK;  ///< w rows, then x rows
  static constexpr int kRedLd = BN + 4;                    ///< floats per partial-tile row (bank spread)
  static constexpr int kPipeBytes = kStages * kStageElems * 2;
  static constexpr int kRedBytes = kWarpsK * BM * kRedLd * 4;
  static constexpr int kSmemBytes = kPipeBytes > kRedBytes ? kPipeBytes : kRedBytes;
};

// ---- PTX wrappers ---------------------------------------------------------------------------

/// The shared-memory address of a generic pointer into shared memory.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// 16 bytes global -> shared, bypassing L1; src_bytes 0 zero-fills without reading.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
/// Closes this thread's current group of cp.async copies.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/// Waits until at most N of this thread's cp.async groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// Four 8x8 16-bit matrices from shared memory, one per register (lanes 8i..8i+7 address matrix i's rows).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// c += a (16 x 16, row) * b (16 x 8, col), fp32 accumulators.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/// Byte offset of 16-byte chunk `chunk` (0..7) of row `row` in a swizzled 128-byte-row tile.
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  return static_cast<uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4));
}

// ---- the kernel body --------------------------------------------------------------------------

/// One CTA's tile: the k-block ring, the mma.sync run, the split-K reduction and the epilogue.
template <typename T, int BN, int BM, int WK, Epi E>
__device__ __forceinline__ void skinny_gemm_body(const Params& p) {
  using Cfg = Tile<BN, BM, WK>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5, lane = tid & 31;
  const int warp_n = warp % Cfg::kWarpsN, warp_k = warp / Cfg::kWarpsN;

  const int split = p.split;
  const int rank = static_cast<int>(blockIdx.x) % split;  // the cluster rank: clusters tile grid x
  const int n0 = static_cast<int>(blockIdx.x) / split * BN;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * BM;
  const int m_valid = static_cast<int>(p.m - m0 < BM ? p.m - m0 : BM);
  const int kb_begin = rank * p.blocks_per_rank;
  const int kb_end = min(kb_begin + p.blocks_per_rank, p.k_blocks);
  const int nkb = max(kb_end - kb_begin, 0);
  // Each column tile walks its k blocks from its own starting point, so the CTAs running side
  // by side read different parts of x (which they all share) at any moment.
  const int rot = nkb > 0 ? static_cast<int>(blockIdx.x / static_cast<unsigned>(split)) % nkb : 0;
  auto block_at = [&](int i) { return kb_begin + (i + rot) % nkb; };

  const T* w = static_cast<const T*>(p.w);
  const T* x = static_cast<const T*>(p.x) + m0 * p.ldx;
  const uint32_t smem_base = smem_addr(smem);

  // One k block into ring slot `slot`: w rows [n0, n0 + BN), x rows [0, BM); chunks past n, m
  // or k are zero-filled (k is a multiple of 8, so a chunk is wholly inside or outside).
  auto load = [&](int slot, int kb) {
    const uint32_t sw = smem_base + static_cast<uint32_t>(slot * Cfg::kStageElems * 2);
    const uint32_t sx = sw + BN * kBlockK * 2;
    const int k0 = kb * kBlockK;
#pragma unroll
    for (int i = 0; i < (BN * 8 + Cfg::kThreads - 1) / Cfg::kThreads; ++i) {
      const int c = tid + i * Cfg::kThreads;
      if (BN * 8 % Cfg::kThreads == 0 || c < BN * 8) {
        const int r = c >> 3, ch = c & 7;
        const int kk = k0 + ch * 8;
        const bool ok = n0 + r < p.n && kk < p.k;
        cp_async_16(sw + swizzled(r, ch), w + (ok ? static_cast<int64_t>(n0 + r) * p.ldw + kk : 0), ok ? 16 : 0);
      }
    }
#pragma unroll
    for (int i = 0; i < (BM * 8 + Cfg::kThreads - 1) / Cfg::kThreads; ++i) {
      const int c = tid + i * Cfg::kThreads;
      if (BM * 8 % Cfg::kThreads == 0 || c < BM * 8) {
        const int r = c >> 3, ch = c & 7;
        const int kk = k0 + ch * 8;
        const bool ok = r < m_valid && kk < p.k;
        cp_async_16(sx + swizzled(r, ch), x + (ok ? static_cast<int64_t>(r) * p.ldx + kk : 0), ok ? 16 : 0);
      }
    }
  };

  float acc[BM / 8][4];
#pragma unroll
  for (int j = 0; j < BM / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  // The ring: kStages - 1 blocks ahead; a slot is refilled right after the barrier that
  // follows its last use.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nkb) load(s, block_at(s));
    cp_async_commit();
  }
  for (int i = 0; i < nkb; ++i) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int next = i + kStages - 1;
    if (next < nkb) load(next % kStages, block_at(next));
    cp_async_commit();

    const uint32_t sw = smem_base + static_cast<uint32_t>((i % kStages) * Cfg::kStageElems * 2);
    const uint32_t sx = sw + BN * kBlockK * 2;
    // Every fragment of this warp's k steps first, so the loads' latencies overlap.
    uint32_t a[Cfg::kSteps][4];
    uint32_t b[Cfg::kSteps][BM / 16][4];
#pragma unroll
    for (int s = 0; s < Cfg::kSteps; ++s) {
      const int ks = warp_k * Cfg::kSteps + s;
      // w: (rows 0-7 | 8-15) x (k 0-7 | 8-15) of the warp's 16 rows: a0..a3.
      ldmatrix_x4(a[s], sw + swizzled(warp_n * 16 + (lane & 15), ks * 2 + (lane >> 4)));
      // x: rows j*16 + (0-7 | 8-15) x k (0-7 | 8-15): b0, b1 of slice 2j, then of 2j + 1.
      const int q = lane >> 3;
#pragma unroll
      for (int j = 0; j < BM / 16; ++j)
        ldmatrix_x4(b[s][j], sx + swizzled(j * 16 + (q >> 1) * 8 + (lane & 7), ks * 2 + (q & 1)));
    }
#pragma unroll
    for (int s = 0; s < Cfg::kSteps; ++s)
#pragma unroll
      for (int j = 0; j < BM / 16; ++j) {
        mma_16816<T>(acc[2 * j], a[s], b[s][j][0], b[s][j][1]);
        mma_16816<T>(acc[2 * j + 1], a[s], b[s][j][2], b[s][j][3]);
      }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the ring: its memory becomes the partial tiles

  // The partial tiles, [k half][m][n] fp32: c0, c1 at (n = g, m = 2t, 2t + 1), c2, c3 at n = g + 8.
  float* red = reinterpret_cast<float*>(smem);
  {
    float* mine = red + warp_k * BM * Cfg::kRedLd;
    const int n = warp_n * 16 + (lane >> 2);
#pragma unroll
    for (int j = 0; j < BM / 8; ++j) {
      const int m = j * 8 + 2 * (lane & 3);
      mine[m * Cfg::kRedLd + n] = acc[j][0];
      mine[(m + 1) * Cfg::kRedLd + n] = acc[j][1];
      mine[m * Cfg::kRedLd + n + 8] = acc[j][2];
      mine[(m + 1) * Cfg::kRedLd + n + 8] = acc[j][3];
    }
  }
  // The k parts' tiles summed into the first, in part order (not 0 + t: -0 stays -0).
  constexpr int kGroupsPerRow = BN / 4;
  constexpr int kPart = BM * Cfg::kRedLd;  // floats between the k parts' tiles
  const int groups = m_valid * kGroupsPerRow;
  if constexpr (Cfg::kWarpsK > 1) {
    __syncthreads();
    for (int g = tid; g < groups; g += Cfg::kThreads) {
      const int m = g / kGroupsPerRow;
      float4* dst = reinterpret_cast<float4*>(red + m * Cfg::kRedLd + (g - m * kGroupsPerRow) * 4);
      float4 t[Cfg::kWarpsK];
#pragma unroll
      for (int h = 0; h < Cfg::kWarpsK; ++h)
        t[h] = *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(dst) + h * kPart);
      float4 s = t[0];
#pragma unroll
      for (int h = 1; h < Cfg::kWarpsK; ++h) {
        s.x += t[h].x;
        s.y += t[h].y;
        s.z += t[h].z;
        s.w += t[h].w;
      }
      *dst = s;
    }
  }
  // The epilogue's bias, loaded before the cluster barrier so that its latency overlaps it.
  float bias4[4];
  epilogue_bias<T, BN, Cfg::kThreads>(p, split, rank, n0, m_valid, tid, bias4);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  if (split > 1) cluster.sync();  // release our partial, acquire the others'
  else __syncthreads();
#else
  __syncthreads();  // no clusters before sm_90: the host launches split 1 there
#endif

  // This rank's slice of the tile's 4-column groups (rows past m_valid are not stored).
  split_k_epilogue<T, BN, Cfg::kRedLd, Cfg::kThreads, E>(p, red, split, rank, n0, m0, m_valid, tid, bias4);
  if (split > 1) sm90::cluster_wait_acquire();  // the others may still be reading our partials (the epilogue arrived)
}

}  // namespace kiln::cuda_kernels::skinny

namespace kiln::cuda_kernels {

// The kernels, one name per epilogue so profiles say which ran.

/// out = x w^T (+ bias).
template <typename T, int BN, int BM, int WK>
__global__ void __launch_bounds__(skinny::Tile<BN, BM, WK>::kThreads, 1) skinny_gemm_kernel(skinny::Params p) {
  skinny::skinny_gemm_body<T, BN, BM, WK, skinny::Epi::Bias>(p);
}

/// out = gelu(x w^T (+ bias)), exact GELU; pre = the pre-activation when asked.
template <typename T, int BN, int BM, int WK>
__global__ void __launch_bounds__(skinny::Tile<BN, BM, WK>::kThreads, 1) skinny_gemm_bias_gelu_kernel(
    skinny::Params p) {
  skinny::skinny_gemm_body<T, BN, BM, WK, skinny::Epi::GeluExact>(p);
}

/// out = gelu_tanh(x w^T (+ bias)); pre = the pre-activation when asked.
template <typename T, int BN, int BM, int WK>
__global__ void __launch_bounds__(skinny::Tile<BN, BM, WK>::kThreads, 1) skinny_gemm_bias_gelu_tanh_kernel(
    skinny::Params p) {
  skinny::skinny_gemm_body<T, BN, BM, WK, skinny::Epi::GeluTanh>(p);
}

}  // namespace kiln::cuda_kernels
