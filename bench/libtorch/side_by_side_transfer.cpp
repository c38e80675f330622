// Host <-> device copies, Kiln and LibTorch in one process, in turns: for 4 KiB, 1 MiB,
// 64 MiB and 256 MiB of float32, each way of copying (side_by_side_transfer.h: pageable,
// pinned, pinned non_blocking, pageable non_blocking, pin_memory() then non_blocking; back:
// into pageable, into an existing pinned tensor, non_blocking into a new pinned one) is
// timed for each library on the shared default stream. A batch queues `calls` copies
// back to back and then drains the device; it gives two figures:
//   host us/call  the host's time until the last copy call returned, per call: what a
//                 non_blocking copy gives back to the host;
//   GB/s          bytes moved / time until the device drained: the transfer rate.
// Each round times every variant of both libraries once; medians of the rounds. The raw
// cudaMemcpyAsync from pinned memory (synchronised) is the floor both libraries sit on.
//
// Kiln stages a pageable non_blocking copy through its pinned cache itself (a host pass
// overlapped with the DMA, slice by slice); PyTorch hands pageable memory to
// cudaMemcpyAsync, which stages it through the driver's own buffers. "pin_memory() then
// non_blocking" is the staging a PyTorch user writes by hand.
//
//   side_by_side_transfer [--rounds N]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "side_by_side_transfer.h"

namespace {

using kiln::bench::median;

using side_by_side::transfer::Copy;

struct Variant {
  Copy copy;
  const char* label;
  const char* key;  // for the RESULT lines
};

const Variant kVariants[] = {
    {Copy::ToPageable, "H2D pageable            x.to(cuda)", "h2d_pageable"},
    {Copy::ToPinned, "H2D pinned              p.to(cuda)", "h2d_pinned"},
    {Copy::ToPinnedAsync, "H2D pinned, non_block   p.to(cuda, true)", "h2d_pinned_nb"},
    {Copy::ToPageableAsync, "H2D pageable, non_block x.to(cuda, true)", "h2d_pageable_nb"},
    {Copy::ToPinMemoryAsync, "H2D staged by hand      x.pin_memory().to(cuda, true)", "h2d_pin_memory_nb"},
    {Copy::FromPageable, "D2H pageable            y.cpu()", "d2h_pageable"},
    {Copy::FromIntoPinned, "D2H into pinned         p.copy_(y)", "d2h_into_pinned"},
    {Copy::FromAsync, "D2H non_block           y.to(cpu, true)", "d2h_nb"},
};

struct Sample {
  double host_us;  // per call
  double gbps;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// `calls` calls of f queued back to back, then the device drained.
template <typename F>
Sample batch(F&& f, int calls, size_t bytes) {
  (void)cudaDeviceSynchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  const double host = seconds_since(t0);
  (void)cudaDeviceSynchronize();
  const double total = seconds_since(t0);
  return {host / calls * 1e6, static_cast<double>(bytes) * calls / total / 1e9};
}

int calls_for(size_t bytes) {
  if (bytes <= (size_t{4} << 10)) return 200;
  if (bytes <= (size_t{1} << 20)) return 50;
  if (bytes <= (size_t{64} << 20)) return 6;
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("side_by_side_transfer: no GPU visible\n");
    return 0;
  }
  cudaDeviceProp prop{};
  (void)cudaGetDeviceProperties(&prop, 0);
  std::printf("side_by_side_transfer: Kiln and LibTorch %s in turns, float32, %s; medians of %d rounds\n",
              side_by_side::transfer::torch_version_string(), prop.name, rounds);
  std::printf("host us/call: until the last call of a batch returned; GB/s: bytes / time until the device drained\n");
  for (const size_t bytes : {size_t{4} << 10, size_t{1} << 20, size_t{64} << 20, size_t{256} << 20}) {
    const int calls = calls_for(bytes);
    side_by_side::transfer::kiln_setup(bytes);
    side_by_side::transfer::torch_setup(bytes);
    // The floor: a raw synchronised copy from pinned memory.
    void *pinned = nullptr, *device = nullptr;
    if (cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault) != cudaSuccess || cudaMalloc(&device, bytes) != cudaSuccess) {
      std::printf("side_by_side_transfer: cannot allocate %zu bytes\n", bytes);
      return 1;
    }
    std::memset(pinned, 0, bytes);
    auto raw = [&] {
      (void)cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice, nullptr);
      (void)cudaStreamSynchronize(nullptr);
    };
    constexpr size_t kVariantCount = sizeof(kVariants) / sizeof(kVariants[0]);
    std::vector<double> raw_gbps;
    std::vector<std::vector<double>> host[2], rate[2];  // [library][variant] -> samples
    for (int lib = 0; lib < 2; ++lib) {
      host[lib].resize(kVariantCount);
      rate[lib].resize(kVariantCount);
    }
    auto run = [&](int lib, Copy c) {
      if (lib == 0) side_by_side::transfer::kiln_copy(c);
      else side_by_side::transfer::torch_copy(c);
    };
    // One warm-up batch of everything (caches fill, first-call set-up), then the rounds.
    for (int r = -1; r < rounds; ++r) {
      const Sample floor = batch(raw, calls, bytes);
      if (r >= 0) raw_gbps.push_back(floor.gbps);
      for (size_t v = 0; v < kVariantCount; ++v)
        for (int lib = 0; lib < 2; ++lib) {
          const Sample s = batch([&] { run(lib, kVariants[v].copy); }, calls, bytes);
          if (r < 0) continue;
          host[lib][v].push_back(s.host_us);
          rate[lib][v].push_back(s.gbps);
        }
    }
    if (cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("side_by_side_transfer: a copy failed\n");
      return 1;
    }
    (void)cudaFreeHost(pinned);
    (void)cudaFree(device);
    side_by_side::transfer::kiln_teardown();
    side_by_side::transfer::torch_teardown();

    const std::string size = bytes < (size_t{1} << 20) ? std::to_string(bytes >> 10) + " KiB"
                                                        : std::to_string(bytes >> 20) + " MiB";
    const std::string tag = bytes < (size_t{1} << 20) ? std::to_string(bytes >> 10) + "k"
                                                       : std::to_string(bytes >> 20) + "m";
    std::printf("\n%s, %d calls per batch; raw cudaMemcpyAsync from pinned memory: %.1f GB/s\n", size.c_str(), calls,
                median(raw_gbps));
    std::printf("%-56s %12s %12s %10s %10s\n", "copy", "Kiln us/call", "Torch us/call", "Kiln GB/s", "Torch GB/s");
    for (size_t v = 0; v < kVariantCount; ++v) {
      const double kh = median(host[0][v]), th = median(host[1][v]);
      const double kr = median(rate[0][v]), tr = median(rate[1][v]);
      std::printf("%-56s %12.2f %12.2f %10.2f %10.2f\n", kVariants[v].label, kh, th, kr, tr);
      const char* key = kVariants[v].key;
      std::printf("RESULT transfer_%s_%s_kiln_host_us %.3f\n", key, tag.c_str(), kh);
      std::printf("RESULT transfer_%s_%s_torch_host_us %.3f\n", key, tag.c_str(), th);
      std::printf("RESULT transfer_%s_%s_kiln_gbps %.3f\n", key, tag.c_str(), kr);
      std::printf("RESULT transfer_%s_%s_torch_gbps %.3f\n", key, tag.c_str(), tr);
    }
  }
  return 0;
}
