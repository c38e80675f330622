// fused_linear_gelu against what it replaces, on the GPU: plain linear (the GEMM alone, the
// floor), linear then gelu (eager, two ops: the GEMM's output written, read back and written
// again), and fused_linear_gelu, at (M, K, N) = (64, 1024, 4096), (4096, 1024, 4096),
// (8192, 4096, 16384), in float32 (true fp32), TF32 and bfloat16, exact and tanh GELU.
//
// Timing: CUDA events around one pass over the weight sets, queued behind a spin kernel so the
// host's launch cost is hidden (bench/cuda_bench_util.h), after a warm-up pass; the median of
// 51 passes, per call. Weights rotate through at least 4 sets, and enough of them to fill
// twice the L2 cache, so no call finds its weight still in L2 from the one before; the input
// and bias stay the same (an activation is fresh in L2 in a real network). TFLOP/s counts the
// GEMM's 2*M*N*K for all three (the bias and GELU add M*N, noise at these shapes).
//
//   fused_linear_gelu          a table
//   fused_linear_gelu --csv    one CSV row per case
#include <kiln/kiln.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "bench/cuda_bench_util.h"

using namespace kiln;

namespace {

constexpr int kRepeats = 51;

struct Case {
  const char* precision;  // float32, tf32, bfloat16
  const char* gelu;       // none, tanh, or "-" for plain linear
  const char* op;         // linear, linear+gelu, fused
};

}  // namespace

int main(int argc, char** argv) {
  const bool csv = argc > 1 && std::strcmp(argv[1], "--csv") == 0;
  if (!cuda::is_available()) {
    fmt::print("fused_linear_gelu: no GPU visible, nothing to measure\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  const cuda::DeviceProperties props = cuda::device_properties(gpu);
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(cuda::current_stream(gpu).id());
  if (csv) {
    fmt::print("precision,gelu,op,m,k,n,weight_sets,us,tflops\n");
  } else {
    fmt::print("fused_linear_gelu on {} (L2 {} MiB): median of {} passes over rotating weight sets\n", props.name,
               props.l2_cache_bytes >> 20, kRepeats);
    fmt::print("{:<9} {:<5} {:<12} {:>18} {:>5} {:>10} {:>9}\n", "precision", "gelu", "op", "M x K x N", "sets", "us",
               "TFLOP/s");
  }
  for (const char* precision : {"float32", "tf32", "bfloat16"}) {
    const DType dt = std::string_view(precision) == "bfloat16" ? kBFloat16 : kFloat32;
    set_allow_tf32(std::string_view(precision) == "tf32");
    for (const bench::GemmShape& sh : bench::kGemmShapes) {
      manual_seed(0);
      const TensorOptions o = TensorOptions(dt).device(gpu);
      const double weight_bytes = static_cast<double>(sh.n * sh.k) * static_cast<double>(element_size(dt));
      const double l2_bytes = static_cast<double>(props.l2_cache_bytes);
      const int sets = std::max(4, static_cast<int>(2.0 * l2_bytes / weight_bytes) + 1);
      const Tensor x = randn({sh.m, sh.k}, o), b = randn({sh.n}, o);
      std::vector<Tensor> weights;
      for (int i = 0; i < sets; ++i) weights.push_back(randn({sh.n, sh.k}, o) * 0.03);
      std::vector<Case> cases = {{precision, "-", "linear"}};
      for (const char* g : {"none", "tanh"}) {
        cases.push_back({precision, g, "linear+gelu"});
        cases.push_back({precision, g, "fused"});
      }
      for (const Case& c : cases) {
        const std::string_view op = c.op;
        int next = 0;
        Tensor y;
        const auto call = [&] {
          const Tensor& w = weights[static_cast<size_t>(next)];
          next = (next + 1) % sets;
          if (op == "linear") y = linear(x, w, b);
          else if (op == "linear+gelu") y = gelu(linear(x, w, b), c.gelu);
          else y = fused_linear_gelu(x, w, b, c.gelu);
        };
        // One pass over the sets per timed repeat (and one as warm-up).
        const auto pass = [&] {
          for (int i = 0; i < sets; ++i) call();
        };
        const double ms = bench::median_gpu_ms(pass, s, /*iters=*/1, kRepeats, /*warmup=*/1) / sets;
        const double us = ms * 1e3, tflops = sh.flops() / ms / 1e9;
        if (csv)
          fmt::print("{},{},{},{},{},{},{},{:.2f},{:.2f}\n", c.precision, c.gelu, c.op, sh.m, sh.k, sh.n, sets, us,
                     tflops);
        else
          fmt::print("{:<9} {:<5} {:<12} {:>18} {:>5} {:>10.2f} {:>9.1f}\n", c.precision, c.gelu, c.op,
                     fmt::format("{}x{}x{}", sh.m, sh.k, sh.n), sets, us, tflops);
      }
    }
  }
  set_allow_tf32(false);
  return 0;
}
