// Bandwidth of Kiln's large elementwise CUDA ops against a device-to-device copy measured in
// the same run (the practical ceiling): add and gelu in float32 and bfloat16 on 2^28
// elements. Bytes counted as each input read once plus the output written once; CUDA-event
// timing after warm-up, median of 20 runs.
//
//   cuda_elementwise
#include <kiln/kiln.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <vector>

using namespace kiln;

namespace {
double median_ms(const std::function<void()>& f, const Stream& s) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    Event start(s.device(), true), stop(s.device(), true);
    start.record(s);
    f();
    stop.record(s);
    stop.synchronize();
    ms.push_back(start.elapsed_ms(stop));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
}  // namespace

int main() {
  if (!cuda::is_available()) {
    fmt::print("cuda_elementwise: no GPU visible\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  const Stream s = cuda::current_stream(gpu);
  const int64_t n = int64_t{1} << 28;
  fmt::print("cuda_elementwise: {} elements, {}\n", n, cuda::device_properties(gpu).name);
  fmt::print("{:<24} {:>10} {:>12} {:>12}\n", "op", "ms", "GB/s", "of copy");
  for (DType dt : {kFloat32, kBFloat16}) {
    manual_seed(0);
    const Tensor a = randn({n}, TensorOptions(dt).device(gpu)), b = randn({n}, TensorOptions(dt).device(gpu));
    Tensor c = empty({n}, TensorOptions(dt).device(gpu));
    const double bytes1 = static_cast<double>(n) * static_cast<double>(element_size(dt));
    const double copy_ms = median_ms(
        [&] { (void)cudaMemcpyAsync(c.data_ptr(), a.data_ptr(), static_cast<size_t>(bytes1), cudaMemcpyDeviceToDevice,
                                    reinterpret_cast<cudaStream_t>(s.id())); },
        s);
    const double copy_gbs = 2 * bytes1 / copy_ms / 1e6;
    Tensor out;
    const double add_ms = median_ms([&] { out = add(a, b); }, s);
    const double gelu_ms = median_ms([&] { out = gelu(a); }, s);
    const char* name = dtype_name(dt).data();
    fmt::print("{:<24} {:>10.3f} {:>12.1f} {:>11.1f}%\n", fmt::format("D2D copy {}", name), copy_ms, copy_gbs, 100.0);
    fmt::print("{:<24} {:>10.3f} {:>12.1f} {:>11.1f}%\n", fmt::format("add {}", name), add_ms, 3 * bytes1 / add_ms / 1e6,
               100.0 * (3 * bytes1 / add_ms / 1e6) / copy_gbs);
    fmt::print("{:<24} {:>10.3f} {:>12.1f} {:>11.1f}%\n", fmt::format("gelu {}", name), gelu_ms,
               2 * bytes1 / gelu_ms / 1e6, 100.0 * (2 * bytes1 / gelu_ms / 1e6) / copy_gbs);
  }
  return 0;
}
