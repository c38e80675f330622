// The article's scenario, on the CPU: nn::Linear(1024, 4096) on a [64, 1024] input, then an
// MLP block (1024 -> 4096 -> 1024 with GELU). Prints the shapes, a checksum and the median
// wall time per forward. `make demo` runs this.
//
//   linear_mlp [--iterations N]
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

using namespace kiln;

namespace {

// Median wall time of `iterations` calls of f (after one warm-up call), in milliseconds.
template <typename F>
double median_ms(int iterations, F&& f) {
  f();
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void report(const char* what, const Tensor& x, const Tensor& y, double ms, double flops) {
  fmt::print("{:<32} input {} -> output {}  checksum {:+.6f}  {:8.3f} ms/forward  {:6.1f} GFLOP/s\n", what,
             shape_str(x.sizes()), shape_str(y.sizes()), sum(y).item<double>(), ms, flops / (ms * 1e6));
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 10;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) iterations = std::max(1, std::stoi(argv[++i]));
  }
  try {
    const Device dev = Device::cpu();
    manual_seed(0);
    fmt::print("Kiln {} — the article's Linear and MLP forward on {}\n\n", "0.1", dev.str());

    nn::Linear layer(1024, 4096);
    layer.to(dev);
    const Tensor x = randn({64, 1024}, dev);
    Tensor y;
    const double linear_ms = median_ms(iterations, [&] { y = layer(x); });
    report("nn::Linear(1024, 4096)", x, y, linear_ms, 2.0 * 64 * 1024 * 4096);

    nn::MLP mlp({.sizes = {1024, 4096, 1024}, .activation = nn::Activation::GELU});
    mlp.to(dev);
    Tensor z;
    const double mlp_ms = median_ms(iterations, [&] { z = mlp(x); });
    report("nn::MLP({1024, 4096, 1024}) GELU", x, z, mlp_ms, 2.0 * 2 * 64 * 1024 * 4096);

    fmt::print("\n{}\n", mlp.repr());
    fmt::print("\nmedian of {} runs after one warm-up; checksum = sum of all output elements\n", iterations);
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
