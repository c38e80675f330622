// Eager overhead of a small CUDA op: host microseconds per 1-element float32 kiln::add on
// the GPU (validation, promotion, op scope, output from the caching allocator, kernel
// launch; result discarded) against the floor, a bare <<<1,1>>> launch of an empty kernel
// timed the same way in the same run. Each variant runs batches of 200 calls in turns; only
// the host's time to issue them is timed: the stream is synchronised (untimed) after each
// batch, so the launch queue starts empty and never fills; medians of the batches.
// bench/libtorch/libtorch_cuda_overhead.cpp measures LibTorch the same way.
//
//   cuda_overhead
#include <kiln/kiln.h>

#include <cuda_runtime_api.h>

#include "bench/bench_util.h"
#include "bench/cuda_bench_util.h"
#include "core/cuda_guard.h"
#include "ops/kernels.h"

using namespace kiln;

int main() {
  if (!cuda::is_available()) {
    fmt::print("cuda_overhead: no GPU visible\n");
    return 0;
  }
  constexpr int kRounds = 301, kCalls = 200;
  const Device gpu = Device::cuda(0);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(cuda::current_stream(gpu).id());
  const Tensor a = full({1}, 1.5f, gpu), b = full({1}, 2.25f, gpu);
  Tensor out = empty({1}, gpu);
  const auto kernel = dispatch::binary_kernels.get("add", gpu);
  bench::Turns turns;
  turns.add("launch", kCalls, [stream] { bench::bare_launch(stream); });
  turns.add("launch_args", kCalls,
            [&] { bench::bare_launch_with_args(stream, a.data_ptr(), b.data_ptr(), out.data_ptr()); });
  turns.add("guard", kCalls, [&] {
    cuda::DeviceGuard guard(0);
    bench::do_not_optimize(cuda::current_stream(gpu).id());
    (void)cudaGetLastError();
  });
  turns.add("kernel", kCalls, [&] { kernel(BinaryOp::Add, out, a, b, 1); });
  turns.add("empty", kCalls, [&] {
    Tensor t = empty({1}, gpu);
    bench::do_not_optimize(t);
  });
  turns.add("add", kCalls, [&] {
    Tensor r = add(a, b);
    bench::do_not_optimize(r);
  });
  // The same op on the CPU: the front end's cost without any CUDA call.
  const Tensor ca = full({1}, 1.5f), cb = full({1}, 2.25f);
  Tensor cout = empty({1});
  const auto cpu_kernel = dispatch::binary_kernels.get("add", Device::cpu());
  turns.add("cpu_kernel", kCalls, [&] { cpu_kernel(BinaryOp::Add, cout, ca, cb, 1); });
  turns.add("cpu_empty", kCalls, [&] {
    Tensor t = empty({1});
    bench::do_not_optimize(t);
  });
  turns.add("cpu_add", kCalls, [&] {
    Tensor r = add(ca, cb);
    bench::do_not_optimize(r);
  });
  turns.run(kRounds, [stream] { (void)cudaStreamSynchronize(stream); });
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fmt::print("cuda_overhead: a launch failed\n");
    return 1;
  }
  const double floor_us = turns.median_ns("launch") / 1e3, add_us = turns.median_ns("add") / 1e3;
  fmt::print("cuda_overhead: host time per 1-element float32 op on {} ({})\n", cuda::device_properties(gpu).name,
             bench::machine_description());
  fmt::print("median of {} rounds; each round times the host issuing a batch of {} calls of every variant in turn\n\n", kRounds, kCalls);
  fmt::print("{:<52} {:>10}\n", "path", "us/op");
  fmt::print("{:<52} {:>10.3f}\n", "bare <<<1,1>>> launch (floor)", floor_us);
  fmt::print("{:<52} {:>10.3f}\n", "bare launch with an elementwise kernel's arguments", turns.median_ns("launch_args") / 1e3);
  fmt::print("{:<52} {:>10.3f}\n", "DeviceGuard + current_stream + cudaGetLastError", turns.median_ns("guard") / 1e3);
  fmt::print("{:<52} {:>10.3f}\n", "registered CUDA add kernel, preallocated output", turns.median_ns("kernel") / 1e3);
  fmt::print("{:<52} {:>10.3f}\n", "empty({1}, cuda) alone", turns.median_ns("empty") / 1e3);
  fmt::print("{:<52} {:>10.3f}\n", "kiln::add(a, b)", add_us);
  fmt::print("{:<52} {:>10.3f}\n", "CPU: registered add kernel, preallocated output", turns.median_ns("cpu_kernel") / 1e3);
  fmt::print("{:<52} {:>10.3f}\n", "CPU: empty({1}) alone", turns.median_ns("cpu_empty") / 1e3);
  fmt::print("{:<52} {:>10.3f}\n", "CPU: kiln::add(a, b)", turns.median_ns("cpu_add") / 1e3);
  fmt::print("\nRESULT kiln_launch_floor_us {:.3f}\nRESULT kiln_add_us {:.3f}\nRESULT kiln_add_above_floor_us {:.3f}\n",
             floor_us, add_us, add_us - floor_us);
  return 0;
}
