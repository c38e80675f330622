// One AdamW step over the 4-layer MLP's parameters (1024-4096-1024-4096-10, float32, 12.6 M
// parameters in 8 tensors), Kiln and LibTorch in one process, taking turns as
// side_by_side_gemm does: Kiln's optim::AdamW (one multi-tensor launch), Kiln's update
// parameter by parameter (8 launches), LibTorch's fused kernel as torch.optim.AdamW(fused=True)
// runs it (_foreach_add_ on the step counts, then at::_fused_adamw_), and LibTorch's C++
// frontend torch::optim::AdamW. GPU time per step: CUDA events around 20 queued steps after a
// spin kernel, median over 9 rounds; GB/s at 28 bytes per parameter per step (read param,
// grad and both moments, write param and both moments). bench/fused_adamw_torch.py adds
// PyTorch's foreach=True and for-loop steps from Python.
//
//   side_by_side_adamw
#include "side_by_side_adamw.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "cuda_bench_util.h"

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("side_by_side_adamw: no GPU visible\n");
    return 0;
  }
  namespace sbs = side_by_side::adamw;
  const cudaStream_t stream = nullptr;
  constexpr int kRounds = 9;
  sbs::kiln_setup();
  sbs::torch_setup();
  const double bytes = 28.0 * static_cast<double>(sbs::kiln_numel());
  std::printf(
      "side_by_side_adamw: one AdamW step over MLP 1024-4096-1024-4096-10 (float32, %lld parameters), Kiln "
      "and LibTorch %s in turns\n",
      static_cast<long long>(sbs::kiln_numel()), sbs::torch_version_string());
  const std::pair<const char*, std::function<void()>> impls[] = {
      {"kiln_multi_tensor", sbs::kiln_multi_tensor_step},
      {"kiln_per_parameter", sbs::kiln_per_parameter_step},
      {"torch_fused", sbs::torch_fused_step},
      {"torch_cpp_frontend", sbs::torch_frontend_step},
  };
  constexpr size_t kImpls = sizeof(impls) / sizeof(impls[0]);
  std::vector<double> ms[kImpls];
  for (int r = 0; r < kRounds; ++r)
    for (size_t k = 0; k < kImpls; ++k) ms[k].push_back(kiln::bench::median_gpu_ms(impls[k].second, stream, 20, 1, 2));
  std::printf("%-22s %10s %10s %12s\n", "implementation", "GPU us", "GB/s", "vs torch_fused");
  double torch_fused_us = 0;
  double us[kImpls];
  for (size_t k = 0; k < kImpls; ++k) {
    std::sort(ms[k].begin(), ms[k].end());
    us[k] = 1e3 * ms[k][kRounds / 2];
    if (std::string_view(impls[k].first) == "torch_fused") torch_fused_us = us[k];
  }
  for (size_t k = 0; k < kImpls; ++k) {
    std::printf("%-22s %10.1f %10.0f %12.3f\n", impls[k].first, us[k], bytes / us[k] / 1e3, us[k] / torch_fused_us);
    std::printf("RESULT side_by_side_adamw_%s_gpu_us %.2f\n", impls[k].first, us[k]);
  }
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("side_by_side_adamw: a launch failed\n");
    return 1;
  }
  sbs::kiln_teardown();
  sbs::torch_teardown();
  return 0;
}
