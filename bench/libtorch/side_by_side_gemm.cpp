// GEMM throughput, Kiln and LibTorch in one process: linear(x [M, K], weight [N, K], bias [N])
// at the three shapes in float32, TF32 and bfloat16. The two libraries take turns:
// each round times Kiln's calls, then LibTorch's, with CUDA events around queued calls on the
// shared default stream (a spin kernel first lets the host queue them); medians of 9 rounds.
// Separate processes see the GPU in different states (clocks, temperature), which moved this
// ratio by a few percent between runs; turns within one process cancel that out.
//
//   side_by_side_gemm
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cuda_bench_util.h"
#include "side_by_side.h"

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("side_by_side_gemm: no GPU visible\n");
    return 0;
  }
  const cudaStream_t stream = nullptr;
  constexpr int kRounds = 9;
  std::printf("side_by_side_gemm: linear(x [M, K], weight [N, K], bias [N]), Kiln and LibTorch %s in turns\n",
              side_by_side::torch_version());
  std::printf("%-8s %20s %12s %12s %8s\n", "mode", "M x K x N", "Kiln TFLOP/s", "Torch TFLOP/s", "ratio");
  for (const char* mode : {"float32", "tf32", "bfloat16"}) {
    for (const kiln::bench::GemmShape& sh : kiln::bench::kGemmShapes) {
      side_by_side::kiln_linear_setup(mode, sh.m, sh.k, sh.n);
      side_by_side::torch_linear_setup(mode, sh.m, sh.k, sh.n);
      const double flops = sh.flops();
      const int iters = kiln::bench::gemm_iters(flops, mode);
      std::vector<double> kiln_ms, torch_ms;
      for (int r = 0; r < kRounds; ++r) {
        kiln_ms.push_back(kiln::bench::median_gpu_ms([] { side_by_side::kiln_linear(); }, stream, iters, 1, 2));
        torch_ms.push_back(kiln::bench::median_gpu_ms([] { side_by_side::torch_linear(); }, stream, iters, 1, 2));
      }
      std::sort(kiln_ms.begin(), kiln_ms.end());
      std::sort(torch_ms.begin(), torch_ms.end());
      const double kt = flops / kiln_ms[kRounds / 2] / 1e9, tt = flops / torch_ms[kRounds / 2] / 1e9;
      std::printf("%-8s %20s %12.1f %12.1f %8.3f\n", mode,
                  (std::to_string(sh.m) + "x" + std::to_string(sh.k) + "x" + std::to_string(sh.n)).c_str(), kt, tt,
                  kt / tt);
      std::printf("RESULT side_by_side_gemm_%s_%lldx%lldx%lld_kiln_tflops %.2f\n", mode, static_cast<long long>(sh.m),
                  static_cast<long long>(sh.k), static_cast<long long>(sh.n), kt);
      std::printf("RESULT side_by_side_gemm_%s_%lldx%lldx%lld_torch_tflops %.2f\n", mode, static_cast<long long>(sh.m),
                  static_cast<long long>(sh.k), static_cast<long long>(sh.n), tt);
    }
  }
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("side_by_side_gemm: a launch failed\n");
    return 1;
  }
  return 0;
}
