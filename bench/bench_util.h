// Timing helpers for the benchmarks: variants timed in turns (medians of batches), a
// compiler barrier, and a line describing the machine.
#pragma once

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace kiln::bench {

/// Keeps the compiler from discarding a value or hoisting the computation of it.
template <typename T>
inline void do_not_optimize(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

/// The median of `v` (for an even count, the upper of the two middle values).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Times several variants of the same work taking turns: each round runs every variant's
/// batch once, so drift on a shared machine (other tenants, clock changes) hits all of them
/// alike. Reports the median time per call of each variant.
class Turns {
 public:
  /// Adds a variant; `f` is one call, run `calls` times per batch. `before` and `after`
  /// (optional) run untimed around each of its batches, e.g. to start and stop a profiler.
  template <typename F>
  void add(std::string name, int calls, F f, std::function<void()> before = {}, std::function<void()> after = {}) {
    variants_.push_back({std::move(name), calls, std::function<void()>(std::move(f)), std::move(before), std::move(after), {}});
  }
  /// Runs one warm-up batch of each variant, then `rounds` timed rounds; `between` (if
  /// given) runs untimed after every batch, e.g. to wait for a GPU to drain its queue.
  void run(int rounds, const std::function<void()>& between = {}) {
    for (auto& v : variants_) {
      batch(v);
      if (between) between();
    }
    for (int r = 0; r < rounds; ++r)
      for (auto& v : variants_) {
        v.samples.push_back(batch(v));
        if (between) between();
      }
  }
  /// Median nanoseconds per call of variant `name`.
  double median_ns(const std::string& name) const {
    for (const auto& v : variants_) {
      if (v.name == name) return median(v.samples);
    }
    return 0.0;
  }

 private:
  struct Variant {
    std::string name;
    int calls;
    std::function<void()> f;
    std::function<void()> before, after;
    std::vector<double> samples;
  };
  static double batch(Variant& v) {
    if (v.before) v.before();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < v.calls; ++i) v.f();
    const auto t1 = std::chrono::steady_clock::now();
    if (v.after) v.after();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / v.calls;
  }
  std::vector<Variant> variants_;
};

/// "model name" from /proc/cpuinfo plus the hardware thread count.
inline std::string machine_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
}

}  // namespace kiln::bench
