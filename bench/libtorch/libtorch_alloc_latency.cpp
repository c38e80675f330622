// LibTorch's CUDA caching allocator under the same load as bench/alloc_latency.cpp:
// c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete pairs served from its cache,
// 1 MiB and the same size mix, on one and two threads.
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <thread>
#include <vector>

namespace {
constexpr size_t kMix[] = {512, 4096, 65536, 300000, 1 << 20, 3 << 20, 12 << 20};
namespace alloc = c10::cuda::CUDACachingAllocator;

template <typename F>
double threaded_ns(int threads, int pairs, int rounds, F f) {
  std::vector<double> per_round;
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> times(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < pairs; ++i) f(i);
        times[t] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / pairs;
      });
    for (auto& th : pool) th.join();
    per_round.push_back(*std::max_element(times.begin(), times.end()));
  }
  std::sort(per_round.begin(), per_round.end());
  return per_round[per_round.size() / 2];
}
}  // namespace

int main() {
  torch::zeros({1}, torch::kCUDA);  // initialise CUDA and the allocator
  std::vector<void*> warm;
  for (int t = 0; t < 2; ++t)
    for (size_t s : kMix) warm.push_back(alloc::raw_alloc(s));
  for (void* p : warm) alloc::raw_delete(p);
  constexpr int kPairs = 200000, kRounds = 11;
  auto one_mib = [](int) { alloc::raw_delete(alloc::raw_alloc(1 << 20)); };
  auto mixed = [](int i) { alloc::raw_delete(alloc::raw_alloc(kMix[static_cast<size_t>(i) % std::size(kMix)])); };
  std::printf("libtorch_alloc_latency: raw_alloc+raw_delete pairs from LibTorch %s's cache\n", TORCH_VERSION);
  std::printf("%-34s %12s %12s\n", "pair", "1 thread", "2 threads");
  std::printf("%-34s %9.1f ns %9.1f ns\n", "1 MiB", threaded_ns(1, kPairs, kRounds, one_mib),
              threaded_ns(2, kPairs, kRounds, one_mib));
  std::printf("%-34s %9.1f ns %9.1f ns\n", "mix 512 B .. 12 MiB", threaded_ns(1, kPairs, kRounds, mixed),
              threaded_ns(2, kPairs, kRounds, mixed));
  return 0;
}
