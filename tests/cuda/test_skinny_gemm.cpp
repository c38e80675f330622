// Kiln's skinny GEMM (ops/cuda/skinny_gemm.h): what accepts() and supported() decline and the
// errors skinny_gemm() throws (on any machine); on a GPU that runs them, both kernels (the
// portable mma.sync one and, on compute capability 9.0, the sm_90a wgmma one) called through
// the interface into NaN-poisoned outputs (padding columns of a wider leading dimension must
// stay poisoned) against float64 references on random data, for bf16 and f16, every epilogue,
// with and without bias and pre-activation, M in {1, 7, 20, 64, 127, 128} (and 200, past the
// size policy, through the direct call) and N, K from {8, 120, 1000, 1024, 4096, 4104}, every
// split and warps-per-k-block override of the portable kernel (the sm_90a kernel's own sweeps:
// test_skinny_wgmma.cpp); the ops that route to it (linear, fused_linear_gelu) bit for bit
// against the direct call and against each other (fused == gelu(linear)); linear on the skinny
// path against cuBLASLt; NaN and Inf where cuBLASLt + the gelu op put them; the fallbacks (K not
// a multiple of 8, unaligned rows, float32, M above the policy, a transposed weight); and a
// replay from a CUDA graph. Elsewhere the numeric cases say they skip.
#ifdef KILN_WITH_CUDA

#include <cuda_runtime_api.h>

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/skinny_gemm_testing.h"

using namespace kiln;
using namespace kiln::testing;
using namespace kiln::testing::skinny_tests;


TEST_CASE("skinny_gemm_accepts declines what the kernel cannot take") {
  const SkinnyGemmArgs base = dummy_args();
  CHECK(skinny_gemm_accepts(base));
  SkinnyGemmArgs a = base;
  a.m = 0;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.n = 0;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.k = 0;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.k = 1020, a.ldx = 1024, a.ldw = 1024;  // k not a multiple of 8
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.ldx = 1028;  // rows 2056 bytes apart: not 16-byte aligned
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.ldw = 1030;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.ldx = 1016;  // row stride below k
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.ldw = 512;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.ldo = 4095;  // row stride below n
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.x = static_cast<const char*>(a.x) + 8;  // base not 16-byte aligned
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.w = static_cast<const char*>(a.w) + 2;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.x = nullptr;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.w = nullptr;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.out = nullptr;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.pre = a.out, a.ldp = a.n;  // pre with the plain linear epilogue
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.epilogue = SkinnyEpilogue::GeluExact, a.pre = a.out, a.ldp = a.n - 1;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a.ldp = a.n;
  CHECK(skinny_gemm_accepts(a));
  a = base, a.split_k = 9;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.split_k = -1;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.warps_k = 3;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.m = int64_t{65535} * 64 + 1;  // past the grid's row tiles
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.n = int64_t{1} << 31;
  a.ldo = a.n;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.k = int64_t{1} << 31, a.ldx = a.k, a.ldw = a.k;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.kernel = SkinnyKernel::Wgmma;
  CHECK(skinny_gemm_accepts(a));
  a.warps_k = 2;  // the portable kernel's knob
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.kernel = SkinnyKernel::Portable, a.warps_k = 4;
  CHECK(skinny_gemm_accepts(a));
  a = base, a.block_n = 128;  // the sm_90a kernel's knob
  CHECK(skinny_gemm_accepts(a));
  a.kernel = SkinnyKernel::Wgmma;
  CHECK(skinny_gemm_accepts(a));
  a.kernel = SkinnyKernel::Portable;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.kernel = SkinnyKernel::Wgmma, a.block_n = 96;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a.block_n = 256;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.kernel = SkinnyKernel::Portable, a.programmatic = false;
  CHECK(skinny_gemm_accepts(a));
  a = base, a.kernel = SkinnyKernel::Wgmma, a.stages = 5;  // the sm_90a kernel's ring depth, 2..8
  CHECK(skinny_gemm_accepts(a));
  a.stages = 1;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a.stages = 9;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.kernel = SkinnyKernel::Portable, a.stages = 4;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a = base, a.kernel = static_cast<SkinnyKernel>(7);
  CHECK_FALSE(skinny_gemm_accepts(a));
  for (int batch = 0; batch <= 4; ++batch) {  // the epilogue's groups per thread at once, 1..4 (0: the default)
    a = base, a.epilogue_batch = batch;
    CHECK(skinny_gemm_accepts(a));
  }
  a = base, a.epilogue_batch = -1;
  CHECK_FALSE(skinny_gemm_accepts(a));
  a.epilogue_batch = 5;
  CHECK_FALSE(skinny_gemm_accepts(a));
}

TEST_CASE("skinny_gemm_supported applies the size policy; skinny_gemm throws on what it cannot run") {
  CHECK(skinny_gemm_max_m() >= 16);
  CHECK_FALSE(skinny_gemm_supported(dummy_args(skinny_gemm_max_m() + 1)));
  SkinnyGemmArgs bad = dummy_args();
  bad.k = 12, bad.ldx = 12, bad.ldw = 12;
  CHECK_FALSE(skinny_gemm_supported(bad));
  CHECK_THROWS_WITH_AS(skinny_gemm(bad, nullptr),
                       doctest::Contains("skinny_gemm: cannot take m = 64, n = 4096, k = 12"), Error);
  bad = dummy_args(), bad.pre = bad.out, bad.ldp = bad.n;
  CHECK_THROWS_WITH_AS(skinny_gemm(bad, nullptr), doctest::Contains("skinny_gemm: cannot take"), Error);
  if (!kernel_available()) {
    // No device that runs it: the call says so rather than launching.
    CHECK_THROWS_WITH_AS(skinny_gemm(dummy_args(), nullptr),
                         doctest::Contains("skinny_gemm: the current device cannot run the kernel"), Error);
  }
  SkinnyGemmArgs wg = dummy_args();
  wg.kernel = SkinnyKernel::Wgmma;
  if (!skinny_wgmma_ready()) {
    // The sm_90a kernel asked for where it cannot run: declined, and the call says why.
    CHECK_FALSE(skinny_gemm_supported(wg));
    CHECK_THROWS_WITH_AS(skinny_gemm(wg, nullptr),
                         doctest::Contains("skinny_gemm: the current device cannot run the sm_90a kernel"), Error);
  } else {
    // Where it runs, the default is the sm_90a kernel with its own (larger) batch limit.
    CHECK(skinny_gemm_supported(wg));
    CHECK(skinny_gemm_supported(dummy_args(skinny_gemm_max_m())));
    wg.m = skinny_gemm_max_m() + 1;
    CHECK_FALSE(skinny_gemm_supported(wg));
    SkinnyGemmArgs portable = dummy_args(17);
    portable.kernel = SkinnyKernel::Portable;
    CHECK_FALSE(skinny_gemm_supported(portable));  // the portable kernel keeps its limit of 16
  }
}

TEST_CASE("skinny_gemm matches float64 on random data: M in {1, 7, 20, 64, 127, 128}, N and K off the tiles") {
  if (!kernel_available()) {
    MESSAGE("skipped: no GPU that runs the skinny GEMM (compute capability 8.0+ with this build's image)");
    return;
  }
  manual_seed(1501);
  for (int64_t m : {1, 7, 20, 64, 127, 128})  // x tiles of 16, 16, 32, 64, 128, 128 rows
    for (const auto& [n, k] : std::vector<std::array<int64_t, 2>>{
             {4096, 1024}, {1024, 4096}, {1000, 120}, {4104, 8}, {8, 4104}, {120, 1000}})
      check_shape(m, n, k);
}

TEST_CASE("skinny_gemm: every split and warps-per-k-block override, wide leading dimensions, M past the policy") {
  if (!kernel_available()) {
    MESSAGE("skipped: no GPU that runs the skinny GEMM");
    return;
  }
  manual_seed(1502);
  for (int split = 1; split <= 8; ++split)
    for (int wk : {2, 4}) check_shape(33, 1000, 1024, {.split_k = split, .warps_k = wk});
  for (int wk : {2, 4})
    for (int64_t m : {5, 20, 64, 100}) check_shape(m, 1024, 4104, {.warps_k = wk});
  check_shape(64, 1024, 4104, {.split_k = 5});
  check_shape(127, 1000, 1000, {.pad_o = 3, .warps_k = 2});
  check_shape(7, 4104, 1024, {.pad_o = 5});
  check_shape(64, 4096, 1024, {.pad_o = 4, .split_k = 3});
  check_shape(200, 1024, 1024);  // two row tiles of 128: the direct call takes it past the policy
  check_shape(1, 8, 8);
}

TEST_CASE("skinny_gemm: the epilogue's groups per thread at once change no bit, on every kernel") {
  if (!kernel_available()) {
    MESSAGE("skipped: no GPU that runs the skinny GEMM");
    return;
  }
  manual_seed(1508);
  // Batches 1-3 against the float64 reference (the default, 4 at splits 1-2 and 2 at 3-4, is
  // checked everywhere else; a larger request is held to it) ...
  for (int batch = 1; batch <= 3; ++batch) {
    check_shape(129, 1000, 1032, {.split_k = 1, .epilogue_batch = batch});  // 8+ groups a thread, a tail
    check_shape(64, 4096, 1024, {.pad_o = 4, .split_k = 3, .epilogue_batch = batch});
  }
  // ... and bit for bit against each other: every batch sums the ranks in one order (splits
  // with more than one batch size: 1 and 2 take up to 4, 3 up to 2).
  for (SkinnyKernel kernel : available_kernels())
    for (int split : {1, 2, 3}) {
      CAPTURE(static_cast<int>(kernel));
      CAPTURE(split);
      const Operands o = make_operands(100, 1000, 1032, kBFloat16);
      Tensor first_out, first_pre;
      for (int batch = 1; batch <= 4; ++batch) {
        CAPTURE(batch);
        const Tensor out = full({100, 1000}, kNaN, TensorOptions(kBFloat16).device(kGpu));
        const Tensor pre = full({100, 1000}, kNaN, TensorOptions(kBFloat16).device(kGpu));
        SkinnyGemmArgs a = skinny_dense_args(SkinnyType::BFloat16, SkinnyEpilogue::GeluExact, 100, 1000, 1032,
                                             o.gx.data_ptr(), o.gw.data_ptr(), o.gb.data_ptr(), out.data_ptr());
        a.pre = pre.data_ptr(), a.ldp = 1000;
        a.kernel = kernel;
        a.split_k = split;
        a.epilogue_batch = batch;
        skinny_gemm(a, current_stream());
        if (batch == 1) {
          first_out = out, first_pre = pre;
        } else {
          CHECK(same_bits(out, first_out));
          CHECK(same_bits(pre, first_pre));
        }
      }
    }
}

TEST_CASE("skinny_gemm: linear and fused_linear_gelu route to it; fused == gelu(linear) bit for bit") {
  if (!kernel_available()) {
    MESSAGE("skipped: no GPU that runs the skinny GEMM");
    return;
  }
  manual_seed(1503);
  for (DType dt : {kBFloat16, kFloat16})
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
             {policy_m(), 4096, 1024}, {policy_m(), 1024, 4096}, {7, 1000, 120}, {skinny_gemm_max_m(), 120, 4104}}) {
      CAPTURE(dt);
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      const Operands o = make_operands(m, n, k, dt);
      SkinnyGemmArgs a;
      a.type = dt == kBFloat16 ? SkinnyType::BFloat16 : SkinnyType::Float16;
      a.m = m, a.n = n, a.k = k;
      a.x = o.gx.data_ptr(), a.ldx = k;
      a.w = o.gw.data_ptr(), a.ldw = k;
      a.bias = o.gb.data_ptr();
      a.ldo = n;
      const Tensor direct = full({m, n}, kNaN, TensorOptions(dt).device(kGpu));
      a.out = direct.data_ptr();
      REQUIRE(skinny_gemm_supported(a));
      skinny_gemm(a, current_stream());
      const Tensor lin = linear(o.gx, o.gw, o.gb);
      CHECK(same_bits(lin, direct));
      for (const char* mode : {"none", "tanh"}) {
        CAPTURE(mode);
        const Tensor fused = fused_linear_gelu(o.gx, o.gw, o.gb, mode);
        CHECK(same_bits(fused, gelu(lin, mode)));
        const Tensor direct_gelu = full({m, n}, kNaN, TensorOptions(dt).device(kGpu));
        a.epilogue = std::strcmp(mode, "tanh") == 0 ? SkinnyEpilogue::GeluTanh : SkinnyEpilogue::GeluExact;
        a.out = direct_gelu.data_ptr();
        skinny_gemm(a, current_stream());
        CHECK(same_bits(fused, direct_gelu));
        a.epilogue = SkinnyEpilogue::Bias;
        // The pre-activation the op saves for backward is the linear's result.
        const Tensor wg = o.gw.detach().clone().requires_grad_();
        const Tensor fused_grad = fused_linear_gelu(o.gx, wg, o.gb, mode);
        CHECK(same_bits(fused_grad.detach(), fused));
      }
    }
}

TEST_CASE("skinny_gemm: linear on the skinny path agrees with cuBLASLt; NaN and Inf land where it puts them") {
  if (!kernel_available()) {
    MESSAGE("skipped: no GPU that runs the skinny GEMM");
    return;
  }
  manual_seed(1504);
  for (DType dt : {kBFloat16, kFloat16})
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
             {policy_m(), 4096, 1024}, {policy_m(), 1024, 4096}, {1, 1024, 1024}}) {
      CAPTURE(dt);
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      const Operands o = make_operands(m, n, k, dt);
      const Tensor xl = unaligned_rows(o.gx);  // cuBLASLt's path (the skinny kernel declines ldx = k + 4)
      SkinnyGemmArgs a = dummy_args(m, n, k);
      a.x = xl.data_ptr(), a.ldx = xl.strides()[0];
      CHECK_FALSE(skinny_gemm_supported(a));
      const Tensor skinny = linear(o.gx, o.gw, o.gb), lt = linear(xl, o.gw, o.gb);
      CHECK(relative_norm_error(values(skinny.cpu()), values(lt.cpu())) <= norm_tolerance(dt));
      CHECK(relative_norm_error(values(skinny.cpu()), o.h) <= norm_tolerance(dt));
      CHECK(relative_norm_error(values(lt.cpu()), o.h) <= norm_tolerance(dt));
    }
  // Specials: rows of x holding +Inf, -Inf, NaN; output column 0 of the Inf rows is +-Inf.
  for (DType dt : {kBFloat16, kFloat16})
    for (const char* mode : {"none", "tanh"}) {
      CAPTURE(dt);
      CAPTURE(mode);
      const int64_t m = 6, n = 24, k = 64;
      std::vector<double> vx = values(random({m, k}, kFloat64, -1, 1));
      std::vector<double> vw = values(random({n, k}, kFloat64, -1, 1));
      vx[0 * k + 1] = kInf;
      vx[1 * k + 2] = -kInf;
      vx[2 * k + 0] = kNaN;
      vw[0 * k + 1] = 0.5;
      vw[0 * k + 2] = -0.5;
      const Tensor x = from_vector(vx, {m, k}).to(dt).to(kGpu);
      const Tensor w = from_vector(vw, {n, k}).to(dt).to(kGpu);
      const Tensor b = random({n}, dt, -0.5, 0.5).to(kGpu);
      const std::vector<double> f = values(fused_linear_gelu(x, w, b, mode).cpu());
      const std::vector<double> u = values(gelu(linear(unaligned_rows(x), w, b), mode).cpu());  // cuBLASLt + gelu
      int specials = 0;
      for (size_t i = 0; i < f.size(); ++i) {
        CAPTURE(i);
        CHECK(std::isnan(f[i]) == std::isnan(u[i]));
        CHECK(std::isinf(f[i]) == std::isinf(u[i]));
        if (std::isinf(f[i])) CHECK(f[i] == u[i]);
        specials += std::isfinite(f[i]) ? 0 : 1;
      }
      CHECK(specials >= 3 * static_cast<int>(n));  // rows 0, 1 and 2 are all special
    }
}

TEST_CASE("skinny_gemm: the fallbacks compute the same results through cuBLASLt") {
  if (!kernel_available()) {
    MESSAGE("skipped: no GPU that runs the skinny GEMM");
    return;
  }
  manual_seed(1505);
  struct Case {
    const char* name;
    Tensor x, w;
  };
  const DType bf = kBFloat16;
  const int64_t over = skinny_gemm_max_m() + 1;
  const std::vector<Case> cases = {
      {"k not a multiple of 8", random({16, 100}, bf, -1, 1), random({256, 100}, bf, -0.2, 0.2)},
      {"m above the policy", random({over, 64}, bf, -1, 1), random({256, 64}, bf, -0.2, 0.2)},
      {"float32", random({16, 64}, kFloat32, -1, 1), random({256, 64}, kFloat32, -0.2, 0.2)},
      {"transposed weight", random({16, 64}, bf, -1, 1), random({64, 256}, bf, -0.2, 0.2).t()},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const Tensor b = random({c.w.sizes()[0]}, c.x.dtype(), -0.5, 0.5);
    const std::vector<double> h = reference_h(c.x, c.w.contiguous(), b);
    const Tensor gx = c.x.to(kGpu), gw = c.w.to(kGpu), gb = b.to(kGpu);
    CHECK(relative_norm_error(values(linear(gx, gw, gb).cpu()), h) <= norm_tolerance(c.x.dtype()));
    std::vector<double> g = h;
    for (double& v : g) v = gelu_reference(v, false);
    CHECK(relative_norm_error(values(fused_linear_gelu(gx, gw, gb, "none").cpu()), g) <= norm_tolerance(c.x.dtype()));
  }
  // An x whose rows are not 16-byte aligned: supported() says no, the ops still compute it.
  const Operands o = make_operands(8, 256, 64, bf);
  const Tensor xl = unaligned_rows(o.gx);
  CHECK(relative_norm_error(values(linear(xl, o.gw, o.gb).cpu()), o.h) <= norm_tolerance(bf));
}

TEST_CASE("skinny_gemm: captured into a CUDA graph, a replay recomputes it") {
  if (!kernel_available()) {
    MESSAGE("skipped: no GPU that runs the skinny GEMM");
    return;
  }
  manual_seed(1506);
  const Operands o = make_operands(64, 1024, 4096, kBFloat16);
  Tensor out = full({64, 1024}, kNaN, TensorOptions(kBFloat16).device(kGpu));
  const Tensor pre = full({64, 1024}, kNaN, TensorOptions(kBFloat16).device(kGpu));
  SkinnyGemmArgs a;
  a.epilogue = SkinnyEpilogue::GeluExact;
  a.m = 64, a.n = 1024, a.k = 4096;
  a.x = o.gx.data_ptr(), a.ldx = 4096;
  a.w = o.gw.data_ptr(), a.ldw = 4096;
  a.bias = o.gb.data_ptr();
  a.out = out.data_ptr(), a.ldo = 1024;
  a.pre = pre.data_ptr(), a.ldp = 1024;
  REQUIRE(skinny_gemm_accepts(a));
  REQUIRE(kernel_available());  // per-device facts settled before the capture
  cuda::synchronize();
  OwnedStream stream;
  cudaGraph_t graph = nullptr;
  CUDA_REQUIRE(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  skinny_gemm(a, stream.get());
  CUDA_REQUIRE(cudaStreamEndCapture(stream.get(), &graph));
  size_t nodes = 0;
  CUDA_REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes));
  CHECK(nodes == 1);  // one kernel: the split-K reduction needs no second node
  cudaGraphExec_t exec = nullptr;
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_REQUIRE(cudaGraphLaunch(exec, stream.get()));
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  std::vector<double> want = o.h;
  CHECK(relative_norm_error(values(pre.cpu()), want) <= 1e-2);
  for (double& v : want) v = gelu_reference(v, false);
  CHECK(relative_norm_error(values(out.cpu()), want) <= 1e-2);
  const Tensor first = out.clone();
  out.fill_(kNaN);
  cuda::synchronize();
  CUDA_REQUIRE(cudaGraphLaunch(exec, stream.get()));
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(same_bits(out, first));  // deterministic: the cluster sums its partials in rank order
  CUDA_REQUIRE(cudaGraphExecDestroy(exec));
  CUDA_REQUIRE(cudaGraphDestroy(graph));
}

#endif  // KILN_WITH_CUDA
