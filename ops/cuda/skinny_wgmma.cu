// The host side of the sm_90a skinny GEMM (skinny_wgmma.h; kernel: skinny_wgmma_kernel.cuh):
// the per-device facts, the tile and split choice, the TMA tensor maps, and the launch.
//
// Built for sm_90a alone, in the kiln_sm90 object library with the linear+GELU kernel (wgmma
// exists nowhere else). The choice is the portable kernel's rule (skinny_plan.h): 64 rows of w
// per CTA (128, which reads x from L2 half as often, measured slower on an H200 at every shape
// tried: docs/notes/skinny_gemm.md, v4; the benchmark can still ask for it), BM the smallest of
// 16, 32, 64, 128 rows of x that holds m (128 beyond, several row tiles), the split along K (the
// cluster size) the number of CTAs each tile can have with the tiles filling the SMs once, at
// most 8 and at most the k blocks, lowered until every cluster is resident at once
// (cudaOccupancyMaxActiveClusters, read once per device). It depends only on m, n, k and the
// device, never on the epilogue, so a fused call and a linear on the same operands compute the
// same sums.
//
// Programmatic dependent launch is on by default: the kernel reads and writes no global memory
// into the CTA before griddepcontrol.wait, which returns once the previous kernel in the stream
// has completed and its writes are visible, so the attribute changes when the CTAs start (they
// run beside the previous kernel's, whose launch_dependents comes right after its own wait),
// never what they read; in a CUDA graph capture it becomes a programmatic edge (tested). Before
// the wait a CTA only asks L2 to prefetch its share of the weights, so they stream from DRAM
// while the previous layer computes; a previous kernel writing them (an optimizer step, a copy
// into the weight) still cannot race with the reads, which come after the wait from L2, where
// that kernel's writes land (tested). The ring runs WgTile::default_stages() deep, shallow
// enough for two CTAs per SM, so that a dependent's CTAs find room beside this kernel's.
//
// The partial tile's layout (skinny_wgmma_kernel.cuh) is conflict-free: a warp's 32 stores of
// one accumulator register go to m = 8 j + 2 (lane % 4) (+1), n = 64 t + 16 warp + lane / 4 (+8),
// i.e. word m * (BN + 4) + n, whose bank (8 (lane % 4) + lane / 4 + constant) mod 32 differs
// per lane (2 (BN + 4) is 8 mod 32 for BN = 64 and 128).
#include "skinny_wgmma.h"

#include <cuda.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>

#include "../../core/cuda_check.h"
#include "../../core/error.h"
#include "device_facts.h"
#include "skinny_plan.h"
#include "skinny_wgmma_kernel.cuh"
#include "skinny_tensor_map.h"
#include "sm90_tensor_map.h"

namespace kiln::cuda_kernels {

namespace skinny {
namespace {

constexpr int kBlockK = 64;
constexpr int kThreads = 128;
static_assert(WgTile<64, 16>::kThreads == kThreads && WgTile<128, 128>::kThreads == kThreads, "one warpgroup");

using WgKernelFn = void (*)(CUtensorMap, CUtensorMap, Params);

/// The kernel of (type, BN, BM, epilogue).
template <typename T, int BN, int BM>
WgKernelFn wg_kernel_of(SkinnyEpilogue e) {
  switch (e) {
    case SkinnyEpilogue::GeluExact: return skinny_wgmma_kernel<T, BN, BM, Epi::GeluExact>;
    case SkinnyEpilogue::GeluTanh: return skinny_wgmma_kernel<T, BN, BM, Epi::GeluTanh>;
    case SkinnyEpilogue::Bias: break;
  }
  return skinny_wgmma_kernel<T, BN, BM, Epi::Bias>;
}

/// A kernel, its tile, its ring depths and the shared memory of its default ring.
struct WgLaunch {
  WgKernelFn kernel = nullptr;
  int bn = 0, bm = 0;
  int stages = 0, max_stages = 0;  ///< the default ring depth, the deepest it is built for
  int smem = 0, max_smem = 0;      ///< dynamic shared memory with those rings
  int stage_bytes = 0;
  /// Dynamic shared memory with a ring of `s` stages.
  int smem_for(int s) const { return max_smem - (max_stages - s) * stage_bytes; }
};

template <typename T, int BN, int BM>
WgLaunch wg_launch_of(SkinnyEpilogue e) {
  using Cfg = WgTile<BN, BM>;
  return {wg_kernel_of<T, BN, BM>(e), BN, BM, Cfg::default_stages(), Cfg::kMaxStages,
          Cfg::smem_bytes(Cfg::default_stages()), Cfg::smem_bytes(Cfg::kMaxStages), Cfg::kStageBytes};
}

template <typename T, int BN>
WgLaunch wg_pick_typed(SkinnyEpilogue e, int bm) {
  switch (bm) {
    case 16: return wg_launch_of<T, BN, 16>(e);
    case 32: return wg_launch_of<T, BN, 32>(e);
    case 64: return wg_launch_of<T, BN, 64>(e);
    default: return wg_launch_of<T, BN, 128>(e);
  }
}

WgLaunch wg_pick(SkinnyType type, SkinnyEpilogue e, int bn, int bm) {
  if (type == SkinnyType::BFloat16)
    return bn == 128 ? wg_pick_typed<__nv_bfloat16, 128>(e, bm) : wg_pick_typed<__nv_bfloat16, 64>(e, bm);
  return bn == 128 ? wg_pick_typed<__half, 128>(e, bm) : wg_pick_typed<__half, 64>(e, bm);
}

/// What one device offers the sm_90a kernel, found once.
struct WgFacts {
  bool ready = false;
  int sms = 0;
  /// Clusters of each size resident at once, per BN index (64, 128) and BM index.
  std::array<std::array<ClusterFit, 4>, 2> max_clusters{};
};

void find_wg_facts(int device, WgFacts& f) {
  int major = 0, minor = 0, sms = 0, max_smem = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess ||
      major != 9 || minor != 0 || sm90::encode_tiled() == nullptr) {
    (void)cudaGetLastError();
    return;
  }
  // An image with the sm_90a body has the mbarriers in static shared memory; an empty body none.
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, wg_pick(SkinnyType::BFloat16, SkinnyEpilogue::Bias, 64, 64).kernel) !=
          cudaSuccess ||
      attributes.sharedSizeBytes == 0) {
    (void)cudaGetLastError();
    return;
  }
  for (SkinnyType t : {SkinnyType::BFloat16, SkinnyType::Float16})
    for (SkinnyEpilogue e : {SkinnyEpilogue::Bias, SkinnyEpilogue::GeluExact, SkinnyEpilogue::GeluTanh})
      for (int bn : {64, 128})
        for (int bm : {16, 32, 64, 128}) {
          const WgLaunch l = wg_pick(t, e, bn, bm);  // any ring depth up to the deepest may run
          if (l.max_smem > max_smem ||
              cudaFuncSetAttribute(l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.max_smem) != cudaSuccess) {
            (void)cudaGetLastError();
            return;
          }
        }
  for (int bn : {64, 128})
    for (int bm : {16, 32, 64, 128}) {
      const WgLaunch l = wg_pick(SkinnyType::BFloat16, SkinnyEpilogue::GeluExact, bn, bm);
      for (int split = 1; split <= kMaxSplit; ++split)
        f.max_clusters[bn == 128 ? 1 : 0][static_cast<size_t>(bm_index(bm))][static_cast<size_t>(split - 1)] =
            resident_clusters(reinterpret_cast<const void*>(l.kernel), kThreads, l.smem, split);
    }
  f.sms = sms;
  f.ready = true;
}

/// The current device's facts, or null when it cannot run the kernel.
const WgFacts* wg_current_facts() { return current_device_facts<WgFacts>(find_wg_facts); }

}  // namespace
}  // namespace skinny

bool skinny_wgmma_ready() { return skinny::wg_current_facts() != nullptr; }

void skinny_wgmma(const SkinnyGemmArgs& a, cudaStream_t stream) {
  using namespace skinny;
  const WgFacts* f = wg_current_facts();
  KILN_CHECK(f != nullptr,
             "skinny_gemm: the current device cannot run the sm_90a kernel (it needs compute capability 9.0, this "
             "build's sm_90a image and a driver with cuTensorMapEncodeTiled)");
  const int bm = block_m(a.m);
  const int64_t tiles_m = (a.m + bm - 1) / bm;
  const int bn = a.block_n != 0 ? a.block_n : 64;
  const WgLaunch l = wg_pick(a.type, a.epilogue, bn, bm);
  const int stages = a.stages != 0 ? std::min(a.stages, l.max_stages) : l.stages;
  const int64_t tiles_n = (a.n + bn - 1) / bn;
  const ClusterFit& fit = f->max_clusters[bn == 128 ? 1 : 0][static_cast<size_t>(bm_index(bm))];
  const SplitK s = choose_split(a.split_k, tiles_n * tiles_m, f->sms, fit, /*clusters=*/true, a.k, kBlockK);
  const int split = s.split;

  Params p = shared_params(a, s);
  p.stages = stages;
  p.prefetch_l2 = a.prefetch_l2 ? 1u : 0u;
  p.trace = a.trace;
  const CUtensorMap map_w = skinny_tensor_map("skinny_gemm", a.type, a.w, a.k, a.n, a.ldw, bn);
  const CUtensorMap map_x = skinny_tensor_map("skinny_gemm", a.type, a.x, a.k, a.m, a.ldx, bm);

  const int64_t grid_x = tiles_n * split;
  // accepts() bounds n and m so that both fit: n / BN tiles times at most 8, m / BM row tiles.
  KILN_INTERNAL_ASSERT(grid_x <= int64_t{0x7fffffff} && tiles_m <= 65535,
                       "skinny_gemm: a grid of {} x {} CTAs is past CUDA's limits (n = {}, m = {})", grid_x, tiles_m,
                       a.n, a.m);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(tiles_m));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(l.smem_for(stages));
  config.stream = stream;
  std::array<cudaLaunchAttribute, 2> attributes{};
  unsigned count = 0;
  if (split > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = static_cast<unsigned>(split);
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  if (a.programmatic) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  config.attrs = attributes.data();
  config.numAttrs = count;
  CUDA_CHECK(cudaLaunchKernelEx(&config, l.kernel, map_w, map_x, p));
}

}  // namespace kiln::cuda_kernels
