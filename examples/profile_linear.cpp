// The article's profiling program in C++: nn::Linear(1024, 4096) on a [64, 1024] input
// inside a RecordFunction("linear_forward") scope, profiled; the table sorted by
// cuda_time_total (row_limit 10), the same grouped by input shape, and a Chrome trace
// written to a file whose path it prints. `make demo` runs it.
//
// It runs on the GPU when one is visible (CUDA columns from CUPTI, kernel rows, and the
// roofline columns), else on the CPU (CPU columns only).
//
//   profile_linear [--trace PATH]
#include <kiln/kiln.h>

#include <cstring>
#include <iostream>
#include <string>

using namespace kiln;

int main(int argc, char** argv) {
  std::string trace_path = "profile_linear_trace.json";
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--trace") == 0 && i + 1 < argc) trace_path = argv[++i];
  try {
    const Device device = cuda::is_available() ? Device::cuda(0) : Device::cpu();
    manual_seed(0);
    nn::Linear linear(1024, 4096);
    linear.to(device);
    const Tensor x = randn({64, 1024}, TensorOptions().device(device));
    (void)linear.forward(x);  // warm-up: first-call costs stay out of the profile

    // with_flops adds, right of PyTorch's columns, FLOPs and (on a GPU) the roofline columns.
    profiler::Profiler prof({.record_shapes = true, .with_flops = true});
    {
      profiler::ProfileGuard recording(prof);
      profiler::RecordFunction scope("linear_forward");
      const Tensor y = linear.forward(x);
      if (device.is_cuda()) cuda::synchronize(device);
    }
    std::cout << "nn::Linear(1024, 4096) on " << device.str() << ", input [64, 1024]\n\n";
    std::cout << prof.key_averages().table({.sort_by = "cuda_time_total", .row_limit = 10}) << "\n";
    std::cout << prof.key_averages(true).table({.sort_by = "cuda_time_total", .row_limit = 10}) << "\n";
    prof.export_chrome_trace(trace_path);
    std::cout << "trace written to " << trace_path << " (open it in https://ui.perfetto.dev)\n";
  } catch (const std::exception& e) {
    std::cerr << "profile_linear: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
