// LibTorch's eager overhead on the CPU under the same load as bench/dispatch_overhead.cpp:
// a 1-element float32 at::add, result discarded, timed with the same harness.
#include <torch/torch.h>

#include <cstdio>

#include "bench_util.h"

int main() {
  at::init_num_threads();
  const at::Tensor a = torch::full({1}, 1.5f), b = torch::full({1}, 2.25f);
  kiln::bench::Turns turns;
  turns.add("add", 20000, [&] {
    at::Tensor r = at::add(a, b);
    kiln::bench::do_not_optimize(r);
  });
  turns.add("empty", 20000, [&] {
    at::Tensor t = at::empty({1});
    kiln::bench::do_not_optimize(t);
  });
  turns.run(21);
  std::printf("libtorch_dispatch_overhead: 1-element float32 at::add on the CPU, LibTorch %s\n", TORCH_VERSION);
  std::printf("%-52s %10s\n", "path", "ns/op");
  std::printf("%-52s %10.1f\n", "at::empty({1})", turns.median_ns("empty"));
  std::printf("%-52s %10.1f\n", "at::add(a, b)", turns.median_ns("add"));
  return 0;
}
