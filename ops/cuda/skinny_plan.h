// The launch plan both skinny GEMM kernels share (host side): rows of x per CTA, the split along
// K and its k blocks per rank, how many clusters of a kernel fit on the device at once, and the
// launch parameters that do not depend on the kernel. skinny_gemm.cu (the portable kernel) and
// skinny_wgmma.cu (the sm_90a one) each keep their own tiles and per-device facts and call
// these, so one rule decides a call's split whichever kernel runs it: the split depends only on
// m, n, k and the device, never on the epilogue, so a fused call and a linear on the same
// operands compute the same sums.
// Included by .cu files only (Params lives in the kernels' shared device header).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "skinny_gemm.h"
#include "skinny_gemm_epilogue.cuh"

namespace kiln::cuda_kernels::skinny {

/// Rows of x per CTA: the smallest of 16, 32, 64, 128 that holds m; 128 beyond (several row tiles).
inline int block_m(int64_t m) { return m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128; }

/// The index of a block_m() value in {16, 32, 64, 128}.
inline int bm_index(int bm) { return bm == 16 ? 0 : bm == 32 ? 1 : bm == 64 ? 2 : 3; }

/// Clusters resident at once, per cluster size (index split - 1); 0 where unknown or none fit.
using ClusterFit = std::array<int, kMaxSplit>;

/// How many clusters of `split` CTAs of `kernel` (`threads` per CTA, `smem` bytes of dynamic
/// shared memory) can be resident at once on the current device (0 when unknown).
inline int resident_clusters(const void* kernel, int threads, int smem, int split) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(split));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(split);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return clusters;
}

/// A call's split along K: the cluster size and the 64-element k blocks each rank sums.
struct SplitK {
  int split = 1;
  int32_t k_blocks = 0;         ///< ceil(k / 64)
  int32_t blocks_per_rank = 0;  ///< the last rank may have fewer
};

/// The split of a call with `tiles` output tiles: `requested` where non-zero (a benchmark's
/// override), else as many CTAs per tile as fill the `sms` once (1..kMaxSplit), lowered until
/// every cluster is resident at once (`fit`); 1 without `clusters`; never more ranks than k
/// blocks, and no rank without k blocks.
inline SplitK choose_split(int requested, int64_t tiles, int sms, const ClusterFit& fit, bool clusters,
                           int64_t k, int block_k) {
  SplitK s;
  s.k_blocks = static_cast<int32_t>((k + block_k - 1) / block_k);
  int split = requested;
  if (split == 0) {
    split = static_cast<int>(std::clamp<int64_t>(sms / tiles, 1, kMaxSplit));
    while (split > 1 && tiles > fit[static_cast<size_t>(split - 1)]) --split;
  }
  if (!clusters) split = 1;
  split = std::min(split, s.k_blocks);
  s.blocks_per_rank = (s.k_blocks + split - 1) / split;
  s.split = (s.k_blocks + s.blocks_per_rank - 1) / s.blocks_per_rank;
  return s;
}

/// The launch parameters of call `a` under split `s` that both kernels read (the rest, x and w
/// or the sm_90a kernel's ring and trace, each kernel's host side sets).
inline Params shared_params(const SkinnyGemmArgs& a, const SplitK& s) {
  Params p;
  p.bias = a.bias;
  p.out = a.out;
  p.pre = a.pre;
  p.ldo = a.ldo;
  p.ldp = a.ldp;
  p.m = static_cast<int32_t>(a.m);
  p.n = static_cast<int32_t>(a.n);
  p.k = static_cast<int32_t>(a.k);
  p.k_blocks = s.k_blocks;
  p.blocks_per_rank = s.blocks_per_rank;
  p.split = s.split;
  p.vec_out = a.ldo % 4 == 0 && reinterpret_cast<uintptr_t>(a.out) % 8 == 0;
  p.vec_pre = a.pre != nullptr && a.ldp % 4 == 0 && reinterpret_cast<uintptr_t>(a.pre) % 8 == 0;
  p.epilogue_batch = a.epilogue_batch;
  return p;
}

}  // namespace kiln::cuda_kernels::skinny
