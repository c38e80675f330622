// Timing helpers for the benchmarks: steady-clock medians over repeated batches, a compiler
// barrier, and a line describing the machine.
#pragma once

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace kiln::bench {

/// Keeps the compiler from discarding a value or hoisting the computation of it.
template <typename T>
inline void do_not_optimize(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

/// Median over `repeats` batches of the time per call of f, in nanoseconds (each batch runs
/// f `calls` times; one unmeasured batch warms up first).
template <typename F>
double median_ns_per_call(int repeats, int calls, F&& f) {
  for (int i = 0; i < calls; ++i) f();
  std::vector<double> per_call;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    const auto t1 = std::chrono::steady_clock::now();
    per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

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
