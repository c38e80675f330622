// One AdamW step over the parameters of the 4-layer MLP (1024-4096-1024-4096-10,
// float32, 12.6 M parameters in 8 tensors) on the GPU: Kiln's optim::AdamW (one
// multi-tensor launch) and the same update parameter by parameter (_fused_adamw_ on each
// tensor: 8 launches). Per step: GPU time (CUDA events around 20 queued steps after a spin
// kernel, median of 9 repeats; bench/cuda_bench_util.h), the bandwidth that implies (each
// step reads param, grad, exp_avg, exp_avg_sq and writes param, exp_avg, exp_avg_sq: 28 bytes
// per parameter), and host wall time per step (200 steps, then a synchronize).
// bench/fused_adamw_torch.py times torch.optim.AdamW (fused=True, foreach=True, for-loop) on
// the same parameters the same way and prints the same lines; bench/libtorch/
// side_by_side_adamw runs Kiln and LibTorch's fused kernel in one process.
//
//   fused_adamw
#include <cuda_runtime_api.h>
#include <kiln/kiln.h>

#include <chrono>
#include <functional>

#include "bench/cuda_bench_util.h"

using namespace kiln;

namespace {

// Host wall time per call of `f` over `steps` calls, the GPU drained before and after.
double wall_us(const std::function<void()>& f, int steps) {
  cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) f();
  cuda::synchronize();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / steps;
}

}  // namespace

int main() {
  kiln::NoGradGuard no_grad;  // the optimizer ops update leaves that require grad, as optim::AdamW::step does
  if (!cuda::is_available()) {
    fmt::print("fused_adamw: no GPU visible\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(cuda::current_stream(gpu).id());
  manual_seed(0);
  nn::MLP mlp({1024, 4096, 1024, 4096, 10}, nn::Activation::GELU);
  mlp.to(gpu);
  std::vector<Tensor> params = mlp.parameters();
  int64_t numel = 0;
  for (Tensor& p : params) {
    p.mutable_grad() = randn(p.sizes(), p.options()) * 1e-3;
    numel += p.numel();
  }
  const double bytes = 28.0 * static_cast<double>(numel);
  fmt::print(
      "fused_adamw: one AdamW step over MLP 1024-4096-1024-4096-10 (float32, {} parameters in {} tensors) on "
      "{}\n",
      numel, params.size(), cuda::device_properties(gpu).name);
  fmt::print("{:<28} {:>10} {:>10} {:>10}\n", "implementation", "GPU us", "GB/s", "wall us");

  optim::AdamW opt(params, {.lr = 1e-3, .weight_decay = 1e-2});
  // The same update parameter by parameter, with state of its own.
  std::vector<Tensor> p2, m2, v2;
  for (const Tensor& p : params) {
    p2.push_back(p.clone());
    p2.back().mutable_grad() = p.grad();
    m2.push_back(zeros_like(p));
    v2.push_back(zeros_like(p));
  }
  double step2 = 0;
  const AdamConfig config{.lr = 1e-3, .weight_decay = 1e-2};
  auto per_parameter = [&] {
    step2 += 1;
    for (size_t i = 0; i < p2.size(); ++i) _fused_adamw_(p2[i], p2[i].grad(), m2[i], v2[i], Tensor(), step2, config);
  };
  const std::pair<const char*, std::function<void()>> impls[] = {
      {"kiln_multi_tensor", [&] { opt.step(); }},
      {"kiln_per_parameter", per_parameter},
  };
  for (const auto& [name, f] : impls) {
    const double gpu_us = 1e3 * bench::median_gpu_ms(f, s, 20, 9, 5);
    const double host_us = wall_us(f, 200);
    fmt::print("{:<28} {:>10.1f} {:>10.0f} {:>10.1f}\n", name, gpu_us, bytes / gpu_us / 1e3, host_us);
    fmt::print("RESULT fused_adamw_{}_gpu_us {:.2f}\n", name, gpu_us);
    fmt::print("RESULT fused_adamw_{}_wall_us {:.2f}\n", name, host_us);
  }
  return 0;
}
