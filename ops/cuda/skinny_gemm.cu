// The host side of the skinny GEMM (skinny_gemm.h; the portable kernel is skinny_gemm_kernel.cuh,
// the sm_90a one skinny_wgmma_kernel.cuh with its own host side in skinny_wgmma.cu): what it
// accepts, which kernel runs (the sm_90a one wherever the device runs it, so linear and
// fused_linear_gelu always agree on it), the size policy, and for the portable kernel the tile
// and split-K choice, the per-device facts and the launch.
//
// The choice. A CTA takes BN = 64 rows of w by BM rows of x, the smallest of 16, 32, 64, 128
// that holds m (so m <= 128 reads w once; larger m takes several row tiles of 128), with
// kWarpsK warps sharing each k block. The split along K (the cluster size) is the number of
// CTAs each tile can have with the tiles still fitting the SMs once, at most 8 (the portable
// cluster limit) and at most the k blocks: at (m, k, n) = (64, 1024, 4096) 64 tiles x 2, at
// (64, 4096, 1024) 16 tiles x 8, so 128 CTAs stream w either way; it is then lowered until all
// the clusters can be resident at once (one wave: the device's cudaOccupancyMaxActiveClusters,
// read once; the rule is skinny_plan.h's, shared with the sm_90a kernel). The choice depends
// only on m, n, k and the device, never on the epilogue, so a fused call and a linear on the
// same operands compute the same sums. GPUs before sm_90 have no clusters: split 1 there.
//
// The per-device facts (multiprocessors, compute capability, whether the build has an image
// for the device, resident clusters, the kernels' shared-memory limit raised) are read once
// and cached, so supported() called before a CUDA graph capture keeps runtime queries out of
// the capture.
#include "skinny_gemm.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>

#include "../../core/cuda_check.h"
#include "../../core/error.h"
#include "device_facts.h"
#include "skinny_gemm_kernel.cuh"
#include "skinny_plan.h"
#include "skinny_wgmma.h"

namespace kiln::cuda_kernels {

namespace skinny {
namespace {

constexpr int kBlockN = 64;  // rows of w per CTA (4 warps along them)
// Warps sharing each k block: 2 (8 warps per CTA) measured at least as fast as 4 (16 warps,
// one CTA per SM, so 8-CTA clusters no longer fit in one wave): docs/notes/skinny_gemm.md.
constexpr int kWarpsK = 2;
// Past 16 rows a plain linear through this kernel is slower than cuBLASLt on every measured
// shape (and the MLP block's gain shrinks to ~6% at 32 rows): docs/notes/skinny_gemm.md.
constexpr int64_t kMaxM = 16;
// The sm_90a kernel's limit (docs/notes/skinny_gemm.md, v4): up to 64 rows its GELU epilogue
// beats cuBLASLt + the GELU kernel on every measured shape (by 3-62%) and a plain linear beats
// cuBLASLt by up to 54%, except at K = 1024, N = 4096 and K = N = 4096 with 64 rows, where it
// loses 6-12% (one threshold for both ops keeps fused == gelu(linear) bit for bit); at 128 rows
// plain linears lose up to ~50%.
constexpr int64_t kMaxMWgmma = 64;
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxRows = int64_t{65535} * 64;  // grid y (row tiles) <= 65535 at BM = 64

using KernelFn = void (*)(Params);

/// The kernel of (type, BN, BM, WK, epilogue).
template <typename T, int BN, int BM, int WK>
KernelFn kernel_of(SkinnyEpilogue e) {
  switch (e) {
    case SkinnyEpilogue::GeluExact: return skinny_gemm_bias_gelu_kernel<T, BN, BM, WK>;
    case SkinnyEpilogue::GeluTanh: return skinny_gemm_bias_gelu_tanh_kernel<T, BN, BM, WK>;
    case SkinnyEpilogue::Bias: break;
  }
  return skinny_gemm_kernel<T, BN, BM, WK>;
}

/// A tile configuration and its kernel.
struct Launch {
  KernelFn kernel = nullptr;
  int bn = 0, bm = 0, wk = 0, threads = 0, smem = 0;
};

template <typename T, int BM, int WK>
Launch launch_of(SkinnyEpilogue e) {
  using Cfg = Tile<kBlockN, BM, WK>;
  return {kernel_of<T, kBlockN, BM, WK>(e), kBlockN, BM, WK, Cfg::kThreads, Cfg::kSmemBytes};
}

/// The configuration for `bm` rows of x (16, 32, 64 or 128) and `wk` warps per k block (2, 4).
template <typename T, int WK>
Launch pick_typed(SkinnyEpilogue e, int bm) {
  switch (bm) {
    case 16: return launch_of<T, 16, WK>(e);
    case 32: return launch_of<T, 32, WK>(e);
    case 64: return launch_of<T, 64, WK>(e);
    default: return launch_of<T, 128, WK>(e);
  }
}

Launch pick(SkinnyType type, SkinnyEpilogue e, int bm, int wk) {
  if (type == SkinnyType::BFloat16)
    return wk == 4 ? pick_typed<__nv_bfloat16, 4>(e, bm) : pick_typed<__nv_bfloat16, 2>(e, bm);
  return wk == 4 ? pick_typed<__half, 4>(e, bm) : pick_typed<__half, 2>(e, bm);
}

/// What one device offers, found once.
struct DeviceFacts {
  bool ready = false;     ///< the kernels run here
  bool clusters = false;  ///< thread-block clusters (compute capability 9.0 and newer)
  int sms = 0;
  int max_smem = 0;  ///< dynamic shared memory a block may opt in to
  /// Clusters of each size resident at once, per (BM index, WK index): the split is lowered
  /// until a call's clusters fit in one wave.
  std::array<std::array<ClusterFit, 2>, 4> max_clusters{};
};

/// The facts of `device`, and every kernel's shared-memory limit raised there (once).
void find_device_facts(int device, DeviceFacts& f) {
  int major = 0, sms = 0, max_smem = 0;
  cudaFuncAttributes attributes{};
  const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
                  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
                  cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) ==
                      cudaSuccess &&
                  major >= 8 &&
                  cudaFuncGetAttributes(&attributes, skinny_gemm_kernel<__nv_bfloat16, kBlockN, 64, kWarpsK>) ==
                      cudaSuccess;
  (void)cudaGetLastError();  // a missing image leaves its error behind
  if (!ok) return;
  for (SkinnyType t : {SkinnyType::BFloat16, SkinnyType::Float16})
    for (SkinnyEpilogue e : {SkinnyEpilogue::Bias, SkinnyEpilogue::GeluExact, SkinnyEpilogue::GeluTanh})
      for (int bm : {16, 32, 64, 128})
        for (int wk : {2, 4}) {
          const Launch l = pick(t, e, bm, wk);
          if (l.smem > max_smem) continue;  // (a part with less shared memory): supported() declines it
          if (cudaFuncSetAttribute(l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem) != cudaSuccess) {
            (void)cudaGetLastError();
            return;
          }
        }
  f.sms = sms;
  f.max_smem = max_smem;
  f.clusters = major >= 9;
  if (f.clusters) {
    // The GELU kernels use the most registers: their residency bounds the others'.
    for (int bm : {16, 32, 64, 128})
      for (int wk : {2, 4}) {
        const Launch l = pick(SkinnyType::BFloat16, SkinnyEpilogue::GeluExact, bm, wk);
        for (int split = 2; split <= kMaxSplit; ++split)
          f.max_clusters[static_cast<size_t>(bm_index(bm))][wk == 4 ? 1 : 0][static_cast<size_t>(split - 1)] =
              l.smem <= max_smem
                  ? resident_clusters(reinterpret_cast<const void*>(l.kernel), l.threads, l.smem, split)
                  : 0;
      }
  }
  f.ready = true;
}

/// The current device's facts, or null when there is none usable.
const DeviceFacts* current_facts() { return current_device_facts<DeviceFacts>(find_device_facts); }

/// The grid of a call: tiles, split and k blocks per rank.
struct Plan {
  Launch launch;
  int64_t tiles_n = 0, tiles_m = 0;
  SplitK split;
};

/// Whether the sm_90a kernel runs this call (the override's, or the device's choice).
bool uses_wgmma(const SkinnyGemmArgs& a) {
  return a.kernel == SkinnyKernel::Wgmma ||
         (a.kernel == SkinnyKernel::Auto && a.warps_k == 0 && skinny_wgmma_ready());
}

Plan plan(const SkinnyGemmArgs& a, const DeviceFacts& f) {
  Plan p;
  const int bm = block_m(a.m);
  p.launch = pick(a.type, a.epilogue, bm, a.warps_k != 0 ? a.warps_k : kWarpsK);
  p.tiles_n = (a.n + kBlockN - 1) / kBlockN;
  p.tiles_m = (a.m + bm - 1) / bm;
  const ClusterFit& fit = f.max_clusters[static_cast<size_t>(bm_index(bm))][p.launch.wk == 4 ? 1 : 0];
  p.split = choose_split(a.split_k, p.tiles_n * p.tiles_m, f.sms, fit, f.clusters, a.k, kBlockK);
  return p;
}

}  // namespace
}  // namespace skinny

int64_t skinny_gemm_max_m() { return skinny_wgmma_ready() ? skinny::kMaxMWgmma : skinny::kMaxM; }

bool skinny_gemm_accepts(const SkinnyGemmArgs& a) {
  if (a.m <= 0 || a.n <= 0 || a.k <= 0 || a.m > skinny::kMaxRows || a.n > skinny::kMaxInt32 - 128 ||
      a.k > skinny::kMaxInt32 - skinny::kBlockK)
    return false;
  if (a.x == nullptr || a.w == nullptr || a.out == nullptr) return false;
  if (a.k % 8 != 0 || a.ldx % 8 != 0 || a.ldw % 8 != 0) return false;  // whole 16-byte chunks
  if (a.ldx < a.k || a.ldw < a.k || a.ldo < a.n) return false;
  if (reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || reinterpret_cast<uintptr_t>(a.w) % 16 != 0) return false;
  if (a.pre != nullptr && (a.epilogue == SkinnyEpilogue::Bias || a.ldp < a.n)) return false;
  if (a.split_k < 0 || a.split_k > skinny::kMaxSplit) return false;
  if (a.warps_k != 0 && a.warps_k != 2 && a.warps_k != 4) return false;
  if (a.kernel != SkinnyKernel::Auto && a.kernel != SkinnyKernel::Portable && a.kernel != SkinnyKernel::Wgmma)
    return false;
  if (a.kernel == SkinnyKernel::Wgmma && a.warps_k != 0) return false;  // a portable-kernel knob
  if (a.block_n != 0 && a.block_n != 64 && a.block_n != 128) return false;
  if (a.kernel == SkinnyKernel::Portable && a.block_n != 0) return false;  // an sm_90a-kernel knob
  if (a.stages != 0 && (a.stages < 2 || a.stages > 8 || a.kernel == SkinnyKernel::Portable)) return false;
  if (a.epilogue_batch < 0 || a.epilogue_batch > skinny::kEpilogueBatch) return false;
  return true;
}

bool skinny_gemm_supported(const SkinnyGemmArgs& a) {
  if (!skinny_gemm_accepts(a)) return false;
  if (skinny::uses_wgmma(a)) return a.m <= skinny::kMaxMWgmma && skinny_wgmma_ready();
  if (a.m > skinny::kMaxM) return false;
  const skinny::DeviceFacts* f = skinny::current_facts();
  if (f == nullptr) return false;
  const skinny::Plan p = skinny::plan(a, *f);
  if (p.launch.smem > f->max_smem) return false;
  // No split K without clusters: only where the tiles alone fill half the SMs.
  return f->clusters || p.tiles_n * p.tiles_m * 2 >= f->sms;
}

void skinny_gemm(const SkinnyGemmArgs& a, cudaStream_t stream) {
  KILN_CHECK(skinny_gemm_accepts(a),
             "skinny_gemm: cannot take m = {}, n = {}, k = {} (ldx {}, ldw {}, ldo {}, ldp {}, pre {}, epilogue {}, "
             "split_k {}, warps_k {}, kernel {}, block_n {}, stages {}, epilogue_batch {}); it wants positive sizes, k, "
             "ldx and ldw multiples of 8, 16-byte aligned x and w, row strides at least the row length, pre only "
             "with a GELU epilogue, warps_k, block_n and stages (2..8) each with its own kernel, epilogue_batch 0..4",
             a.m, a.n, a.k, a.ldx, a.ldw, a.ldo, a.ldp, a.pre != nullptr, static_cast<int>(a.epilogue), a.split_k,
             a.warps_k, static_cast<int>(a.kernel), a.block_n, a.stages, a.epilogue_batch);
  if (skinny::uses_wgmma(a)) {
    skinny_wgmma(a, stream);
    return;
  }
  const skinny::DeviceFacts* f = skinny::current_facts();
  KILN_CHECK(f != nullptr, "skinny_gemm: the current device cannot run the kernel (compute capability below 8.0, "
                           "or this build has no image for it)");
  const skinny::Plan plan = skinny::plan(a, *f);
  KILN_CHECK(plan.launch.smem <= f->max_smem,
             "skinny_gemm: the {} x {} tile needs {} bytes of shared memory, the device offers {}", plan.launch.bn,
             plan.launch.bm, plan.launch.smem, f->max_smem);
  skinny::Params p = skinny::shared_params(a, plan.split);
  p.x = a.x;
  p.w = a.w;
  p.ldx = a.ldx;
  p.ldw = a.ldw;

  const int64_t grid_x = plan.tiles_n * plan.split.split;
  // accepts() bounds n and m so that both fit: n / 64 tiles times at most 8, m / 64 row tiles.
  KILN_INTERNAL_ASSERT(grid_x <= skinny::kMaxInt32 && plan.tiles_m <= 65535,
                       "skinny_gemm: a grid of {} x {} CTAs is past CUDA's limits (n = {}, m = {})", grid_x,
                       plan.tiles_m, a.n, a.m);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(plan.tiles_m));
  config.blockDim = dim3(static_cast<unsigned>(plan.launch.threads));
  config.dynamicSmemBytes = static_cast<size_t>(plan.launch.smem);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  if (plan.split.split > 1) {
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = static_cast<unsigned>(plan.split.split);
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  CUDA_CHECK(cudaLaunchKernelEx(&config, plan.launch.kernel, p));
}

}  // namespace kiln::cuda_kernels
