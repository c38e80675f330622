// The skinny GEMM's sm_90a kernel (ops/cuda/skinny_wgmma.h, reached through skinny_gemm.h with
// SkinnyKernel::Wgmma) on a GPU that runs it (compute capability 9.0 and this build's image):
// into NaN-poisoned outputs against float64 references on random data, both types, every
// epilogue with and without bias and pre-activation, M from 1 to 200 (every BM and several row
// tiles), N and K off the tiles, both tile widths, every split, padded output rows, with and
// without programmatic dependent launch, every ring depth, with and without the L2 prefetch;
// an up/down projection pair chained by programmatic dependent launch in a CUDA graph, replayed
// into poisoned buffers; and weights overwritten by the kernel right before a programmatic
// launch. Elsewhere the cases say they skip. (Its errors and routing: test_skinny_gemm.cpp.)
#ifdef KILN_WITH_CUDA

#include <cuda_runtime_api.h>

#include <array>
#include <vector>

#include "cuda/skinny_gemm_testing.h"

using namespace kiln;
using namespace kiln::testing;
using namespace kiln::testing::skinny_tests;

TEST_CASE("skinny_gemm, sm_90a kernel: M from 1 to 200, both tile widths, every split, N and K off the tiles") {
  if (!skinny_wgmma_ready()) {
    MESSAGE("skipped: no GPU that runs the sm_90a skinny GEMM (compute capability 9.0 with this build's image)");
    return;
  }
  manual_seed(1507);
  constexpr SkinnyKernel kWg = SkinnyKernel::Wgmma;
  for (int bn : {64, 128}) {
    CAPTURE(bn);
    for (int64_t m : {1, 7, 16, 17, 33, 64, 65, 100, 128, 129, 200})  // BM 16, 32, 64, 128 and row tiles
      check_shape(m, 1000, 1032, {.kernel = kWg, .block_n = bn});
    for (const auto& [n, k] : std::vector<std::array<int64_t, 2>>{{4104, 8}, {8, 4104}, {120, 1000}, {65, 72}})
      for (int64_t m : {3, 64}) check_shape(m, n, k, {.kernel = kWg, .block_n = bn});
    for (int split = 1; split <= 8; ++split)
      check_shape(33, 1000, 1024, {.split_k = split, .kernel = kWg, .block_n = bn});
    check_shape(64, 4096, 1024, {.pad_o = 4, .split_k = 3, .kernel = kWg, .block_n = bn});
    check_shape(7, 4104, 1024, {.pad_o = 5, .kernel = kWg, .block_n = bn});
  }
  check_shape(64, 1024, 4096, {.kernel = kWg});  // the default choices
  check_shape(64, 4096, 1024, {.kernel = kWg, .programmatic = false});
  // Ring depths from 2 (refilled every other block) to 8, and without the L2 prefetch.
  for (int stages : {2, 3, 8}) {
    check_shape(64, 4096, 1024, {.kernel = kWg, .stages = stages});
    check_shape(129, 1000, 1032, {.kernel = kWg, .block_n = 128, .stages = stages});
  }
  check_shape(64, 1024, 4096, {.kernel = kWg, .prefetch_l2 = false});
}

TEST_CASE("skinny_gemm, sm_90a kernel: a kernel writing the weights right before a programmatic launch is seen") {
  if (!skinny_wgmma_ready()) {
    MESSAGE("skipped: no GPU that runs the sm_90a skinny GEMM");
    return;
  }
  // The launch may start while the previous kernel runs and prefetches w into L2 before it
  // waits; the previous kernel here overwrites w (as an optimizer step would). The result must
  // come from the new w every time.
  manual_seed(1509);
  const int64_t m = 64, n = 4096, k = 1024;
  Operands o = make_operands(m, n, k, kBFloat16);
  const Tensor out = full({m, n}, kNaN, TensorOptions(kBFloat16).device(kGpu));
  const SkinnyGemmArgs a = wgmma_args(o.gx, o.gw, o.gb, out, SkinnyEpilogue::Bias);
  REQUIRE(a.programmatic);
  REQUIRE(a.prefetch_l2);
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    const double s = 2.0 / std::sqrt(static_cast<double>(k));
    const Tensor w_new = random({n, k}, kBFloat16, -s, s);
    const Tensor staged = w_new.to(kGpu);
    cuda::synchronize();
    skinny_gemm(a, current_stream());  // reads the old w, leaves it in L2
    o.gw.copy_(staged);                // a kernel on the same stream writes the new w
    skinny_gemm(a, current_stream());  // programmatic: may start during the copy
    cuda::synchronize();
    CHECK(relative_norm_error(values(out.cpu()), reference_h(o.x, w_new, o.b)) <= norm_tolerance(kBFloat16));
  }
}

TEST_CASE("skinny_gemm, sm_90a kernel: two launches chained by programmatic dependent launch, in a CUDA graph") {
  if (!skinny_wgmma_ready()) {
    MESSAGE("skipped: no GPU that runs the sm_90a skinny GEMM");
    return;
  }
  manual_seed(1508);
  // The MLP block: h = gelu(x w1^T + b1), y = h w2^T + b2, the second launch programmatic (it
  // reads h, which the first writes) as by default, captured and replayed twice.
  const int64_t m = 64, d = 1024, f = 4096;
  const Operands up = make_operands(m, f, d, kBFloat16);
  const TensorOptions o = TensorOptions(kBFloat16).device(kGpu);
  const Tensor w2 = random({d, f}, kBFloat16, -2.0 / 64, 2.0 / 64), b2 = random({d}, kBFloat16, -0.5, 0.5);
  const Tensor gw2 = w2.to(kGpu), gb2 = b2.to(kGpu);
  Tensor h = full({m, f}, kNaN, o), y = full({m, d}, kNaN, o);
  const SkinnyGemmArgs a1 = wgmma_args(up.gx, up.gw, up.gb, h, SkinnyEpilogue::GeluExact);
  const SkinnyGemmArgs a2 = wgmma_args(h, gw2, gb2, y, SkinnyEpilogue::Bias);
  REQUIRE(a2.programmatic);  // the default: both launches programmatic
  REQUIRE(skinny_gemm_accepts(a1));
  REQUIRE(skinny_gemm_accepts(a2));
  cuda::synchronize();
  OwnedStream stream;
  cudaGraph_t graph = nullptr;
  CUDA_REQUIRE(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  skinny_gemm(a1, stream.get());
  skinny_gemm(a2, stream.get());
  CUDA_REQUIRE(cudaStreamEndCapture(stream.get(), &graph));
  cudaGraphExec_t exec = nullptr;
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_REQUIRE(cudaGraphLaunch(exec, stream.get()));
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  // The reference of the second layer from the first layer's stored (rounded) output.
  const Tensor h_host = h.cpu();
  const std::vector<double> want_y = reference_h(h_host, w2, b2);
  std::vector<double> want_h = up.h;
  for (double& v : want_h) v = gelu_reference(v, false);
  CHECK(relative_norm_error(values(h_host), want_h) <= norm_tolerance(kBFloat16));
  CHECK(relative_norm_error(values(y.cpu()), want_y) <= norm_tolerance(kBFloat16));
  // Without the dependency honoured the second launch would read a poisoned h (NaN).
  const Tensor first = y.clone();
  h.fill_(kNaN);
  y.fill_(kNaN);
  cuda::synchronize();
  CUDA_REQUIRE(cudaGraphLaunch(exec, stream.get()));
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(same_bits(y, first));
  CUDA_REQUIRE(cudaGraphExecDestroy(exec));
  CUDA_REQUIRE(cudaGraphDestroy(graph));
}

#endif  // KILN_WITH_CUDA
