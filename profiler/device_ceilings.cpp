// device_ceilings(): peak FLOP rates from the SM count, the max clock and a per-SM table by
// compute capability; memory bandwidth from timed device-to-device copies (raw cudaMalloc,
// not the caching allocator, so the profile's memory columns never see them), with the
// theoretical bus figure as the fallback. Every CUDA call's status is checked and the
// runtime's last-error state cleared afterwards: the table path must not throw or leave a
// stale error for the next CUDA_CHECK. CPU-only builds compile none of this.
#include "device_ceilings.h"

#include <fmt/format.h>

#include <vector>

#ifdef KILN_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "../core/cuda_guard.h"
#include "../core/error.h"
#include "../core/stream.h"
#endif

namespace kiln::profiler {

double DeviceCeilings::flops_per_s(MathKind math) const {
  switch (math) {
    case MathKind::Float64:
      return float64_flops_per_s;
    case MathKind::Float32:
      return float32_flops_per_s;
    case MathKind::TF32:
      return tf32_flops_per_s;
    case MathKind::Half:
      return half_flops_per_s;
    case MathKind::None:
      return 0;
  }
  return 0;
}

std::string describe(const DeviceCeilings& c) {
  std::vector<std::string> rates;
  auto add = [&rates](const char* label, double flops_per_s) {
    if (flops_per_s > 0) rates.push_back(fmt::format("{} {:.1f}", label, flops_per_s / 1e12));
  };
  add("float32", c.float32_flops_per_s);
  add("TF32", c.tf32_flops_per_s);
  add("float16/bfloat16", c.half_flops_per_s);
  add("float64", c.float64_flops_per_s);
  const std::string memory =
      c.memory_bytes_per_s > 0 ? fmt::format("{:.2f} TB/s", c.memory_bytes_per_s / 1e12) : std::string("unknown");
  const std::string peaks = rates.empty() ? std::string("unknown") : fmt::format("{}", fmt::join(rates, ", "));
  return fmt::format("Device ceilings ({}, device {}): memory {} ({})\nPeak TFLOP/s: {} ({})", c.device_name, c.device,
                     memory, c.memory_source, peaks, c.flops_source);
}

#ifdef KILN_WITH_CUDA

namespace {

// Dense FLOPs per clock per SM, from NVIDIA's whitepapers and datasheets (peak = SMs x
// clock x these), checked against the published totals:
//   sm_80 A100 (108 SMs, 1410 MHz): 64 FP32 lanes -> 19.5 TF float32; TF32 156, FP16 312;
//         FP64 tensor cores 19.5.
//   sm_86 A10 / A40 (GA10x): 128 FP32 lanes; TF32 and FP16 at A10's 62.5 / 125 TF (72 SMs,
//         1695 MHz); GeForce parts run tensor FP16 with float32 accumulate at half that.
//         FP64 is 1/64 of FP32.
//   sm_89 L4 / L40S (Ada): like GA10x: L4 (58 SMs, 2040 MHz) 30.3 / 60 / 121 TF.
//   sm_90 H100 / H200 (132 SMs SXM): float32 66.9 TF and FP64 tensor 66.9 TF at 1980 MHz;
//         TF32 494.7 and FP16 989.4 TF dense at the 1830 MHz NVIDIA quotes for tensor work,
//         so at the 1980 MHz max clock the device reports these peaks read 8% higher.
// float64 is the faster of the FP64 units and the FP64 tensor cores (DGEMM uses the latter).
struct PerSm {
  int major, minor;
  double float64, float32, tf32, half;
};
constexpr PerSm kPerSm[] = {
    {8, 0, 128, 128, 1024, 2048},
    {8, 6, 4, 256, 512, 1024},
    {8, 9, 4, 256, 512, 1024},
    {9, 0, 256, 256, 2048, 4096},
};

// An unknown architecture: float32 as 128 FMA lanes per SM; the tensor rates stay unknown.
constexpr double kFallbackFloat32PerSm = 2 * 128;

constexpr size_t kCopyBytes = size_t{256} << 20;
constexpr int kWarmupCopies = 3;
constexpr int kTimedCopies = 10;

bool ok(cudaError_t status) { return status == cudaSuccess; }

// Median bytes/s (read + written) of device-to-device copies of `size` bytes on the current
// device, or 0 when any step fails (the allocation, typically, with the device nearly full).
double measure_copy_bandwidth(size_t size) {
  void* src = nullptr;
  void* dst = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<float> ms;
  bool good = ok(cudaMalloc(&src, size)) && ok(cudaMalloc(&dst, size)) &&
              ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) && ok(cudaEventCreate(&start)) &&
              ok(cudaEventCreate(&stop));
  for (int i = 0; good && i < kWarmupCopies; ++i)
    good = ok(cudaMemcpyAsync(dst, src, size, cudaMemcpyDeviceToDevice, stream));
  for (int i = 0; good && i < kTimedCopies; ++i) {
    float elapsed = 0;
    good = ok(cudaEventRecord(start, stream)) &&
           ok(cudaMemcpyAsync(dst, src, size, cudaMemcpyDeviceToDevice, stream)) && ok(cudaEventRecord(stop, stream)) &&
           ok(cudaEventSynchronize(stop)) && ok(cudaEventElapsedTime(&elapsed, start, stop));
    if (good) ms.push_back(elapsed);
  }
  if (stream != nullptr) (void)cudaStreamSynchronize(stream);
  if (stop != nullptr) (void)cudaEventDestroy(stop);
  if (start != nullptr) (void)cudaEventDestroy(start);
  if (stream != nullptr) (void)cudaStreamDestroy(stream);
  if (dst != nullptr) (void)cudaFree(dst);
  if (src != nullptr) (void)cudaFree(src);
  (void)cudaGetLastError();  // a failed cudaMalloc leaves its error behind
  if (!good || ms.empty()) return 0;
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double median_ms = n % 2 == 1 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2.0;
  return median_ms > 0 ? 2.0 * static_cast<double>(size) / (median_ms * 1e-3) : 0;
}

// The ceilings of `device`, measured and computed now; std::nullopt after a CUDA error.
std::optional<DeviceCeilings> find_ceilings(int device) {
  cuda::DeviceProperties prop;
  try {
    if (device < 0 || device >= cuda::device_count()) return std::nullopt;
    prop = cuda::device_properties(Device::cuda(device));
  } catch (const Error&) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  const int sms = prop.multiprocessors, clock_khz = prop.max_clock_khz, major = prop.major, minor = prop.minor;

  DeviceCeilings c;
  c.device = device;
  c.device_name = prop.name;

  // Peak FLOP rates: SMs x max clock x FLOPs per clock per SM.
  const double sm_hz = static_cast<double>(sms) * static_cast<double>(clock_khz) * 1e3;
  const PerSm* per_sm = nullptr;
  for (const PerSm& p : kPerSm)
    if (p.major == major && p.minor == minor) per_sm = &p;
  if (sm_hz <= 0) {
    c.flops_source = fmt::format("unknown: the device reports {} SMs at {} kHz", sms, clock_khz);
  } else if (per_sm != nullptr) {
    c.float64_flops_per_s = sm_hz * per_sm->float64;
    c.float32_flops_per_s = sm_hz * per_sm->float32;
    c.tf32_flops_per_s = sm_hz * per_sm->tf32;
    c.half_flops_per_s = sm_hz * per_sm->half;
    c.flops_source = fmt::format("{} SMs x {} MHz x FLOPs/clock/SM for sm_{}{}", sms, clock_khz / 1000, major, minor);
  } else {
    c.float32_flops_per_s = sm_hz * kFallbackFloat32PerSm;
    c.flops_source =
        fmt::format("{} SMs x {} MHz x 256 FLOPs/clock/SM, assumed: sm_{}{} is not in the table, so float32 only", sms,
                    clock_khz / 1000, major, minor);
  }

  // Memory bandwidth: measured on the device, else the theoretical bus figure.
  try {
    const cuda::DeviceGuard on_device(device);
    c.memory_bytes_per_s = measure_copy_bandwidth(kCopyBytes);
  } catch (const Error&) {
    c.memory_bytes_per_s = 0;
  }
  (void)cudaGetLastError();
  if (c.memory_bytes_per_s > 0) {
    c.memory_source = fmt::format("measured: D2D copy of {} MiB, median of {}", kCopyBytes >> 20, kTimedCopies);
  } else {
    // Double data rate: two transfers per memory clock over the whole bus.
    c.memory_bytes_per_s =
        2.0 * static_cast<double>(prop.memory_clock_khz) * 1e3 * static_cast<double>(prop.memory_bus_width) / 8.0;
    c.memory_source = fmt::format("theoretical: 2 x {} MHz x {}-bit bus; the D2D copy could not run",
                                  prop.memory_clock_khz / 1000, prop.memory_bus_width);
  }
  return c;
}

}  // namespace

std::optional<DeviceCeilings> device_ceilings(int device) {
  static std::mutex mutex;
  static std::map<int, std::optional<DeviceCeilings>> found;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = found.find(device);
  if (it == found.end()) it = found.emplace(device, find_ceilings(device)).first;
  return it->second;
}

#else

std::optional<DeviceCeilings> device_ceilings(int /*device*/) { return std::nullopt; }

#endif

}  // namespace kiln::profiler
