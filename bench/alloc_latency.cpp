// Latency of an allocate + free pair served from Kiln's cache: 1 MiB, and a mix of sizes
// (512 B to 12 MiB), on one thread and on two threads at once. The cache is warmed first,
// so every pair is a cache hit; the figure is what a tensor's birth and death cost in
// memory management. On a GPU machine, also one cudaMalloc + cudaFree of 1 MiB for scale.
//
//   alloc_latency [--device cpu|cuda]
#include <kiln/kiln.h>

#include <cstring>
#include <thread>

#include "bench/bench_util.h"

#ifdef KILN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

using namespace kiln;

namespace {
constexpr size_t kMix[] = {512, 4096, 65536, 300000, 1 << 20, 3 << 20, 12 << 20};

// ns per pair for `threads` threads each running `pairs` pairs of f(i) concurrently
// (median over rounds of the slowest thread's time per pair).
template <typename F>
double threaded_ns(int threads, int pairs, int rounds, F f) {
  std::vector<double> per_round;
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> times(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < pairs; ++i) f(i);
        times[static_cast<size_t>(t)] =
            std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / pairs;
      });
    }
    for (auto& th : pool) th.join();
    per_round.push_back(*std::max_element(times.begin(), times.end()));
  }
  std::sort(per_round.begin(), per_round.end());
  return per_round[per_round.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  Device device = Device::cpu();
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = std::strcmp(argv[++i], "cuda") == 0 ? Device::cuda(0) : Device::cpu();
  try {
    CachingAllocator& a = caching_allocator(device, "alloc_latency");
    // Warm the cache: one block of every size per thread, so every timed pair is a hit.
    {
      std::vector<void*> warm;
      for (int t = 0; t < 2; ++t)
        for (size_t s : kMix) warm.push_back(a.allocate(s));
      for (void* p : warm) a.free(p);
    }
    auto one_mib = [&](int) { a.free(a.allocate(1 << 20)); };
    auto mixed = [&](int i) { a.free(a.allocate(kMix[static_cast<size_t>(i) % std::size(kMix)])); };
    constexpr int kPairs = 200000, kRounds = 11;
    bench::Turns turns;
    turns.add("1mib", kPairs, [&] { one_mib(0); });
    int k = 0;
    turns.add("mix", kPairs, [&] { mixed(k++); });
    turns.run(kRounds);
    const double t2_1mib = threaded_ns(2, kPairs, kRounds, one_mib);
    const double t2_mix = threaded_ns(2, kPairs, kRounds, mixed);

    fmt::print("alloc_latency: allocate+free pairs from Kiln's cache on {} ({})\n", device.str(),
               bench::machine_description());
    fmt::print("{:<34} {:>12} {:>12}\n", "pair", "1 thread", "2 threads");
    fmt::print("{:<34} {:>9.1f} ns {:>9.1f} ns\n", "1 MiB", turns.median_ns("1mib"), t2_1mib);
    fmt::print("{:<34} {:>9.1f} ns {:>9.1f} ns\n", "mix 512 B .. 12 MiB", turns.median_ns("mix"), t2_mix);
#ifdef KILN_WITH_CUDA
    if (device.is_cuda()) {
      bench::Turns raw;
      raw.add("cuda", 200, [] {
        void* p = nullptr;
        if (cudaMalloc(&p, 1 << 20) == cudaSuccess) cudaFree(p);
      });
      raw.run(5);
      fmt::print("{:<34} {:>9.1f} ns\n", "cudaMalloc + cudaFree, 1 MiB", raw.median_ns("cuda"));
    }
#endif
  } catch (const std::exception& e) {
    fmt::print(stderr, "alloc_latency: {}\n", e.what());
    return 1;
  }
  return 0;
}
