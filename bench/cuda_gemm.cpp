// GEMM throughput of Kiln's linear (x [M, K] @ weight[N, K]^T + bias [N], through cuBLASLt)
// at the shapes in float32 (true fp32), TF32 (set_allow_tf32(true)) and bfloat16.
// TFLOP/s = 2*M*N*K / GPU time per call (CUDA events around queued calls, median of
// repeats; bench/cuda_bench_util.h). bench/torch_cuda_ops.py times PyTorch's nn.Linear on
// the same shapes the same way.
//
//   cuda_gemm
#include <kiln/kiln.h>

#include <cuda_runtime_api.h>

#include "bench/cuda_bench_util.h"

using namespace kiln;

int main() {
  if (!cuda::is_available()) {
    fmt::print("cuda_gemm: no GPU visible\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(cuda::current_stream(gpu).id());
  fmt::print("cuda_gemm: linear(x [M, K], weight [N, K], bias [N]) on {}\n", cuda::device_properties(gpu).name);
  fmt::print("{:<8} {:>20} {:>10} {:>10}\n", "mode", "M x K x N", "ms", "TFLOP/s");
  for (const char* mode : {"float32", "tf32", "bfloat16"}) {
    const DType dt = std::string_view(mode) == "bfloat16" ? kBFloat16 : kFloat32;
    set_allow_tf32(std::string_view(mode) == "tf32");
    for (const bench::GemmShape& sh : bench::kGemmShapes) {
      manual_seed(0);
      const TensorOptions o = TensorOptions(dt).device(gpu);
      const Tensor x = randn({sh.m, sh.k}, o), w = randn({sh.n, sh.k}, o) * 0.03, b = randn({sh.n}, o);
      Tensor y;
      const double flops = sh.flops();
      const int iters = bench::gemm_iters(flops, mode);
      const double ms = bench::median_gpu_ms([&] { y = linear(x, w, b); }, s, iters);
      const double tflops = flops / ms / 1e9;
      fmt::print("{:<8} {:>20} {:>10.4f} {:>10.1f}\n", mode, fmt::format("{}x{}x{}", sh.m, sh.k, sh.n), ms, tflops);
      fmt::print("RESULT kiln_gemm_{}_{}x{}x{}_tflops {:.2f}\n", mode, sh.m, sh.k, sh.n, tflops);
    }
  }
  set_allow_tf32(false);
  return 0;
}
