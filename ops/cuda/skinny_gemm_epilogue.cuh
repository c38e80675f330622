// The part of the skinny GEMM that both of its kernels share (the portable mma.sync kernel,
// skinny_gemm_kernel.cuh, and the sm_90a wgmma kernel, skinny_wgmma_kernel.cuh): the launch
// parameters, and the split-K epilogue that turns each CTA's fp32 partial tile into the
// stored output. Keeping one copy keeps one rounding: h = round16(acc + bias), out =
// round16(gelu(h)), exactly as a 16-bit linear followed by the gelu op, whichever kernel ran.
//
// The epilogue: each CTA of a cluster has parked its partial tile ([BM][kRedLd] fp32, m-major so
// a row of out is contiguous) in its own shared memory at the same offset, and the cluster has
// synchronised. Each CTA then reduces its slice of the tile's 4-column groups by reading every
// rank's partial through distributed shared memory, summing in rank order (so the result does
// not depend on which CTA does it), adds the bias, rounds h, applies the epilogue and stores.
// Each thread arrives on the cluster barrier once its reads are done; the caller waits on it
// before the CTA exits (the others may still read its tile). Where the partials are read from
// is a parameter (ClusterPartials here; the one-launch block kernel, skinny_block_kernel.cuh,
// passes its partials parked in global memory), so the block kernel sums and rounds with this
// same code.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "../unary_math.h"
#include "device_types.cuh"
#include "gelu_fast.cuh"
#include "sm90_ptx.cuh"

namespace kiln::cuda_kernels::skinny {

constexpr int kMaxSplit = 8;  ///< the portable cluster size limit
/// The most 4-column groups one epilogue thread sums and rounds at once (split_k_epilogue).
constexpr int kEpilogueBatch = 4;

/// The epilogue, as the kernels' template parameter (skinny_gemm.h's SkinnyEpilogue).
enum class Epi : int { Bias, GeluExact, GeluTanh };

/// The run-time part of one launch. Sizes are checked on the host (skinny_gemm_accepts).
struct Params {
  const void* x = nullptr;  ///< (the mma.sync kernel; the wgmma kernel reads x and w by TMA)
  const void* w = nullptr;
  const void* bias = nullptr;  ///< [n] or null
  void* out = nullptr;
  void* pre = nullptr;  ///< [m, n] or null
  int64_t ldx = 0, ldw = 0, ldo = 0, ldp = 0;
  int32_t m = 0, n = 0, k = 0;
  int32_t k_blocks = 0;         ///< ceil(k / 64)
  int32_t blocks_per_rank = 0;  ///< k blocks per cluster rank (the last rank may have fewer)
  int32_t split = 1;            ///< cluster size along grid x
  uint32_t vec_out = 0;         ///< out rows may be stored 4 elements (8 bytes) at a time
  uint32_t vec_pre = 0;         ///< likewise pre
  int32_t stages = 0;           ///< the sm_90a kernel's ring depth (2..WgTile::kMaxStages)
  uint32_t prefetch_l2 = 0;     ///< the sm_90a kernel prefetches its share of w into L2 before its wait
  int32_t epilogue_batch = 0;   ///< benchmark override: fewer groups a thread sums and rounds at once (0: kEpilogueBatchFor)
  /// Benchmark only (the sm_90a kernel): per CTA kSkinnyTracePoints %globaltimer stamps, or null.
  unsigned long long* trace = nullptr;
};

/// The stamps a traced sm_90a CTA writes (Params::trace), in this order: entry, past
/// griddepcontrol.wait, first stage landed, mainloop done, partials exchanged (past the first
/// cluster barrier), the epilogue's first group summed, its last group stored, exit.
inline constexpr int kSkinnyTracePoints = 8;

/// out from the rounded pre-activation h, as the unfused op computes it.
template <typename T, Epi E>
__device__ __forceinline__ T activate(T h) {
  if constexpr (E == Epi::GeluExact) return narrow<T>(gelu_fast<T>(widen(h)));
  else if constexpr (E == Epi::GeluTanh) return narrow<T>(math::GeluTanh{}(widen(h)));
  else return h;
}

/// The bits of a bfloat16 value.
__device__ __forceinline__ uint32_t bits16(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
/// The bits of a float16 value.
__device__ __forceinline__ uint32_t bits16(__half v) { return __half_as_ushort(v); }

/// Four consecutive 16-bit values as one 8-byte word, v[0] lowest.
template <typename T>
__device__ __forceinline__ uint2 pack4(const T (&v)[4]) {
  return make_uint2(bits16(v[0]) | (bits16(v[1]) << 16), bits16(v[2]) | (bits16(v[3]) << 16));
}

/// Stores `cnt` (1..4) values at p[0..cnt): one 8-byte store when `vec` and cnt == 4.
template <typename T>
__device__ __forceinline__ void store4(T* p, const T (&v)[4], int cnt, bool vec) {
  if (vec && cnt == 4) {
    *reinterpret_cast<uint2*>(p) = pack4(v);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (i < cnt) p[i] = v[i];
  }
}

/// s += t lane by lane.
__device__ __forceinline__ void add4(float4& s, const float4& t) {
  s.x += t.x;
  s.y += t.y;
  s.z += t.z;
  s.w += t.w;
}

/// One 4-column group's rounding, given its fp32 sums `s` and its bias `b` (used when has_bias):
/// h = round16(s + b), o = activate(h), as the unfused linear then activation rounds.
template <typename T, Epi E>
__device__ __forceinline__ void round_group(const float4& s, const float (&b)[4], bool has_bias, T (&h)[4],
                                            T (&o)[4]) {
  float v[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // acc + bias rounded once, as cuBLASLt's bias epilogue; no bias: acc itself (adding
    // 0 would turn -0 into +0).
    if (has_bias) v[i] += b[i];
    h[i] = narrow<T>(v[i]);
    o[i] = activate<T, E>(h[i]);
  }
}

/// The bias of columns n.. (cnt of them real; the rest 0), widened to float.
template <typename T>
__device__ __forceinline__ void load_bias4(const T* bias, int n, int cnt, float (&b)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) b[i] = bias != nullptr && i < cnt ? widen(bias[n + i]) : 0.0f;
}

/// Which 4 columns of the tile this thread's epilogue groups are at: the groups a thread takes
/// are Threads apart, a multiple of the groups per row, so they all share one column offset.
template <int BN, int Threads>
__device__ __forceinline__ int epilogue_column(int split, int rank, int m_valid, int tid) {
  constexpr int kGroupsPerRow = BN / 4;
  static_assert(Threads % kGroupsPerRow == 0, "a thread's epilogue groups share their columns");
  const int per_rank = (m_valid * kGroupsPerRow + split - 1) / split;
  return (rank * per_rank + tid) % kGroupsPerRow * 4;
}

/// The bias of this thread's epilogue columns (epilogue_column), to be read once, early: a
/// kernel loads it before its mainloop, so the epilogue does not wait on it per group.
template <typename T, int BN, int Threads>
__device__ __forceinline__ void epilogue_bias(const Params& p, int split, int rank, int n0, int m_valid, int tid,
                                              float (&b)[4]) {
  const int n = n0 + epilogue_column<BN, Threads>(split, rank, m_valid, tid);
  load_bias4(static_cast<const T*>(p.bias), n, min(p.n - n, 4), b);
}

/// The groups a thread of the split-K epilogue takes at once with up to MaxRanks ranks to read:
/// as many as keep MaxRanks x batch float4 loads (32 registers) in flight, at most kEpilogueBatch.
template <int MaxRanks>
inline constexpr int kEpilogueBatchFor = MaxRanks >= 8 ? 1 : MaxRanks >= 4 ? 2 : kEpilogueBatch;

/// Where the split-K epilogue reads rank r's partial of a group: the skinny kernels' clusters,
/// every rank's tile in its own shared memory at the same offset, read through distributed
/// shared memory. (The one-launch block kernel, whose ranks are no cluster, has its own source.)
template <int MaxRanks, int RedLd>
struct ClusterPartials {
  static constexpr bool kCluster = true;  ///< its reads end with an arrival on the cluster barrier
  const float* src[MaxRanks];
  __device__ __forceinline__ ClusterPartials(const float* red, int split) {
#pragma unroll
    for (int r = 0; r < MaxRanks; ++r) {
      src[r] = red;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      if (split > 1 && r < split) src[r] = cooperative_groups::this_cluster().map_shared_rank(red, r);
#endif
    }
  }
  /// Rank r's four sums of row `row`, columns col..col + 3 of the tile.
  __device__ __forceinline__ float4 operator()(int r, int row, int col) const {
    return *reinterpret_cast<const float4*>(src[r] + row * RedLd + col);
  }
};

/// The split-K epilogue for split <= MaxRanks (1, 2, 4 or 8; the bound sizes the registers of
/// the loads in flight), reading the partials through `partials` (ClusterPartials or a source
/// of the same shape). A thread takes its groups a batch at a time (kEpilogueBatchFor, or fewer
/// with p.epilogue_batch): it issues the loads of every rank's partial of every group of the
/// batch at once (one latency per batch), sums each group in rank order, then rounds and stores
/// the batch's groups, whose chains are independent, so that one warp per scheduler keeps its
/// pipes busy. With a cluster source each thread arrives on the cluster barrier after its last
/// reads.
template <int MaxRanks, typename T, int BN, int Threads, Epi E, typename Source>
__device__ __forceinline__ void split_k_epilogue_ranks(const Params& p, const Source& partials, int split, int rank,
                                                       int n0, int64_t m0, int m_valid, int tid,
                                                       const float (&bias4)[4], unsigned long long* stamps) {
  constexpr int kGroupsPerRow = BN / 4;
  constexpr int kBatch = kEpilogueBatchFor<MaxRanks>;
  constexpr bool kCluster = Source::kCluster;
  const int groups = m_valid * kGroupsPerRow;
  const int per_rank = (groups + split - 1) / split;
  const int g_begin = rank * per_rank;
  const int g_end = min(g_begin + per_rank, groups);
  const int batch = p.epilogue_batch >= 1 && p.epilogue_batch < kBatch ? p.epilogue_batch : kBatch;
  const int nl = epilogue_column<BN, Threads>(split, rank, m_valid, tid);  // the same for all of them
  const int n = n0 + nl;
  const int cnt = min(p.n - n, 4);
  const bool has_bias = p.bias != nullptr;
  bool arrived = false;
  for (int g0 = g_begin + tid; g0 < g_end; g0 += batch * Threads) {
    bool live[kBatch];
    float4 t[kBatch][MaxRanks];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      live[j] = j < batch && g0 + j * Threads < g_end;
      const int row = (g0 + j * Threads) / kGroupsPerRow;
#pragma unroll
      for (int r = 0; r < MaxRanks; ++r)
        if (live[j] && r < split) t[j][r] = partials(r, row, nl);
    }
    float4 s[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      s[j] = t[j][0];  // (a dead group's sum is never used)
#pragma unroll
      for (int r = 1; r < MaxRanks; ++r)
        if (r < split) add4(s[j], t[j][r]);  // rank order: the split-K sum's one order
    }
    if (stamps != nullptr && g0 == g_begin + tid) {  // (benchmark: the first batch's sums are in)
      asm volatile("" ::"f"(s[0].x), "f"(s[0].y), "f"(s[0].z), "f"(s[0].w));
      stamps[0] = sm90::global_timer_ns();
    }
    if (kCluster && split > 1 && g0 + batch * Threads >= g_end) {  // this thread's last reads of the others' partials
      sm90::cluster_arrive_release();
      arrived = true;
    }
    if (cnt <= 0) continue;  // columns past n (the last tile): nothing to store
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (!live[j]) continue;
      T h[4], o[4];
      round_group<T, E>(s[j], bias4, has_bias, h, o);
      const int64_t row = m0 + (g0 + j * Threads) / kGroupsPerRow;
      store4(static_cast<T*>(p.out) + row * p.ldo + n, o, cnt, p.vec_out != 0);
      if constexpr (E != Epi::Bias) {
        if (p.pre != nullptr) store4(static_cast<T*>(p.pre) + row * p.ldp + n, h, cnt, p.vec_pre != 0);
      }
    }
  }
  if (kCluster && split > 1 && !arrived) sm90::cluster_arrive_release();  // (a thread without groups)
  if (stamps != nullptr) stamps[1] = sm90::global_timer_ns();
}

/// Runs split_k_epilogue_ranks with the rank bound that holds `split` (1, 2, 4 or 8), its
/// partials read from make(std::integral_constant<int, bound>{}).
template <typename T, int BN, int Threads, Epi E, typename MakeSource>
__device__ __forceinline__ void split_k_epilogue_from(const MakeSource& make, const Params& p, int split, int rank,
                                                      int n0, int64_t m0, int m_valid, int tid,
                                                      const float (&bias4)[4], unsigned long long* stamps) {
  const auto run = [&](auto ranks) {
    split_k_epilogue_ranks<decltype(ranks)::value, T, BN, Threads, E>(p, make(ranks), split, rank, n0, m0, m_valid,
                                                                       tid, bias4, stamps);
  };
  if (split <= 1) run(std::integral_constant<int, 1>{});
  else if (split == 2) run(std::integral_constant<int, 2>{});
  else if (split <= 4) run(std::integral_constant<int, 4>{});
  else run(std::integral_constant<int, kMaxSplit>{});
}

/// The split-K epilogue of one CTA of a cluster (see the top of this file): `red` is this CTA's
/// partial tile of BN columns (rows of w from n0) by m_valid rows (of x from m0), row stride
/// RedLd; `split` CTAs (cluster ranks, this one `rank`) hold theirs at the same offset; `bias4`
/// is epilogue_bias(). With split > 1 each thread arrives on the cluster barrier once its reads
/// of the others' partials are done, so the barrier's latency hides under the rounding and the
/// stores; the caller waits on it (cluster_wait_acquire) before the CTA exits, since the others
/// may still be reading its partial.
template <typename T, int BN, int RedLd, int Threads, Epi E>
__device__ __forceinline__ void split_k_epilogue(const Params& p, const float* red, int split, int rank, int n0,
                                                 int64_t m0, int m_valid, int tid, const float (&bias4)[4],
                                                 unsigned long long* stamps = nullptr) {
  const auto cluster = [&](auto ranks) { return ClusterPartials<decltype(ranks)::value, RedLd>(red, split); };
  split_k_epilogue_from<T, BN, Threads, E>(cluster, p, split, rank, n0, m0, m_valid, tid, bias4, stamps);
}

}  // namespace kiln::cuda_kernels::skinny
