// Kiln's skinny GEMM (ops/cuda/skinny_gemm.h) against cuBLASLt, which it replaces for 16-bit
// linears with few rows, in one process on one GPU, bfloat16:
//   - "lt":        cuBLASLt with its BIAS epilogue, the plan the linear op used before (the
//                  heuristic's first algorithm, through Kiln's plan cache);
//   - "lt+gelu":   that, then Kiln's gelu kernel on its output (the unfused exact GELU);
//   - "skinny":    the portable skinny kernel (mma.sync), bias epilogue;
//   - "skinny+g":  the portable skinny kernel with the exact-GELU epilogue;
//   - "wg", "wg+g": the same two on the sm_90a kernel (wgmma + TMA, programmatic dependent
//                  launch; what linear and fused_linear_gelu run where the device has it);
// at (M, K, N) = (64, 1024, 4096) and (64, 4096, 1024) with the split-K and warps-per-k-block
// overrides, the M sweep {1, 8, 16, 32, 64, 128, 256} over N, K in {1024, 4096} (where the size
// policy's threshold comes from), and the MLP block (1024 -> 4096 -> 1024, GELU) at M = 64 as
// back-to-back kernels each way (the sm_90a pair also without programmatic dependent launch
// and with each tile width), and as one CUDA graph of the two skinny kernels; beside them the
// one-launch block kernel (ops/cuda/skinny_block.h), back to back and as a one-node graph.
//
// Timing (bench/cuda_bench_util.h): CUDA events around one pass over the weight sets, queued
// behind a spin kernel so host launch cost is hidden; after a warm-up pass, the median of
// kRepeats passes, per call. Weights rotate through at least 4 sets and enough to fill twice
// the L2 cache, so no call finds its weight in L2; x and the bias stay (an activation is fresh
// in L2 in a real network). GB/s counts the weight's bytes once (the floor's traffic).
//
//   skinny_gemm          a table
//   skinny_gemm --csv    one CSV row per case
//   skinny_gemm --mlp-only   the MLP block's rows alone
//   skinny_gemm --trace      where the sm_90a kernel's time goes: per-CTA %globaltimer stamps
//                            (SkinnyGemmArgs::trace) of single launches and of the block's pair
#include <kiln/kiln.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/cuda_bench_util.h"
#include "ops/cuda/blas_layout.h"
#include "ops/cuda/cublaslt.h"
#include "ops/cuda/skinny_block.h"
#include "ops/cuda/skinny_gemm.h"
#include "ops/cuda/skinny_wgmma.h"
#include "ops/kernels.h"

using namespace kiln;
using namespace kiln::cuda_kernels;

namespace {

constexpr int kRepeats = 21;

/// One linear problem's buffers: weight sets, x, bias, h and out.
struct Problem {
  int64_t m, k, n;
  std::vector<Tensor> weights;
  Tensor x, bias, h, out;
  int next = 0;

  Problem(int64_t m_, int64_t k_, int64_t n_, int64_t l2_bytes) : m(m_), k(k_), n(n_) {
    const TensorOptions o = TensorOptions(kBFloat16).device(Device::cuda(0));
    const double weight_bytes = static_cast<double>(n * k * 2);
    const int sets = std::max(4, static_cast<int>(2.0 * static_cast<double>(l2_bytes) / weight_bytes) + 1);
    for (int i = 0; i < sets; ++i) weights.push_back(randn({n, k}, o) * 0.03);
    x = randn({m, k}, o);
    bias = randn({n}, o) * 0.1;
    h = empty({m, n}, o);
    out = empty({m, n}, o);
  }
  const Tensor& weight() {
    const Tensor& w = weights[static_cast<size_t>(next)];
    next = (next + 1) % static_cast<int>(weights.size());
    return w;
  }
};

/// cuBLASLt's D = w x^T + bias (column-major), i.e. h = x w^T + bias, as matmul_cuda.cu asks.
void lt_linear(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, cudaStream_t s) {
  const int64_t m = x.sizes()[0], k = x.sizes()[1], n = w.sizes()[0];
  const BlasView va = blas_view({m, k, k, 1}), vb = blas_view({k, n, 1, k});
  LtGemmDesc d;
  d.device = 0;
  d.dtype = lt_type(kBFloat16, "bench");
  d.compute = lt_compute(kBFloat16);
  d.epilogue = CUBLASLT_EPILOGUE_BIAS;
  d.m = n, d.n = m, d.k = k;
  d.trans_a = vb.trans, d.lda = vb.ld;
  d.trans_b = va.trans, d.ldb = va.ld;
  d.ldc = n;
  d.align_a = alignment_of(reinterpret_cast<uintptr_t>(w.data_ptr()));
  d.align_b = alignment_of(reinterpret_cast<uintptr_t>(x.data_ptr()));
  d.align_c = alignment_of(reinterpret_cast<uintptr_t>(out.data_ptr()));
  d.align_bias = alignment_of(reinterpret_cast<uintptr_t>(bias.data_ptr()));
  const float one = 1.0f, zero = 0.0f;
  LtGemmArgs a;
  a.a = w.data_ptr();
  a.b = x.data_ptr();
  a.c = out.data_ptr();
  a.bias = bias.data_ptr();
  a.alpha = &one;
  a.beta = &zero;
  KILN_CHECK(lt_matmul(d, a, s), "skinny_gemm bench: cuBLASLt has no algorithm for {} x {} x {}", m, k, n);
}

void skinny_linear(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, SkinnyEpilogue e,
                   cudaStream_t s, int split_k = 0, int warps_k = 0, SkinnyKernel kernel = SkinnyKernel::Portable,
                   bool programmatic = true, int block_n = 0, int stages = 0, bool prefetch_l2 = true,
                   int epilogue_batch = 0) {
  SkinnyGemmArgs a = skinny_dense_args(SkinnyType::BFloat16, e, x.sizes()[0], w.sizes()[0], x.sizes()[1],
                                       x.data_ptr(), w.data_ptr(), bias.data_ptr(), out.data_ptr());
  a.split_k = split_k;
  a.warps_k = warps_k;
  a.kernel = kernel;
  a.programmatic = programmatic;
  a.block_n = block_n;
  a.stages = stages;
  a.prefetch_l2 = prefetch_l2;
  a.epilogue_batch = epilogue_batch;
  skinny_gemm(a, s);
}

/// The one-launch block's arguments (ops/cuda/skinny_block.h): y = gelu(x w1^T + b1) w2^T + b2,
/// h its hidden activation, bfloat16, with `workspace` (zeroed once).
SkinnyBlockArgs block_args(const Tensor& y, const Tensor& h, const Tensor& x, const Tensor& w1, const Tensor& b1,
                           const Tensor& w2, const Tensor& b2, const Tensor& workspace, bool programmatic = true) {
  SkinnyBlockArgs a = skinny_block_dense_args(SkinnyType::BFloat16, x.sizes()[0], x.sizes()[1], w1.sizes()[0],
                                              w2.sizes()[0], x.data_ptr(), w1.data_ptr(), b1.data_ptr(), w2.data_ptr(),
                                              b2.data_ptr(), h.data_ptr(), y.data_ptr(), workspace.data_ptr(),
                                              static_cast<size_t>(workspace.numel()) * 4);
  a.programmatic = programmatic;
  return a;
}

/// A zeroed workspace for the block at these sizes.
Tensor block_workspace(int64_t m, int64_t k, int64_t hidden, int64_t n) {
  const size_t bytes = skinny_block_workspace_bytes(m, k, hidden, n);
  return zeros({static_cast<int64_t>(bytes / 4) + 1}, TensorOptions(kFloat32).device(Device::cuda(0)));
}

/// Median microseconds per call of `call` (one weight set per call).
double time_us(Problem& p, const std::function<void(const Tensor& w)>& call, cudaStream_t s) {
  const int sets = static_cast<int>(p.weights.size());
  auto pass = [&] {
    for (int i = 0; i < sets; ++i) call(p.weight());
  };
  return bench::median_gpu_ms(pass, s, /*iters=*/1, kRepeats, /*warmup=*/1) / sets * 1e3;
}

/// Per-CTA stamps of one traced launch (SkinnyGemmArgs::trace with 8 points per CTA,
/// SkinnyBlockArgs::trace with 9), read back from the device.
template <int Points>
struct TraceOf {
  static constexpr int kPoints = Points;
  static constexpr int64_t kMaxCtas = 4096;
  using Stamps = std::array<uint64_t, kPoints>;
  Tensor device = zeros({kMaxCtas * kPoints}, TensorOptions(kInt64).device(Device::cuda(0)));
  std::vector<Stamps> ctas;     ///< the CTAs that ran (entry stamp set)
  std::vector<int64_t> index;   ///< each one's CTA index
  unsigned long long* ptr() { return reinterpret_cast<unsigned long long*>(device.data_ptr()); }
  void read() {
    const Tensor host = device.cpu();
    const auto* v = static_cast<const uint64_t*>(host.data_ptr());
    ctas.clear();
    index.clear();
    for (int64_t c = 0; c < kMaxCtas; ++c) {
      if (v[c * kPoints] == 0) continue;
      Stamps st;
      std::copy(v + c * kPoints, v + (c + 1) * kPoints, st.begin());
      ctas.push_back(st);
      index.push_back(c);
    }
    device.zero_();
  }
  /// The CTAs with index in [lo, hi).
  TraceOf subset(int64_t lo, int64_t hi) const {
    TraceOf t;
    for (size_t i = 0; i < ctas.size(); ++i)
      if (index[i] >= lo && index[i] < hi) t.ctas.push_back(ctas[i]), t.index.push_back(index[i]);
    return t;
  }
  uint64_t first_entry() const {
    uint64_t t = ~uint64_t{0};
    for (const auto& c : ctas) t = std::min(t, c[0]);
    return t;
  }
  uint64_t last_exit() const {
    uint64_t t = 0;
    for (const auto& c : ctas) t = std::max(t, c[kPoints - 1]);
    return t;
  }
};
using Trace = TraceOf<8>;
using BlockTrace = TraceOf<kSkinnyBlockTracePoints>;

const std::array<const char*, 8> kGemmStamps = {"entry",     "waited",       "1st stage",   "mainloop",
                                                "exchanged", "1st group in", "last stored", "exit"};
const std::array<const char*, kSkinnyBlockTracePoints> kBlockStamps = {
    "entry", "waited", "1st input ready", "1st stage", "last input ready", "mainloop", "exchanged", "last stored",
    "exit"};

/// One traced kernel's phases in us after `base`: each stamp's min / median / max over the CTAs,
/// then each phase's median length per CTA.
template <int Points>
void print_trace(const std::string& name, const TraceOf<Points>& t, uint64_t base, const char* const* stamp_names) {
  fmt::print("    {} ({} CTAs): span {:.2f} us (first entry -> last exit)\n", name, t.ctas.size(),
             (t.last_exit() - t.first_entry()) * 1e-3);
  if (t.ctas.empty()) return;
  std::vector<double> v(t.ctas.size());
  auto stats = [&](auto value) {
    for (size_t c = 0; c < t.ctas.size(); ++c) v[c] = value(t.ctas[c]);
    std::sort(v.begin(), v.end());
    return std::array<double, 3>{v.front(), v[v.size() / 2], v.back()};
  };
  std::string line = "      at (min/med/max us):";
  for (int j = 0; j < Points; ++j) {
    const auto a = stats([&](const auto& c) { return (static_cast<double>(c[j]) - base) * 1e-3; });
    line += fmt::format(" {} {:.2f}/{:.2f}/{:.2f};", stamp_names[j], a[0], a[1], a[2]);
  }
  fmt::print("{}\n", line);
  line = "      phase lengths (med/max us):";
  for (int j = 1; j < Points; ++j) {
    const auto a = stats([&](const auto& c) { return (static_cast<double>(c[j]) - c[j - 1]) * 1e-3; });
    line += fmt::format(" {}->{} {:.2f}/{:.2f};", stamp_names[j - 1], stamp_names[j], a[1], a[2]);
  }
  fmt::print("{}\n", line);
}

/// --trace: the sm_90a kernel's phases, single launches (weights from DRAM or L2) and the MLP
/// block's pair back to back; of 9 runs each, the one with the median span is printed.
void run_trace(int64_t l2, cudaStream_t s) {
  Problem up(64, 1024, 4096, l2), down(64, 4096, 1024, l2);
  Trace ta, tb;
  struct Case {
    std::string name;
    bool pair, warm;
    int split, stages, batch, bn = 0;  // 0: the defaults
  };
  const std::vector<Case> cases = {
      {"up (64,1024,4096) gelu, weights in DRAM", false, false, 0, 0, 0},
      {"up, weights in DRAM, epilogue one group at a time", false, false, 0, 0, 1},
      {"up, weights in L2", false, true, 0, 0, 0},
      {"up, split 1", false, false, 1, 0, 0},
      {"up, split 1, epilogue one group at a time", false, false, 1, 0, 1},
      {"up, split 4", false, false, 4, 0, 0},
      {"up, 8-stage ring", false, false, 0, 8, 0},
      {"up, 128 rows of w per CTA", false, false, 0, 0, 0, 128},
      {"block pair: up gelu then down (64,4096,1024), back to back", true, false, 0, 0, 0},
      {"block pair, epilogues one group at a time", true, false, 0, 0, 1}};
  for (const Case& c : cases) {
    struct Run {
      double span;
      Trace a, b;
    };
    std::vector<Run> runs;
    for (int r = 0; r < 9; ++r) {
      const Tensor& w1 = up.weight();
      const Tensor& w2 = down.weight();
      auto launch_up = [&](unsigned long long* trace) {
        SkinnyGemmArgs a = skinny_dense_args(SkinnyType::BFloat16, SkinnyEpilogue::GeluExact, 64, 4096, 1024,
                                             up.x.data_ptr(), w1.data_ptr(), up.bias.data_ptr(), up.out.data_ptr());
        a.kernel = SkinnyKernel::Wgmma;
        a.split_k = c.split;
        a.stages = c.stages;
        a.epilogue_batch = c.batch;
        a.block_n = c.bn;
        a.trace = trace;
        skinny_gemm(a, s);
      };
      if (c.warm) launch_up(nullptr);
      cuda::synchronize();
      launch_up(ta.ptr());
      if (c.pair) {
        SkinnyGemmArgs a = skinny_dense_args(SkinnyType::BFloat16, SkinnyEpilogue::Bias, 64, 1024, 4096,
                                             up.out.data_ptr(), w2.data_ptr(), down.bias.data_ptr(), down.out.data_ptr());
        a.kernel = SkinnyKernel::Wgmma;
        a.epilogue_batch = c.batch;
        a.trace = tb.ptr();
        skinny_gemm(a, s);
      }
      cuda::synchronize();
      ta.read();
      if (c.pair) tb.read();
      const double span = ((c.pair ? tb.last_exit() : ta.last_exit()) - ta.first_entry()) * 1e-3;
      runs.push_back({span, ta, tb});
    }
    std::sort(runs.begin(), runs.end(), [](const Run& x, const Run& y) { return x.span < y.span; });
    const Run& med = runs[runs.size() / 2];
    fmt::print("  {}: median span {:.2f} us (of {:.2f}-{:.2f})\n", c.name, med.span, runs.front().span,
               runs.back().span);
    const uint64_t base = med.a.first_entry();
    print_trace("up", med.a, base, kGemmStamps.data());
    if (c.pair) print_trace("down", med.b, base, kGemmStamps.data());
  }

  // The one-launch block kernel (ops/cuda/skinny_block.h): its up- and down-projection CTAs.
  const Tensor ws = block_workspace(64, 1024, 4096, 1024);
  if (!skinny_block_accepts(
          block_args(down.out, up.out, up.x, up.weights[0], up.bias, down.weights[0], down.bias, ws))) {
    fmt::print("  block kernel: not accepted on this device\n");
    return;
  }
  const int64_t ups = skinny_block_up_ctas(64, 1024, 4096, 1024);
  BlockTrace tk;
  struct BlockCase {
    bool warm;
    int64_t w2_after;
  };
  for (const BlockCase& bc : std::vector<BlockCase>{{false, -1}, {true, -1}, {false, 0}, {false, ups}}) {
    const bool warm = bc.warm;
    struct Run {
      double span;
      BlockTrace t;
    };
    std::vector<Run> runs;
    for (int r = 0; r < 9; ++r) {
      SkinnyBlockArgs a = block_args(down.out, up.out, up.x, up.weight(), up.bias, down.weight(), down.bias, ws);
      a.w2_after_up_ctas = static_cast<int>(bc.w2_after);
      if (warm) skinny_mlp_block(a, s);
      cuda::synchronize();
      a.trace = tk.ptr();
      skinny_mlp_block(a, s);
      cuda::synchronize();
      tk.read();
      runs.push_back({(tk.last_exit() - tk.first_entry()) * 1e-3, tk});
    }
    std::sort(runs.begin(), runs.end(), [](const Run& x, const Run& y) { return x.span < y.span; });
    const Run& med = runs[runs.size() / 2];
    fmt::print("  block kernel, weights in {}, w2 loaded after {} up-projection CTAs have w1: median span {:.2f} us "
               "(of {:.2f}-{:.2f})\n",
               warm ? "L2" : "DRAM", bc.w2_after < 0 ? ups / 2 : bc.w2_after, med.span, runs.front().span,
               runs.back().span);
    const uint64_t base = med.t.first_entry();
    print_trace("up-projection CTAs", med.t.subset(0, ups), base, kBlockStamps.data());
    print_trace("down-projection CTAs", med.t.subset(ups, BlockTrace::kMaxCtas), base, kBlockStamps.data());
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool csv = false, mlp_only = false, trace = false;
  for (int i = 1; i < argc; ++i) {
    csv = csv || std::strcmp(argv[i], "--csv") == 0;
    mlp_only = mlp_only || std::strcmp(argv[i], "--mlp-only") == 0;
    trace = trace || std::strcmp(argv[i], "--trace") == 0;
  }
  if (!cuda::is_available()) {
    fmt::print("skinny_gemm: no GPU visible, nothing to measure\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  const cuda::DeviceProperties props = cuda::device_properties(gpu);
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(cuda::current_stream(gpu).id());
  const int64_t l2 = static_cast<int64_t>(props.l2_cache_bytes);
  const UnaryKernel gelu_kernel = dispatch::unary_kernels.get("gelu", gpu);
  const bool wg = skinny_wgmma_ready();
  constexpr SkinnyKernel kWg = SkinnyKernel::Wgmma;
  if (!wg) fmt::print("(no sm_90a skinny kernel on this device: the wg rows are left out)\n");
  if (trace) {
    if (!wg) return 0;
    fmt::print("skinny_gemm --trace on {}: the sm_90a kernel's per-CTA %globaltimer stamps, bfloat16\n", props.name);
    run_trace(l2, s);
    return 0;
  }
  if (csv) fmt::print("section,variant,m,k,n,us,weight_gbps\n");
  else
    fmt::print("skinny_gemm on {} (L2 {} MiB), bfloat16: median of {} passes over rotating weight sets, us per call\n",
               props.name, props.l2_cache_bytes >> 20, kRepeats);

  auto report = [&](const char* section, const std::string& variant, const Problem& p, double us) {
    const double gbps = static_cast<double>(p.n * p.k * 2) / (us * 1e3);
    if (csv) fmt::print("{},{},{},{},{},{:.2f},{:.0f}\n", section, variant, p.m, p.k, p.n, us, gbps);
    else
      fmt::print("  {:<10} {:<16} {:>4}x{:>4}x{:>4} {:>8.2f} us {:>6.0f} GB/s\n", section, variant, p.m, p.k, p.n, us,
                 gbps);
  };
  auto run_all = [&](const char* section, Problem& p, bool variants) {
    std::map<std::string, double> t;
    t["lt"] = time_us(p, [&](const Tensor& w) { lt_linear(p.h, p.x, w, p.bias, s); }, s);
    t["lt+gelu"] = time_us(p, [&](const Tensor& w) {
      lt_linear(p.h, p.x, w, p.bias, s);
      gelu_kernel(UnaryOp::Gelu, p.out, p.h);
    }, s);
    t["skinny"] = time_us(p, [&](const Tensor& w) {
      skinny_linear(p.out, p.x, w, p.bias, SkinnyEpilogue::Bias, s);
    }, s);
    t["skinny+g"] = time_us(p, [&](const Tensor& w) {
      skinny_linear(p.out, p.x, w, p.bias, SkinnyEpilogue::GeluExact, s);
    }, s);
    if (wg) {
      t["wg"] = time_us(p, [&](const Tensor& w) {
        skinny_linear(p.out, p.x, w, p.bias, SkinnyEpilogue::Bias, s, 0, 0, kWg);
      }, s);
      t["wg+g"] = time_us(p, [&](const Tensor& w) {
        skinny_linear(p.out, p.x, w, p.bias, SkinnyEpilogue::GeluExact, s, 0, 0, kWg);
      }, s);
    }
    for (const auto& [name, us] : t) report(section, name, p, us);
    if (!csv)
      fmt::print("  {:<10} ratios: skinny/lt {:.2f}, skinny+g/(lt+gelu) {:.2f}, wg/lt {:.2f}, wg+g/(lt+gelu) {:.2f}\n",
                 section, t["skinny"] / t["lt"], t["skinny+g"] / t["lt+gelu"], wg ? t["wg"] / t["lt"] : 0.0,
                 wg ? t["wg+g"] / t["lt+gelu"] : 0.0);
    if (!variants) return;
    if (wg) {
      const double us = time_us(p, [&](const Tensor& w) {
        skinny_linear(p.out, p.x, w, p.bias, SkinnyEpilogue::Bias, s, 0, 0, kWg, false);
      }, s);
      report(section, "wg no-pdl", p, us);
      for (int bn : {64, 128})
        for (int split : {0, 1, 2, 3, 4, 6, 8}) {
          const double t_bn = time_us(p, [&](const Tensor& w) {
            skinny_linear(p.out, p.x, w, p.bias, SkinnyEpilogue::Bias, s, split, 0, kWg, true, bn);
          }, s);
          report(section, fmt::format("wg bn{} s{}", bn, split), p, t_bn);
        }
    }
    for (int wk : {2, 4})
      for (int split : {1, 2, 4, 8}) {
        const double us = time_us(p, [&](const Tensor& w) {
          skinny_linear(p.out, p.x, w, p.bias, SkinnyEpilogue::Bias, s, split, wk);
        }, s);
        report(section, fmt::format("skinny wk{} s{}", wk, split), p, us);
      }
  };

  if (!mlp_only) {
    for (const auto& [k, n] : std::vector<std::pair<int64_t, int64_t>>{{1024, 4096}, {4096, 1024}}) {
      Problem p(64, k, n, l2);
      run_all("target", p, true);
    }
    const std::vector<std::pair<int64_t, int64_t>> sweep = {{1024, 4096}, {4096, 1024}, {1024, 1024}, {4096, 4096}};
    for (const auto& [k, n] : sweep)
      for (int64_t m : {1, 8, 16, 32, 64, 128, 256}) {
        Problem p(m, k, n, l2);
        run_all("sweep", p, false);
      }
  }

  // The MLP block at M = 64: 1024 -> 4096 (GELU) -> 1024, two kernels each way.
  {
    Problem up(64, 1024, 4096, l2), down(64, 4096, 1024, l2);
    const int sets = static_cast<int>(std::min(up.weights.size(), down.weights.size()));
    const Tensor ws = block_workspace(64, 1024, 4096, 1024);
    const bool blk =
        wg && skinny_block_accepts(block_args(down.out, up.out, up.x, up.weights[0], up.bias, down.weights[0], down.bias, ws));
    // 0: cuBLASLt + gelu + cuBLASLt; 1: the portable kernels; 2: the sm_90a kernels without
    // programmatic dependent launch; 3: with it (the default); 4, 5: with it, 64 / 128 rows of w
    // per CTA; 6: the 8-stage ring without the L2 prefetch (the kernel before 2026-12-02);
    // 7: the default ring without the prefetch; 9: the default with the epilogues taking one
    // group per thread at a time (before 2026-12-03); 8: the one-launch block kernel (w2 loaded
    // once half of the up-projection's CTAs have w1), 10 / 11: w2 after all of them / at once.
    const int64_t ups = skinny_block_up_ctas(64, 1024, 4096, 1024);
    auto block = [&](int how) {
      auto pass = [&] {
        for (int i = 0; i < sets; ++i) {
          const Tensor& w1 = up.weight();
          const Tensor& w2 = down.weight();
          if (how == 8 || how == 10 || how == 11) {
            SkinnyBlockArgs a = block_args(down.out, up.out, up.x, w1, up.bias, w2, down.bias, ws);
            a.w2_after_up_ctas = how == 10 ? static_cast<int>(ups) : how == 11 ? 0 : -1;
            skinny_mlp_block(a, s);
          } else if (how >= 2) {
            const int bn = how == 4 ? 64 : how == 5 ? 128 : 0;
            const int stages = how == 6 ? 8 : 0;
            const bool prefetch = how < 6 || how == 9;
            const int batch = how == 9 ? 1 : 0;
            skinny_linear(up.out, up.x, w1, up.bias, SkinnyEpilogue::GeluExact, s, 0, 0, kWg, how != 2, bn, stages,
                          prefetch, batch);
            skinny_linear(down.out, up.out, w2, down.bias, SkinnyEpilogue::Bias, s, 0, 0, kWg, how != 2, bn, stages,
                          prefetch, batch);
          } else if (how == 1) {
            skinny_linear(up.out, up.x, w1, up.bias, SkinnyEpilogue::GeluExact, s);
            skinny_linear(down.out, up.out, w2, down.bias, SkinnyEpilogue::Bias, s);
          } else {
            lt_linear(up.h, up.x, w1, up.bias, s);
            gelu_kernel(UnaryOp::Gelu, up.out, up.h);
            lt_linear(down.out, up.out, w2, down.bias, s);
          }
        }
      };
      return bench::median_gpu_ms(pass, s, 1, kRepeats, 1) / sets * 1e3;
    };
    const double lt = block(0), sk = block(1);
    const double wg2 = wg ? block(2) : 0.0, wg3 = wg ? block(3) : 0.0, wg4 = wg ? block(4) : 0.0,
                 wg5 = wg ? block(5) : 0.0, wg6 = wg ? block(6) : 0.0, wg7 = wg ? block(7) : 0.0,
                 one = blk ? block(8) : 0.0, wg9 = wg ? block(9) : 0.0, one_after = blk ? block(10) : 0.0,
                 one_at_once = blk ? block(11) : 0.0;
    if (csv) {
      fmt::print("mlp,lt+gelu+lt,64,1024,4096,{:.2f},0\nmlp,skinny+g+skinny,64,1024,4096,{:.2f},0\n", lt, sk);
      fmt::print("mlp,wg+g+wg no-pdl,64,1024,4096,{:.2f},0\nmlp,wg+g+wg,64,1024,4096,{:.2f},0\n", wg2, wg3);
      fmt::print("mlp,wg+g+wg bn64,64,1024,4096,{:.2f},0\nmlp,wg+g+wg bn128,64,1024,4096,{:.2f},0\n", wg4, wg5);
      fmt::print("mlp,wg+g+wg 8st no-prefetch,64,1024,4096,{:.2f},0\nmlp,wg+g+wg no-prefetch,64,1024,4096,{:.2f},0\n",
                 wg6, wg7);
      fmt::print("mlp,block kernel,64,1024,4096,{:.2f},0\n", one);
      fmt::print("mlp,wg+g+wg epilogue batch 1,64,1024,4096,{:.2f},0\n", wg9);
      fmt::print("mlp,block kernel w2 after w1,64,1024,4096,{:.2f},0\nmlp,block kernel w2 at once,64,1024,"
                 "4096,{:.2f},0\n",
                 one_after, one_at_once);
    } else {
      fmt::print("  mlp block M=64: cuBLASLt+gelu+cuBLASLt {:.2f} us, skinny(gelu)+skinny {:.2f} us, ratio {:.2f}\n",
                 lt, sk, sk / lt);
      fmt::print("  mlp block M=64: wg(gelu)+wg {:.2f} us (ratio {:.2f}), without programmatic launch {:.2f} us, "
                 "bn64 {:.2f} us, bn128 {:.2f} us\n",
                 wg3, wg3 / lt, wg2, wg4, wg5);
      fmt::print("  mlp block M=64: 8-stage ring without L2 prefetch (before) {:.2f} us, default ring without "
                 "prefetch {:.2f} us, default (ring + prefetch) {:.2f} us\n",
                 wg6, wg7, wg3);
      fmt::print("  mlp block M=64: epilogues one group per thread at a time (before) {:.2f} us, a batch at once "
                 "(default) {:.2f} us\n",
                 wg9, wg3);
      fmt::print("  mlp block M=64: one-launch block kernel {:.2f} us (ratio to the two sm_90a kernels {:.2f}){}\n", one,
                 one / wg3, blk ? "" : " (not run: the device does not take it)");
      fmt::print("  mlp block M=64: block kernel loading w2 after every up-projection CTA has w1 {:.2f} us, at "
                 "once {:.2f} us\n",
                 one_after, one_at_once);
    }
  }
  // The same block as one CUDA graph of the two skinny kernels, weights fixed (L2-warm, as in
  // examples/fused_mlp's graph replay), per warps-per-k-block choice: median of 200 replays,
  // each timed alone with events (launch included).
  {
    const TensorOptions o = TensorOptions(kBFloat16).device(gpu);
    const Tensor x = randn({64, 1024}, o), w1 = randn({4096, 1024}, o) * 0.03, b1 = randn({4096}, o) * 0.1;
    const Tensor w2 = randn({1024, 4096}, o) * 0.03, b2 = randn({1024}, o) * 0.1;
    const Tensor h = empty({64, 4096}, o), y = empty({64, 1024}, o);
    cudaStream_t gs = nullptr;
    KILN_CHECK(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking) == cudaSuccess, "skinny_gemm bench: stream");
    cuda::synchronize();
    // -2, -4: the portable kernels with 2 or 4 warps per k block; 0: the sm_90a kernels without
    // programmatic dependent launch; 1: with it (the default); 2, 3: with it, 64 / 128 rows of w
    // per CTA; 4: the 8-stage ring without the L2 prefetch (before); 5: the default ring without it;
    // 6, 7: the one-launch block kernel (ops/cuda/skinny_block.h), with and without programmatic launch.
    const Tensor ws = block_workspace(64, 1024, 4096, 1024);
    const bool blk = wg && skinny_block_accepts(block_args(y, h, x, w1, b1, w2, b2, ws));
    for (int how : {-2, -4, 0, 1, 2, 3, 4, 5, 6, 7}) {
      if ((how >= 0 && !wg) || (how >= 6 && !blk)) continue;
      auto block = [&] {
        if (how >= 6) {
          skinny_mlp_block(block_args(y, h, x, w1, b1, w2, b2, ws, how == 6), gs);
        } else if (how < 0) {
          skinny_linear(h, x, w1, b1, SkinnyEpilogue::GeluExact, gs, 0, -how);
          skinny_linear(y, h, w2, b2, SkinnyEpilogue::Bias, gs, 0, -how);
        } else {
          const int bn = how == 2 ? 64 : how == 3 ? 128 : 0;
          const int stages = how == 4 ? 8 : 0;
          const bool prefetch = how < 4;
          skinny_linear(h, x, w1, b1, SkinnyEpilogue::GeluExact, gs, 0, 0, kWg, how != 0, bn, stages, prefetch);
          skinny_linear(y, h, w2, b2, SkinnyEpilogue::Bias, gs, 0, 0, kWg, how != 0, bn, stages, prefetch);
        }
      };
      const std::string name = how < 0    ? fmt::format("skinny wk{}", -how)
                               : how == 0 ? std::string("wg no-pdl")
                               : how == 1 ? std::string("wg")
                               : how == 4 ? std::string("wg 8st no-prefetch")
                               : how == 5 ? std::string("wg no-prefetch")
                               : how == 6 ? std::string("block kernel")
                               : how == 7 ? std::string("block kernel no-pdl")
                                          : fmt::format("wg bn{}", how == 2 ? 64 : 128);
      block();
      KILN_CHECK(cudaStreamSynchronize(gs) == cudaSuccess, "skinny_gemm bench: warm-up");
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      KILN_CHECK(cudaStreamBeginCapture(gs, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
      block();
      KILN_CHECK(cudaStreamEndCapture(gs, &graph) == cudaSuccess, "capture end");
      KILN_CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
      const double median = bench::median_alone_us(
          [&] { KILN_CHECK(cudaGraphLaunch(exec, gs) == cudaSuccess, "skinny_gemm bench: replay"); }, gs);
      if (csv) fmt::print("mlp_graph,{},64,1024,4096,{:.2f},0\n", name, median);
      else fmt::print("  mlp block M=64 as one CUDA graph (weights L2-warm), {}: {:.2f} us\n", name, median);
      (void)cudaGraphExecDestroy(exec);
      (void)cudaGraphDestroy(graph);
    }
    (void)cudaStreamDestroy(gs);
  }
  return 0;
}
