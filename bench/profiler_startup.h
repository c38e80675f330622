// What a profile costs around its ops, measured one way for Kiln's profiler
// (profiler_startup.cpp) and for LibTorch's Kineto (libtorch/libtorch_profiler_overhead.cpp
// --startup), in one process each (CUPTI's state is process-wide):
// - a plain 1-element op (host us per call, batches of 200, the device drained between
//   batches) before any profile, right after each profile's stop(), and once more after a
//   pause of kSettleMs (longer than any delayed teardown);
// - start() and stop() (ms): the first of the process and the median of the later ones;
// - within each profile, the first small op and the first large op (a linear layer's GEMM,
//   another kernel module) against the median of the later identical ones, timed on the
//   host, and as the profiler itself reports them (its event durations).
// Header-only and C++17 so that the LibTorch project builds it too.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kiln::bench {

/// The calls the protocol makes; each library fills them in.
struct StartupHooks {
  std::function<void()> start, stop;  ///< one profile recording CPU and CUDA activity
  std::function<void()> small_op;     ///< a 1-element add, result discarded
  std::function<void()> large_op;     ///< a linear layer, result discarded
  std::function<void()> drain;        ///< waits for the device
  /// After stop(): the profiler's durations (us) of the small op's events and of the large
  /// op's GEMM events, in order.
  std::function<std::pair<std::vector<double>, std::vector<double>>()> profiled_us;
};

/// The protocol's figures (us unless named ms; "ratio" is first / median of the later ones).
struct StartupResult {
  double plain_before_us = 0, plain_after_stop_us = 0, plain_settled_us = 0;
  double first_start_ms = 0, later_start_ms = 0, first_stop_ms = 0, later_stop_ms = 0;
  double small_first_ratio = 0, large_first_ratio = 0;        // host time per call
  double small_profiled_ratio = 0, large_profiled_ratio = 0;  // the profiler's own durations
  double small_steady_us = 0, large_steady_us = 0, small_first_us = 0, large_first_us = 0;
};

inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The pause before the "settled" plain-op figure: longer than any delayed teardown tried.
constexpr int kSettleMs = 2500;

/// Runs the protocol: `cycles` profiles, each of 1 + `ops_per_profile` small and large ops.
inline StartupResult run_startup(const StartupHooks& h, int cycles = 30, int ops_per_profile = 20) {
  using clock = std::chrono::steady_clock;
  auto us_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(clock::now() - t0).count();
  };
  constexpr int kBatch = 200, kBatches = 101;
  auto plain_batches = [&](int batches) {
    std::vector<double> per_call;
    for (int b = 0; b < batches; ++b) {
      const auto t0 = clock::now();
      for (int i = 0; i < kBatch; ++i) h.small_op();
      per_call.push_back(us_since(t0) / kBatch);
      h.drain();
    }
    return median_of(per_call);
  };
  // Warm-up: the CUDA context, both kernels' modules, the libraries' first-call costs.
  for (int i = 0; i < 50; ++i) {
    h.small_op();
    h.large_op();
  }
  h.drain();
  StartupResult r;
  r.plain_before_us = plain_batches(kBatches);

  std::vector<double> starts, stops, after_stop, small_first, large_first, small_steady, large_steady;
  std::vector<double> small_profiled, large_profiled;
  for (int c = 0; c < cycles; ++c) {
    h.drain();
    auto t0 = clock::now();
    h.start();
    starts.push_back(us_since(t0) / 1e3);
    t0 = clock::now();
    h.small_op();
    small_first.push_back(us_since(t0));
    t0 = clock::now();
    h.large_op();
    large_first.push_back(us_since(t0));
    std::vector<double> small, large;
    for (int i = 0; i < ops_per_profile; ++i) {
      t0 = clock::now();
      h.small_op();
      small.push_back(us_since(t0));
      t0 = clock::now();
      h.large_op();
      large.push_back(us_since(t0));
    }
    small_steady.push_back(median_of(small));
    large_steady.push_back(median_of(large));
    h.drain();
    t0 = clock::now();
    h.stop();
    stops.push_back(us_since(t0) / 1e3);
    const auto [small_us, large_us] = h.profiled_us();
    if (small_us.size() > 1)
      small_profiled.push_back(small_us[0] / median_of(std::vector<double>(small_us.begin() + 1, small_us.end())));
    if (large_us.size() > 1)
      large_profiled.push_back(large_us[0] / median_of(std::vector<double>(large_us.begin() + 1, large_us.end())));
    after_stop.push_back(plain_batches(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(kSettleMs));
  r.plain_settled_us = plain_batches(kBatches);
  r.plain_after_stop_us = median_of(after_stop);
  r.first_start_ms = starts.front();
  r.later_start_ms = median_of(std::vector<double>(starts.begin() + 1, starts.end()));
  r.first_stop_ms = stops.front();
  r.later_stop_ms = median_of(std::vector<double>(stops.begin() + 1, stops.end()));
  r.small_first_us = median_of(small_first);
  r.large_first_us = median_of(large_first);
  r.small_steady_us = median_of(small_steady);
  r.large_steady_us = median_of(large_steady);
  r.small_first_ratio = r.small_first_us / r.small_steady_us;
  r.large_first_ratio = r.large_first_us / r.large_steady_us;
  r.small_profiled_ratio = median_of(small_profiled);
  r.large_profiled_ratio = median_of(large_profiled);
  return r;
}

/// One line "ROW <variant> | ..." with the figures of `r` (scripts/profiler_startup_experiment.sh
/// prints the column heads), a DETAIL line, and "RESULT <result_prefix>_<figure> <value>" lines
/// for scripts/gpu_bench_summary.py.
inline void print_startup_row(const std::string& variant, const StartupResult& r, const std::string& result_prefix) {
  std::printf("ROW %-40s | %9.3f %10.3f %7.3f      | %9.3f %6.3f %9.3f %6.3f     | %5.1fx (%5.1fx)  %5.1fx (%5.1fx)\n",
              variant.c_str(), r.plain_before_us, r.plain_after_stop_us, r.plain_settled_us, r.first_start_ms,
              r.later_start_ms, r.first_stop_ms, r.later_stop_ms, r.small_first_ratio, r.small_profiled_ratio,
              r.large_first_ratio, r.large_profiled_ratio);
  std::printf("DETAIL %s: first add %.2f us vs steady %.2f; first gemm %.2f us vs steady %.2f\n", variant.c_str(),
              r.small_first_us, r.small_steady_us, r.large_first_us, r.large_steady_us);
  const std::pair<const char*, double> results[] = {
      {"plain_before_us", r.plain_before_us},
      {"plain_after_stop_us", r.plain_after_stop_us},
      {"plain_settled_us", r.plain_settled_us},
      {"start_first_ms", r.first_start_ms},
      {"start_ms", r.later_start_ms},
      {"stop_ms", r.later_stop_ms},
      {"first_add_ratio", r.small_profiled_ratio},
      {"first_gemm_ratio", r.large_profiled_ratio},
      {"first_add_host_ratio", r.small_first_ratio},
      {"first_gemm_host_ratio", r.large_first_ratio},
  };
  for (const auto& [name, value] : results) std::printf("RESULT %s_%s %.3f\n", result_prefix.c_str(), name, value);
}

}  // namespace kiln::bench
