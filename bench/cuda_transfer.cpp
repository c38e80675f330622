// Host <-> device transfers through Kiln: pageable, pinned (pin_memory(), from the pinned host
// cache) and non_blocking copies each way, against raw cudaMemcpyAsync from pageable and from
// pinned (cudaHostAlloc) memory of the same size, for 4 KiB, 1 MiB, 64 MiB and 256 MiB of
// float32. A batch queues `calls` copies back to back on the default stream, then drains the
// device; it gives the host's time per call (until the last call returned: what a
// non_blocking copy hands back to the host) and the rate (bytes / time until drained).
// Medians of 7 rounds after a warm-up batch. LibTorch's figures in the same process:
// bench/libtorch/side_by_side_transfer.
//
//   cuda_transfer
#include <kiln/kiln.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct Sample {
  double host_us;  // per call
  double gbps;
};

// `calls` calls of f queued back to back, then the device drained.
Sample batch(const std::function<void()>& f, int calls, size_t bytes) {
  (void)cudaDeviceSynchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  const auto t1 = std::chrono::steady_clock::now();
  (void)cudaDeviceSynchronize();
  const auto t2 = std::chrono::steady_clock::now();
  const double host = std::chrono::duration<double>(t1 - t0).count();
  const double total = std::chrono::duration<double>(t2 - t0).count();
  return {host / calls * 1e6, static_cast<double>(bytes) * calls / total / 1e9};
}

// The median host time and rate of `rounds` batches, after one warm-up batch.
Sample median_of(const std::function<void()>& f, int calls, size_t bytes, int rounds = 7) {
  (void)batch(f, calls, bytes);
  std::vector<double> host, rate;
  for (int r = 0; r < rounds; ++r) {
    const Sample s = batch(f, calls, bytes);
    host.push_back(s.host_us);
    rate.push_back(s.gbps);
  }
  std::sort(host.begin(), host.end());
  std::sort(rate.begin(), rate.end());
  return {host[host.size() / 2], rate[rate.size() / 2]};
}

int calls_for(size_t bytes) {
  if (bytes <= (size_t{4} << 10)) return 200;
  if (bytes <= (size_t{1} << 20)) return 50;
  if (bytes <= (size_t{64} << 20)) return 6;
  return 3;
}

}  // namespace

int main() {
  if (!cuda::is_available()) {
    fmt::print("cuda_transfer: no GPU visible\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  fmt::print("cuda_transfer: {}, float32; host us per call (until the last call of a batch returned) and GB/s "
             "(bytes / time until the device drained), medians of 7 batches\n",
             cuda::device_properties(gpu).name);
  for (const size_t bytes : {size_t{4} << 10, size_t{1} << 20, size_t{64} << 20, size_t{256} << 20}) {
    const auto n = static_cast<int64_t>(bytes / 4);
    const int calls = calls_for(bytes);
    const Tensor host = randn({n});
    const Tensor pinned_host = host.pin_memory();
    const Tensor dev = host.to(gpu);
    Tensor pinned_dst = empty({n}).pin_memory();
    void* raw_pinned = nullptr;
    if (cudaHostAlloc(&raw_pinned, bytes, cudaHostAllocDefault) != cudaSuccess) return 1;
    std::memcpy(raw_pinned, host.data_ptr(), bytes);
    std::vector<float> pageable(static_cast<size_t>(n));
    const struct {
      const char* label;
      std::function<void()> f;
    } rows[] = {
        {"raw cudaMemcpy H2D from pageable",
         [&] { (void)cudaMemcpy(dev.data_ptr(), host.data_ptr(), bytes, cudaMemcpyHostToDevice); }},
        {"raw cudaMemcpy H2D from pinned",
         [&] { (void)cudaMemcpy(dev.data_ptr(), raw_pinned, bytes, cudaMemcpyHostToDevice); }},
        {"x.to(cuda)              pageable", [&] { Tensor t = host.to(gpu); }},
        {"p.to(cuda)              pinned", [&] { Tensor t = pinned_host.to(gpu); }},
        {"p.to(cuda, true)        pinned, non_blocking", [&] { Tensor t = pinned_host.to(gpu, true); }},
        {"x.to(cuda, true)        staged, non_blocking", [&] { Tensor t = host.to(gpu, true); }},
        {"x.pin_memory().to(cuda, true)", [&] { Tensor t = host.pin_memory().to(gpu, true); }},
        {"raw cudaMemcpy D2H to pageable",
         [&] { (void)cudaMemcpy(pageable.data(), dev.data_ptr(), bytes, cudaMemcpyDeviceToHost); }},
        {"raw cudaMemcpy D2H to pinned",
         [&] { (void)cudaMemcpy(raw_pinned, dev.data_ptr(), bytes, cudaMemcpyDeviceToHost); }},
        {"y.cpu()                 pageable", [&] { Tensor t = dev.cpu(); }},
        {"p.copy_(y)              into pinned", [&] { pinned_dst.copy_(dev); }},
        {"y.to(cpu, true)         pinned, non_blocking", [&] { Tensor t = dev.to(Device::cpu(), true); }},
    };
    const std::string size =
        bytes < (size_t{1} << 20) ? fmt::format("{} KiB", bytes >> 10) : fmt::format("{} MiB", bytes >> 20);
    fmt::print("\n{}, {} calls per batch\n{:<46} {:>10} {:>10}\n", size, calls, "copy", "host us", "GB/s");
    for (const auto& row : rows) {
      const Sample s = median_of(row.f, calls, bytes);
      fmt::print("{:<46} {:>10.2f} {:>10.2f}\n", row.label, s.host_us, s.gbps);
    }
    (void)cudaFreeHost(raw_pinned);
  }
  fmt::print("\npinned host cache after the run:\n{}", cuda::host_memory_summary(true));
  return 0;
}
