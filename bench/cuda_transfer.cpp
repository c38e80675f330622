// Host <-> device transfer rates: what Kiln's to(cuda) / cpu() reach from ordinary and from
// pinned (pin_memory()) CPU tensors, against raw cudaMemcpy from pageable and from pinned
// (cudaHostAlloc) host memory of the same size.
// Wall-clock per synchronous transfer, median of 15 after 2 warm-ups.
//
//   cuda_transfer
#include <kiln/kiln.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

using namespace kiln;

namespace {
double median_ms(const std::function<void()>& f) {
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < 15; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
}  // namespace

int main() {
  if (!cuda::is_available()) {
    fmt::print("cuda_transfer: no GPU visible\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  fmt::print("cuda_transfer: synchronous copies, GB/s (median of 15), {}\n", cuda::device_properties(gpu).name);
  fmt::print("{:>6} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13}\n", "MiB", "H2D pageable", "H2D pinned",
             "kiln to(cuda)", "kiln pinned", "D2H pageable", "D2H pinned", "kiln cpu()", "kiln pinned");
  for (int64_t mib : {1, 16, 256}) {
    const int64_t n = mib * (1 << 20) / 4;
    const size_t bytes = static_cast<size_t>(n) * 4;
    const Tensor host = randn({n});
    const Tensor dev = host.to(gpu);
    void* pinned = nullptr;
    if (cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault) != cudaSuccess) return 1;
    std::memcpy(pinned, host.data_ptr(), bytes);
    std::vector<float> pageable(static_cast<size_t>(n));
    const auto rate = [&](double ms) { return static_cast<double>(bytes) / ms / 1e6; };
    const double h2d_pageable = median_ms([&] { (void)cudaMemcpy(dev.data_ptr(), host.data_ptr(), bytes, cudaMemcpyHostToDevice); });
    const double h2d_pinned = median_ms([&] { (void)cudaMemcpy(dev.data_ptr(), pinned, bytes, cudaMemcpyHostToDevice); });
    const double h2d_kiln = median_ms([&] {
      Tensor t = host.to(gpu);
      cuda::synchronize(gpu);
    });
    const double d2h_pageable = median_ms([&] { (void)cudaMemcpy(pageable.data(), dev.data_ptr(), bytes, cudaMemcpyDeviceToHost); });
    const double d2h_pinned = median_ms([&] { (void)cudaMemcpy(pinned, dev.data_ptr(), bytes, cudaMemcpyDeviceToHost); });
    const double d2h_kiln = median_ms([&] { Tensor t = dev.cpu(); });
    const Tensor pinned_host = host.pin_memory();
    Tensor pinned_dst = empty({n}).pin_memory();
    const double h2d_kiln_pinned = median_ms([&] { Tensor t = pinned_host.to(gpu); });
    const double d2h_kiln_pinned = median_ms([&] { pinned_dst.copy_(dev); });
    fmt::print("{:>6} {:>13.1f} {:>13.1f} {:>13.1f} {:>13.1f} {:>13.1f} {:>13.1f} {:>13.1f} {:>13.1f}\n", mib,
               rate(h2d_pageable), rate(h2d_pinned), rate(h2d_kiln), rate(h2d_kiln_pinned), rate(d2h_pageable),
               rate(d2h_pinned), rate(d2h_kiln), rate(d2h_kiln_pinned));
    (void)cudaFreeHost(pinned);
  }
  return 0;
}
