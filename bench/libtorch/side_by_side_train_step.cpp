// One training step of an MLP (issue 14's benchmark: 1024-4096-1024-4096-10, GELU, float32
// without TF32, batch 256, AdamW, cross-entropy), Kiln and LibTorch's C++ frontend in one
// process, in turns: each round queues `steps` steps of one library back to back and times
// them with CUDA events on the shared default stream (host and device both: the step is
// over when the device drains), then the other library. Medians of the rounds, as ms/step.
//
// The floor: the GEMM FLOPs of forward + backward (3 products per layer, 2 M N K each) at
// the float32 peak the device reports in its header line, printed for reference.
//
//   side_by_side_train_step [--batch 256] [--rounds 15] [--steps 20]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "bench_util.h"
#include "side_by_side_train_step.h"

namespace {

using kiln::bench::median;

// Milliseconds per step for `steps` queued steps, device drained at the end.
double time_steps(const std::function<void()>& step, int steps) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaDeviceSynchronize();
  cudaEventRecord(start);
  for (int i = 0; i < steps; ++i) step();
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / steps;
}

}  // namespace

int main(int argc, char** argv) {
  namespace t = side_by_side::train;
  int64_t batch = 256;
  int rounds = 15, steps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batch")) batch = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
  }
  const std::vector<int64_t> sizes = {1024, 4096, 1024, 4096, 10};
  double flops = 0;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) flops += 3 * 2.0 * batch * sizes[i] * sizes[i + 1];
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("side_by_side_train_step: MLP 1024-4096-1024-4096-10, GELU, float32 (no TF32), batch %lld, AdamW, "
              "cross_entropy; %s, LibTorch %s\n",
              static_cast<long long>(batch), prop.name, t::torch_version_string());
  std::printf("GEMM work per step: %.2f GFLOP (forward + backward)\n", flops / 1e9);

  t::kiln_setup(sizes, batch);
  t::torch_setup(sizes, batch);
  for (int i = 0; i < 5; ++i) {  // warm-up: allocator caches, cuBLAS plans, optimizer state
    t::kiln_step();
    t::torch_step();
  }
  std::printf("losses after warm-up: kiln %.4f, libtorch %.4f\n", t::kiln_loss(), t::torch_loss());
  std::vector<double> kiln_ms, torch_ms;
  for (int r = 0; r < rounds; ++r) {
    kiln_ms.push_back(time_steps(t::kiln_step, steps));
    torch_ms.push_back(time_steps(t::torch_step, steps));
  }
  // Kiln compiled (issue 15): fused forward, the whole step one CUDA graph; measured in turns
  // with LibTorch again, after a warm-up call and the capturing call.
  t::kiln_compile();
  for (int i = 0; i < 3; ++i) t::kiln_step();
  std::printf("loss after the compiled warm-up: kiln %.4f\n", t::kiln_loss());
  std::vector<double> compiled_ms, torch2_ms;
  for (int r = 0; r < rounds; ++r) {
    compiled_ms.push_back(time_steps(t::kiln_step, steps));
    torch2_ms.push_back(time_steps(t::torch_step, steps));
  }
  const double k = median(kiln_ms), l = median(torch_ms), c = median(compiled_ms), l2 = median(torch2_ms);
  std::printf("%-34s %10s %12s\n", "library", "ms/step", "GEMM TFLOP/s");
  std::printf("%-34s %10.3f %12.1f\n", "Kiln", k, flops / (k * 1e-3) / 1e12);
  std::printf("%-34s %10.3f %12.1f\n", "LibTorch (C++ frontend)", l, flops / (l * 1e-3) / 1e12);
  std::printf("%-34s %10.3f %12.1f\n", "Kiln compiled (fused + CUDA graph)", c, flops / (c * 1e-3) / 1e12);
  std::printf("%-34s %10.3f %12.1f\n", "LibTorch (second series)", l2, flops / (l2 * 1e-3) / 1e12);
  std::printf("RESULT train_step_kiln_ms %.4f\nRESULT train_step_libtorch_ms %.4f\nRESULT train_step_ratio %.3f\n", k, l,
              k / l);
  std::printf("RESULT train_step_kiln_compiled_ms %.4f\nRESULT train_step_compiled_ratio %.3f\n", c, c / l2);
  t::kiln_teardown();
  t::torch_teardown();
  return 0;
}
