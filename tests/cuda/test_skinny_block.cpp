// The one-launch MLP block (ops/cuda/skinny_block.h) on a GPU that runs it (compute capability
// 9.0 with this build's sm_90a image): y = gelu(x w1^T + b1) w2^T + b2 into NaN-poisoned
// buffers, against float64 references on random data and, at the batch of 64 where the tiles
// match, bit for bit against the two skinny-GEMM launches with the same splits (h and y);
// both types, sizes off the tiles; three launches in a row into one workspace (the counters
// reset themselves) and a CUDA graph replayed twice with new inputs; and every refusal's
// error. Elsewhere the cases say they skip, after checking the refusal names the device.
#ifdef KILN_WITH_CUDA

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "cuda/skinny_gemm_testing.h"
#include "ops/cuda/skinny_block.h"

using namespace kiln;
using namespace kiln::testing;
using namespace kiln::testing::skinny_tests;
using kiln::cuda_kernels::skinny_block_accepts;
using kiln::cuda_kernels::skinny_block_dense_args;
using kiln::cuda_kernels::skinny_block_workspace_bytes;
using kiln::cuda_kernels::skinny_mlp_block;
using kiln::cuda_kernels::SkinnyBlockArgs;

namespace {

/// The split the block kernel gives a layer of `k` (the fewest CTAs whose shares fit 8 k
/// blocks), which the two-kernel path is told to use for the bitwise comparison.
int block_split(int64_t k) {
  const int64_t kb = (k + 63) / 64;
  int64_t split = (kb + 7) / 8;
  const int64_t per = (kb + split - 1) / split;
  split = (kb + per - 1) / per;
  return static_cast<int>(split);
}

/// One problem's operands (device and host), its outputs and workspace.
struct Block {
  int64_t m, k, hidden, n;
  DType dtype;
  SkinnyType type;
  Tensor x, w1, b1, w2, b2;      // host
  Tensor gx, gw1, gb1, gw2, gb2;  // device
  Tensor h, y, workspace;         // device

  Block(int64_t m_, int64_t k_, int64_t hidden_, int64_t n_, SkinnyType t)
      : m(m_), k(k_), hidden(hidden_), n(n_), dtype(dtype_of(t)), type(t) {
    const double s1 = 2.0 / std::sqrt(static_cast<double>(k)), s2 = 2.0 / std::sqrt(static_cast<double>(hidden));
    x = random({m, k}, dtype, -1, 1);
    w1 = random({hidden, k}, dtype, -s1, s1);
    b1 = random({hidden}, dtype, -0.5, 0.5);
    w2 = random({n, hidden}, dtype, -s2, s2);
    b2 = random({n}, dtype, -0.5, 0.5);
    gx = x.to(kGpu), gw1 = w1.to(kGpu), gb1 = b1.to(kGpu), gw2 = w2.to(kGpu), gb2 = b2.to(kGpu);
    const TensorOptions o = TensorOptions(dtype).device(kGpu);
    h = full({m, hidden}, kNaN, o);
    y = full({m, n}, kNaN, o);
    const size_t bytes = skinny_block_workspace_bytes(m, k, hidden, n);
    REQUIRE(bytes > 0);
    workspace = zeros({static_cast<int64_t>(bytes / 4)}, TensorOptions(kFloat32).device(kGpu));
  }

  SkinnyBlockArgs args() const {
    return skinny_block_dense_args(type, m, k, hidden, n, gx.data_ptr(), gw1.data_ptr(), gb1.data_ptr(),
                                   gw2.data_ptr(), gb2.data_ptr(), h.data_ptr(), y.data_ptr(), workspace.data_ptr(),
                                   static_cast<size_t>(workspace.numel()) * 4);
  }

  /// New random x (host and device), h and y poisoned again.
  void refresh_input() {
    x = random({m, k}, dtype, -1, 1);
    gx.copy_(x.to(kGpu));
    h.fill_(kNaN);
    y.fill_(kNaN);
  }
};

/// h and y of the block against float64: h = gelu(x w1^T + b1), y from the stored h.
void check_against_float64(const Block& b) {
  const Tensor h_host = b.h.cpu();
  std::vector<double> want_h = reference_h(b.x, b.w1, b.b1);
  for (double& v : want_h) v = gelu_reference(v, false);
  CHECK(relative_norm_error(values(h_host), want_h) <= norm_tolerance(b.dtype));  // NaN (unwritten) fails
  CHECK(relative_norm_error(values(b.y.cpu()), reference_h(h_host, b.w2, b.b2)) <= norm_tolerance(b.dtype));
}

/// The same block as two skinny-GEMM launches with the block kernel's splits: h and y must
/// equal the block's bit for bit.
void check_against_two_launches(const Block& b) {
  const TensorOptions o = TensorOptions(b.dtype).device(kGpu);
  const Tensor h2 = full({b.m, b.hidden}, kNaN, o), y2 = full({b.m, b.n}, kNaN, o);
  SkinnyGemmArgs up = wgmma_args(b.gx, b.gw1, b.gb1, h2, SkinnyEpilogue::GeluExact);
  SkinnyGemmArgs down = wgmma_args(h2, b.gw2, b.gb2, y2, SkinnyEpilogue::Bias);
  up.split_k = block_split(b.k);
  down.split_k = block_split(b.hidden);
  REQUIRE(skinny_gemm_accepts(up));
  REQUIRE(skinny_gemm_accepts(down));
  skinny_gemm(up, current_stream());
  skinny_gemm(down, current_stream());
  cuda::synchronize();
  CHECK(same_bits(b.h, h2));
  CHECK(same_bits(b.y, y2));
}

bool block_kernel_available() { return skinny_wgmma_ready(); }

}  // namespace

TEST_CASE("skinny_mlp_block: the MLP block at batch 64 against two skinny launches and float64") {
  if (!block_kernel_available()) {
    MESSAGE("skipped: no GPU that runs the sm_90a block kernel (compute capability 9.0 with this build's image)");
    return;
  }
  manual_seed(1601);
  for (SkinnyType type : {SkinnyType::BFloat16, SkinnyType::Float16}) {
    CAPTURE(static_cast<int>(type));
    // The article's block (K split 2 and 8: the skinny GEMM's own split for the up-projection),
    // then sizes off the tiles whose splits the skinny GEMM also takes (at most 8).
    for (const auto& [k, hidden, n] :
         std::vector<std::array<int64_t, 3>>{{1024, 4096, 1024}, {520, 1000, 200}, {72, 136, 8}, {1032, 512, 4100}}) {
      CAPTURE(k);
      CAPTURE(hidden);
      CAPTURE(n);
      Block b(64, k, hidden, n, type);
      const SkinnyBlockArgs a = b.args();
      REQUIRE(skinny_block_accepts(a));
      skinny_mlp_block(a, current_stream());
      cuda::synchronize();
      check_against_float64(b);
      check_against_two_launches(b);
    }
  }
}

TEST_CASE("skinny_mlp_block: batches below 64 and K up to 4096 (8 CTAs per tile), against float64") {
  if (!block_kernel_available()) {
    MESSAGE("skipped: no GPU that runs the sm_90a block kernel");
    return;
  }
  manual_seed(1602);
  for (int64_t m : {1, 7, 33}) {
    CAPTURE(m);
    for (const auto& [k, hidden, n] :
         std::vector<std::array<int64_t, 3>>{{1024, 4096, 1024}, {4096, 1000, 72}, {8, 8, 1}}) {
      CAPTURE(k);
      CAPTURE(hidden);
      CAPTURE(n);
      Block b(m, k, hidden, n, SkinnyType::BFloat16);
      const SkinnyBlockArgs a = b.args();
      REQUIRE(skinny_block_accepts(a));
      skinny_mlp_block(a, current_stream());
      cuda::synchronize();
      check_against_float64(b);
    }
  }
}

TEST_CASE("skinny_mlp_block: launches in a row share one workspace, and a CUDA graph replays") {
  if (!block_kernel_available()) {
    MESSAGE("skipped: no GPU that runs the sm_90a block kernel");
    return;
  }
  manual_seed(1603);
  Block b(64, 1024, 4096, 1024, SkinnyType::BFloat16);
  const SkinnyBlockArgs a = b.args();
  // Three launches back to back (the second programmatic after the first) without a host
  // synchronisation between them: each must reset the counters the next relies on.
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    b.refresh_input();
    skinny_mlp_block(a, current_stream());
    skinny_mlp_block(a, current_stream());
    cuda::synchronize();
    check_against_two_launches(b);
  }
  // The same with the down-projection loading w2 at once / only after all of the
  // up-projection's CTAs have w1 (the default above: half; the counter, too, must be left at
  // zero for the next launch).
  for (int after : {0, 128}) {
    CAPTURE(after);
    SkinnyBlockArgs late = a;
    late.w2_after_up_ctas = after;
    REQUIRE(skinny_block_accepts(late));
    b.refresh_input();
    skinny_mlp_block(late, current_stream());
    skinny_mlp_block(late, current_stream());
    cuda::synchronize();
    check_against_two_launches(b);
  }
  OwnedStream stream;
  cudaGraph_t graph = nullptr;
  cuda::synchronize();
  CUDA_REQUIRE(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  skinny_mlp_block(a, stream.get());
  CUDA_REQUIRE(cudaStreamEndCapture(stream.get(), &graph));
  cudaGraphExec_t exec = nullptr;
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    CAPTURE(replay);
    b.refresh_input();
    cuda::synchronize();
    CUDA_REQUIRE(cudaGraphLaunch(exec, stream.get()));
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    check_against_float64(b);
    check_against_two_launches(b);
  }
  CUDA_REQUIRE(cudaGraphExecDestroy(exec));
  CUDA_REQUIRE(cudaGraphDestroy(graph));
}

TEST_CASE("skinny_mlp_block: refusals are clear errors") {
  const auto refused = [](const SkinnyBlockArgs& a, const std::string& needle) {
    CHECK_FALSE(skinny_block_accepts(a));
    CHECK_THROWS_WITH_AS(skinny_mlp_block(a, nullptr), doctest::Contains(needle.c_str()), Error);
    CHECK_THROWS_WITH_AS(skinny_mlp_block(a, nullptr), doctest::Contains("skinny_mlp_block"), Error);
  };
  CHECK(skinny_block_workspace_bytes(65, 1024, 4096, 1024) == 0);
  CHECK(skinny_block_workspace_bytes(64, 0, 4096, 1024) == 0);
  CHECK(skinny_block_workspace_bytes(64, 1024, 4096, 1024) > 0);
  // Made-up 256-byte aligned addresses: the checks run before anything is touched.
  const auto at = [](uintptr_t v) { return reinterpret_cast<void*>(v); };
  const size_t bytes = skinny_block_workspace_bytes(64, 1024, 4096, 1024);
  const SkinnyBlockArgs good = skinny_block_dense_args(SkinnyType::BFloat16, 64, 1024, 4096, 1024, at(0x100000),
                                                       at(0x200000), nullptr, at(0x300000), nullptr, at(0x400000),
                                                       at(0x500000), at(0x600000), bytes);
  if (!block_kernel_available()) {
    refused(good, "compute capability 9.0");
    MESSAGE("the other refusals skipped: no GPU that runs the sm_90a block kernel");
    return;
  }
  CHECK(skinny_block_accepts(good));
  SkinnyBlockArgs a = good;
  a.m = 65;
  refused(a, "m = 65");
  a = good;
  a.ldx = 1028;  // not a multiple of 8
  refused(a, "ldx = 1028");
  a = good;
  a.w2 = at(0x300008);  // not 16-byte aligned
  refused(a, "16-byte aligned");
  a = good;
  a.ldy = 1000;
  refused(a, "ldy = 1000");
  a = good;
  a.workspace_bytes = bytes - 1;
  refused(a, fmt::format("hold {} bytes", bytes));
  a = good;
  a.workspace = nullptr;
  refused(a, "workspace");
  a = good;
  a.h = nullptr;
  refused(a, "must all be given");
  // The benchmark's w2-after-w1 wait: at most every up-projection CTA (64 tiles x 2 here).
  a = good;
  a.w2_after_up_ctas = 129;
  refused(a, "w2_after_up_ctas = 129");
  a.w2_after_up_ctas = -2;
  refused(a, "w2_after_up_ctas = -2");
  a.w2_after_up_ctas = 128;
  CHECK(skinny_block_accepts(a));
  // K past 8 CTAs of 8 k blocks.
  a = good;
  a.k = 4104, a.ldx = 4104, a.ldw1 = 4104;
  a.workspace_bytes = skinny_block_workspace_bytes(64, 4104, 4096, 1024);
  refused(a, "k = 4104");
  // A block whose CTAs cannot all be resident at once: K = 4096 for both layers (64 tiles x 8
  // CTAs + 16 x 8 = 640, against two per SM).
  a = skinny_block_dense_args(SkinnyType::BFloat16, 64, 4096, 4096, 1024, at(0x100000), at(0x200000), nullptr,
                              at(0x300000), nullptr, at(0x400000), at(0x500000), at(0x600000),
                              skinny_block_workspace_bytes(64, 4096, 4096, 1024));
  refused(a, "resident at once");
}

#endif  // KILN_WITH_CUDA
