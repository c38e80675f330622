// The host side of the one-launch MLP block (skinny_block.h; kernel: skinny_block_kernel.cuh):
// the plan (how many CTAs share each tile's K, the workspace layout), what the device offers
// (resident CTAs per SM for the kernel, read once per device), the checks, the tensor maps and
// the launch. Built for sm_90a alone, in the kiln_sm90 object library.
//
// The plan: each layer's tiles are 64 rows of its weight; a tile's K is split over the fewest
// CTAs whose shares fit a CTA's kWBlocks k blocks (1024 elements), at most kMaxSplit of them
// (so K <= 4096 per layer: a rank's slice sums every rank's partial with all loads in flight
// at once). At (64, 1024, 4096, 1024) the up-projection takes 64 tiles x 2 CTAs (the skinny
// GEMM's own split there, hence the same h) and the down-projection 16 tiles x 8. The
// kernel's CTAs wait for one another (a tile's ranks, the up-projection's tiles), so the host
// launches only grids that are resident in full (two CTAs per SM on an H100/H200: 256 of 264
// at that shape); larger blocks are declined.
//
// The workspace: [ws1][ws2][parked1][parked2][finished2][ready][done][w1_landed], each part
// 256-byte aligned; only its counters need to be zero, once, before the first launch (each
// launch leaves them zero).
#include "skinny_block.h"

#include <cuda.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "../../core/cuda_check.h"
#include "../../core/error.h"
#include "device_facts.h"
#include "skinny_block_kernel.cuh"
#include "skinny_tensor_map.h"
#include "skinny_wgmma.h"

namespace kiln::cuda_kernels {

namespace skinny {
namespace {

constexpr int64_t kMaxSize = int64_t{1} << 20;  // keeps every index and byte count well inside 32/64 bits

using BlockKernelFn = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap, BlockParams);

BlockKernelFn block_kernel_of(SkinnyType type) {
  return type == SkinnyType::BFloat16 ? skinny_block_kernel<__nv_bfloat16> : skinny_block_kernel<__half>;
}

/// What one device offers the block kernel, found once.
struct BlockFacts {
  bool ready = false;
  int sms = 0;
  int ctas_per_sm = 0;  ///< resident CTAs of the kernel per SM
};

/// Fills `f` for `device` (once per device: current_device_facts), raising the kernels' shared-memory limit.
void find_block_facts(int device, BlockFacts& f) {
  if (!skinny_wgmma_ready()) return;  // compute capability 9.0, the sm_90a image, the driver's encoder
  int sms = 0, per_sm = 0;
  for (SkinnyType t : {SkinnyType::BFloat16, SkinnyType::Float16})
    if (cudaFuncSetAttribute(block_kernel_of(t), cudaFuncAttributeMaxDynamicSharedMemorySize,
                             BlockTile::kSmemBytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, block_kernel_of(SkinnyType::BFloat16),
                                                    BlockTile::kThreads, BlockTile::kSmemBytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  f.sms = sms;
  f.ctas_per_sm = per_sm;
  f.ready = per_sm > 0;
}

/// The current device's facts, or null when it cannot run the block kernel.
const BlockFacts* current_block_facts() { return current_device_facts<BlockFacts>(find_block_facts); }

/// The split and workspace layout for one set of sizes (already within [1, kMaxSize]).
struct BlockPlan {
  int32_t kb1 = 0, kb2 = 0, tiles1 = 0, tiles2 = 0;
  int32_t split1 = 1, per1 = 0, split2 = 1, per2 = 0;
  int64_t ctas = 0;
  size_t ws1 = 0, ws2 = 0, parked1 = 0, parked2 = 0, finished2 = 0, ready = 0, done = 0,
         w1_landed = 0;  ///< offsets
  size_t bytes = 0;  ///< the whole workspace
};

/// The fewest CTAs per tile whose shares of `kb` k blocks fit a CTA, and the share.
void split_k_blocks(int32_t kb, int32_t& split, int32_t& per) {
  split = (kb + BlockTile::kWBlocks - 1) / BlockTile::kWBlocks;
  per = (kb + split - 1) / split;
  split = (kb + per - 1) / per;  // no CTA without k blocks
}

size_t align256(size_t v) { return (v + 255) / 256 * 256; }

BlockPlan plan_of(int64_t k, int64_t hidden, int64_t n) {
  BlockPlan p;
  p.kb1 = static_cast<int32_t>((k + 63) / 64);
  p.kb2 = static_cast<int32_t>((hidden + 63) / 64);
  p.tiles1 = p.kb2;  // up-projection tile j is the down-projection's k block j
  p.tiles2 = static_cast<int32_t>((n + 63) / 64);
  split_k_blocks(p.kb1, p.split1, p.per1);
  split_k_blocks(p.kb2, p.split2, p.per2);
  p.ctas = int64_t{p.tiles1} * p.split1 + int64_t{p.tiles2} * p.split2;
  const auto partials = [](int32_t tiles, int32_t split) {
    return split > 1 ? static_cast<size_t>(tiles) * static_cast<size_t>(split) * BlockTile::kPartial * sizeof(float)
                     : size_t{0};
  };
  p.ws1 = 0;
  p.ws2 = align256(partials(p.tiles1, p.split1));
  const auto counters = [](int32_t tiles) { return align256(static_cast<size_t>(tiles) * sizeof(uint32_t)); };
  p.parked1 = p.ws2 + align256(partials(p.tiles2, p.split2));
  p.parked2 = p.parked1 + counters(p.tiles1);
  p.finished2 = p.parked2 + counters(p.tiles2);
  p.ready = p.finished2 + counters(p.tiles2);
  p.done = p.ready + counters(p.tiles1);
  p.w1_landed = p.done + 256;
  p.bytes = p.w1_landed + 256;
  return p;
}

bool sizes_in_range(int64_t m, int64_t k, int64_t hidden, int64_t n) {
  return m >= 1 && m <= BlockTile::kBlockM && k >= 1 && k <= kMaxSize && hidden >= 1 && hidden <= kMaxSize &&
         n >= 1 && n <= kMaxSize;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/// Why the block kernel declines `a` (empty when it takes it); `facts` null: no device for it.
std::string refusal(const SkinnyBlockArgs& a, const BlockFacts* facts) {
  if (facts == nullptr)
    return "the current device cannot run the sm_90a block kernel (it needs compute capability 9.0, this build's "
           "sm_90a image and a driver with cuTensorMapEncodeTiled)";
  if (!sizes_in_range(a.m, a.k, a.hidden, a.n))
    return fmt::format("sizes m = {}, k = {}, hidden = {}, n = {} are out of range (m in [1, 64], the others in "
                       "[1, 2^20])",
                       a.m, a.k, a.hidden, a.n);
  if (a.x == nullptr || a.w1 == nullptr || a.w2 == nullptr || a.h == nullptr || a.y == nullptr)
    return "x, w1, w2, h and y must all be given";
  const auto tma_ok = [](const void* p, int64_t ld, int64_t cols) { return aligned16(p) && ld % 8 == 0 && ld >= cols; };
  if (!tma_ok(a.x, a.ldx, a.k) || !tma_ok(a.w1, a.ldw1, a.k) || !tma_ok(a.w2, a.ldw2, a.hidden) ||
      !tma_ok(a.h, a.ldh, a.hidden))
    return fmt::format("TMA needs 16-byte aligned x, w1, w2, h with row strides that are multiples of 8 elements "
                       "and at least the rows' lengths (ldx = {}, ldw1 = {}, ldw2 = {}, ldh = {} for k = {}, hidden = {})",
                       a.ldx, a.ldw1, a.ldw2, a.ldh, a.k, a.hidden);
  if (a.ldy < a.n) return fmt::format("ldy = {} is shorter than a row of y (n = {})", a.ldy, a.n);
  const BlockPlan plan = plan_of(a.k, a.hidden, a.n);
  if (plan.split1 > kMaxSplit || plan.split2 > kMaxSplit)
    return fmt::format("k = {} and hidden = {} must each fit {} CTAs of {} k blocks of 64 (at most {})", a.k, a.hidden,
                       kMaxSplit, BlockTile::kWBlocks, kMaxSplit * BlockTile::kWBlocks * 64);
  const int64_t resident = int64_t{facts->sms} * facts->ctas_per_sm;
  if (plan.ctas > resident)
    return fmt::format("k = {}, hidden = {}, n = {} need {} CTAs resident at once, the device holds {}", a.k, a.hidden,
                       a.n, plan.ctas, resident);
  if (a.w2_after_up_ctas < -1 || a.w2_after_up_ctas > int64_t{plan.tiles1} * plan.split1)
    return fmt::format("w2_after_up_ctas = {} must lie in [-1, {}] (the up-projection's CTAs; -1: half)",
                       a.w2_after_up_ctas, int64_t{plan.tiles1} * plan.split1);
  if (a.workspace == nullptr || a.workspace_bytes < plan.bytes || !aligned16(a.workspace))
    return fmt::format("the workspace must be 16-byte aligned and hold {} bytes (given {} bytes at {})", plan.bytes,
                       a.workspace_bytes, a.workspace);
  return {};
}

}  // namespace
}  // namespace skinny

size_t skinny_block_workspace_bytes(int64_t m, int64_t k, int64_t hidden, int64_t n) {
  if (!skinny::sizes_in_range(m, k, hidden, n)) return 0;
  return skinny::plan_of(k, hidden, n).bytes;
}

int64_t skinny_block_up_ctas(int64_t m, int64_t k, int64_t hidden, int64_t n) {
  if (!skinny::sizes_in_range(m, k, hidden, n)) return 0;
  const skinny::BlockPlan plan = skinny::plan_of(k, hidden, n);
  return int64_t{plan.tiles1} * plan.split1;
}

bool skinny_block_accepts(const SkinnyBlockArgs& args) {
  return skinny::refusal(args, skinny::current_block_facts()).empty();
}

void skinny_mlp_block(const SkinnyBlockArgs& a, cudaStream_t stream) {
  using namespace skinny;
  const std::string why = refusal(a, current_block_facts());
  KILN_CHECK(why.empty(), "skinny_mlp_block: {}", why);
  const BlockPlan plan = plan_of(a.k, a.hidden, a.n);
  auto* ws = static_cast<uint8_t*>(a.workspace);
  BlockParams p;
  p.b1 = a.b1;
  p.b2 = a.b2;
  p.h = a.h;
  p.y = a.y;
  p.ldh = a.ldh;
  p.ldy = a.ldy;
  p.m = static_cast<int32_t>(a.m);
  p.hidden = static_cast<int32_t>(a.hidden);
  p.n = static_cast<int32_t>(a.n);
  p.kb1 = plan.kb1, p.kb2 = plan.kb2;
  p.split1 = plan.split1, p.per1 = plan.per1, p.split2 = plan.split2, p.per2 = plan.per2;
  p.tiles1 = plan.tiles1, p.tiles2 = plan.tiles2;
  p.ws1 = reinterpret_cast<float*>(ws + plan.ws1);
  p.ws2 = reinterpret_cast<float*>(ws + plan.ws2);
  p.parked1 = reinterpret_cast<uint32_t*>(ws + plan.parked1);
  p.parked2 = reinterpret_cast<uint32_t*>(ws + plan.parked2);
  p.finished2 = reinterpret_cast<uint32_t*>(ws + plan.finished2);
  p.ready = reinterpret_cast<uint32_t*>(ws + plan.ready);
  p.done = reinterpret_cast<uint32_t*>(ws + plan.done);
  p.w1_landed = reinterpret_cast<uint32_t*>(ws + plan.w1_landed);
  const int64_t up_ctas = int64_t{plan.tiles1} * plan.split1;
  p.w2_after = static_cast<uint32_t>(a.w2_after_up_ctas < 0 ? up_ctas / 2 : a.w2_after_up_ctas);
  p.trace = a.trace;
  p.vec_h = a.ldh % 4 == 0 && reinterpret_cast<uintptr_t>(a.h) % 8 == 0;
  p.vec_y = a.ldy % 4 == 0 && reinterpret_cast<uintptr_t>(a.y) % 8 == 0;
  constexpr int kBox = BlockTile::kBlockN;  // 64 rows of w, 64 rows (the padded batch) of x and h
  static_assert(BlockTile::kBlockM == kBox, "one box height for weights and activations");
  const char* op = "skinny_mlp_block";
  const CUtensorMap map_x = skinny_tensor_map(op, a.type, a.x, a.k, a.m, a.ldx, kBox);
  const CUtensorMap map_w1 = skinny_tensor_map(op, a.type, a.w1, a.k, a.hidden, a.ldw1, kBox);
  const CUtensorMap map_h = skinny_tensor_map(op, a.type, a.h, a.hidden, a.m, a.ldh, kBox);
  const CUtensorMap map_w2 = skinny_tensor_map(op, a.type, a.w2, a.hidden, a.n, a.ldw2, kBox);

  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(plan.ctas));
  config.blockDim = dim3(BlockTile::kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(BlockTile::kSmemBytes);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = a.programmatic ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&config, block_kernel_of(a.type), map_x, map_w1, map_h, map_w2, p));
}

}  // namespace kiln::cuda_kernels
