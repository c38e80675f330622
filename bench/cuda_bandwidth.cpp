// Bandwidth of Kiln's large memory-bound CUDA ops against a device-to-device copy measured in
// the same run (the practical ceiling): add, gelu, sum (all elements) and softmax (rows of
// 4096) in float32 and bfloat16 on 2^28 elements. Bytes counted as each input read once plus
// the output written once. GPU time per call: CUDA events around queued calls after
// warm-up, median of repeats (bench/cuda_bench_util.h). bench/torch_cuda_ops.py measures
// PyTorch's same ops the same way.
//
//   cuda_bandwidth
#include <kiln/kiln.h>

#include <cuda_runtime_api.h>

#include "bench/cuda_bench_util.h"

using namespace kiln;

int main() {
  if (!cuda::is_available()) {
    fmt::print("cuda_bandwidth: no GPU visible\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(cuda::current_stream(gpu).id());
  const int64_t n = int64_t{1} << 28, row = 4096;
  fmt::print("cuda_bandwidth: {} elements, {}\n", n, cuda::device_properties(gpu).name);
  fmt::print("{:<24} {:>10} {:>12} {:>12}\n", "op", "ms", "GB/s", "of copy");
  for (DType dt : {kFloat32, kBFloat16}) {
    manual_seed(0);
    const Tensor a = randn({n}, TensorOptions(dt).device(gpu)), b = randn({n}, TensorOptions(dt).device(gpu));
    const Tensor rows = a.view({n / row, row});
    Tensor c = empty({n}, TensorOptions(dt).device(gpu));
    const double bytes1 = static_cast<double>(n) * static_cast<double>(element_size(dt));
    const char* name = dtype_name(dt).data();
    const double copy_ms = bench::median_gpu_ms(
        [&] { (void)cudaMemcpyAsync(c.data_ptr(), a.data_ptr(), static_cast<size_t>(bytes1), cudaMemcpyDeviceToDevice, s); },
        s, 10);
    const double copy_gbs = 2 * bytes1 / copy_ms / 1e6;
    Tensor out;
    const struct {
      const char* op;
      double bytes;
      std::function<void()> f;
    } ops[] = {
        {"add", 3 * bytes1, [&] { out = add(a, b); }},
        {"gelu", 2 * bytes1, [&] { out = gelu(a); }},
        {"sum", bytes1, [&] { out = sum(a); }},
        {"softmax", 2 * bytes1, [&] { out = softmax(rows, -1); }},
    };
    fmt::print("{:<24} {:>10.3f} {:>12.1f} {:>11.1f}%\n", fmt::format("D2D copy {}", name), copy_ms, copy_gbs, 100.0);
    fmt::print("RESULT kiln_copy_{}_gbs {:.1f}\n", name, copy_gbs);
    for (const auto& op : ops) {
      const double ms = bench::median_gpu_ms(op.f, s, 10);
      const double gbs = op.bytes / ms / 1e6;
      fmt::print("{:<24} {:>10.3f} {:>12.1f} {:>11.1f}%\n", fmt::format("{} {}", op.op, name), ms, gbs,
                 100.0 * gbs / copy_gbs);
      fmt::print("RESULT kiln_{}_{}_gbs {:.1f}\n", op.op, name, gbs);
    }
  }
  return 0;
}
