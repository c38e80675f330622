// Eager overhead of a small CUDA op, Kiln and LibTorch in one process: host microseconds to
// issue a 1-element float32 add on cuda:0 (result discarded) through each library, against
// one floor, a bare <<<1,1>>> launch, all timed in the same turns (batches of 200 calls, the
// stream drained untimed between batches, medians of 301 rounds). Separate processes can
// measure launch floors a microsecond apart (docs/BENCHMARKS.md); here both libraries share
// the floor, the CUDA runtime, the stream and the machine's state.
//
//   side_by_side_cuda_overhead
#include <cuda_runtime_api.h>

#include <cstdio>

#include "bench_util.h"
#include "cuda_bench_util.h"
#include "side_by_side.h"

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("side_by_side_cuda_overhead: no GPU visible\n");
    return 0;
  }
  constexpr int kRounds = 301, kCalls = 200;
  side_by_side::kiln_setup();
  side_by_side::torch_setup();
  const cudaStream_t stream = nullptr;  // both libraries' current stream: the default stream
  kiln::bench::Turns turns;
  turns.add("launch", kCalls, [stream] { kiln::bench::bare_launch(stream); });
  turns.add("kiln_add", kCalls, [] { side_by_side::kiln_add(); });
  turns.add("torch_add", kCalls, [] { side_by_side::torch_add(); });
  turns.add("kiln_empty", kCalls, [] { side_by_side::kiln_empty(); });
  turns.add("torch_empty", kCalls, [] { side_by_side::torch_empty(); });
  turns.run(kRounds, [stream] { (void)cudaStreamSynchronize(stream); });
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("side_by_side_cuda_overhead: a launch failed\n");
    return 1;
  }
  side_by_side::kiln_teardown();
  side_by_side::torch_teardown();

  const double floor_us = turns.median_ns("launch") / 1e3;
  const double kiln_us = turns.median_ns("kiln_add") / 1e3, torch_us = turns.median_ns("torch_add") / 1e3;
  std::printf("side_by_side_cuda_overhead: Kiln and LibTorch %s in one process, host us per 1-element float32 op\n",
              side_by_side::torch_version());
  std::printf("median of %d rounds; each round times the host issuing a batch of %d calls of every variant in turn\n\n",
              kRounds, kCalls);
  std::printf("%-44s %10s %14s\n", "path", "us/op", "above floor");
  std::printf("%-44s %10.3f\n", "bare <<<1,1>>> launch (floor)", floor_us);
  std::printf("%-44s %10.3f %14.3f\n", "kiln::add(a, b)", kiln_us, kiln_us - floor_us);
  std::printf("%-44s %10.3f %14.3f\n", "at::add(a, b)", torch_us, torch_us - floor_us);
  std::printf("%-44s %10.3f\n", "kiln::empty({1}, cuda)", turns.median_ns("kiln_empty") / 1e3);
  std::printf("%-44s %10.3f\n", "at::empty({1}, cuda)", turns.median_ns("torch_empty") / 1e3);
  std::printf("\nRESULT side_by_side_floor_us %.3f\nRESULT side_by_side_kiln_add_us %.3f\nRESULT side_by_side_libtorch_add_us %.3f\n",
              floor_us, kiln_us, torch_us);
  return 0;
}
