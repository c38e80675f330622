// LibTorch's eager overhead for a small CUDA op, timed exactly as bench/cuda_overhead.cpp
// times Kiln's: host microseconds to issue a 1-element float32 at::add on the GPU (result
// discarded), batches of 200 with the stream drained untimed in between, against a bare
// <<<1,1>>> launch in the same run.
#include <torch/torch.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdio>

#include "bench_util.h"
#include "cuda_bench_util.h"

int main() {
  if (!torch::cuda::is_available()) {
    std::printf("libtorch_cuda_overhead: no GPU visible\n");
    return 0;
  }
  constexpr int kRounds = 301, kCalls = 200;
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA, 0);
  const at::Tensor a = torch::full({1}, 1.5f, opts), b = torch::full({1}, 2.25f, opts);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(0).stream();
  kiln::bench::Turns turns;
  turns.add("launch", kCalls, [stream] { kiln::bench::bare_launch(stream); });
  turns.add("empty", kCalls, [&] {
    at::Tensor t = at::empty({1}, opts);
    kiln::bench::do_not_optimize(t);
  });
  turns.add("add", kCalls, [&] {
    at::Tensor r = at::add(a, b);
    kiln::bench::do_not_optimize(r);
  });
  turns.run(kRounds, [stream] { (void)cudaStreamSynchronize(stream); });
  const double floor_us = turns.median_ns("launch") / 1e3, add_us = turns.median_ns("add") / 1e3;
  std::printf("libtorch_cuda_overhead: host time per 1-element float32 op, LibTorch %s\n", TORCH_VERSION);
  std::printf("%-52s %10s\n", "path", "us/op");
  std::printf("%-52s %10.3f\n", "bare <<<1,1>>> launch (floor)", floor_us);
  std::printf("%-52s %10.3f\n", "at::empty({1}, cuda) alone", turns.median_ns("empty") / 1e3);
  std::printf("%-52s %10.3f\n", "at::add(a, b)", add_us);
  std::printf("\nRESULT libtorch_launch_floor_us %.3f\nRESULT libtorch_add_us %.3f\nRESULT libtorch_add_above_floor_us %.3f\n",
              floor_us, add_us, add_us - floor_us);
  return 0;
}
