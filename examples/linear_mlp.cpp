// The article's scenario: nn::Linear(1024, 4096) on a [64, 1024] input, then an MLP block
// (1024 -> 4096 -> 1024 with GELU). Prints the shapes, a checksum and the median wall time
// per forward. `make demo` runs this. It runs on the GPU when one is visible, else on the
// CPU; --device chooses. On the GPU each timed forward ends with cuda::synchronize, so
// ms/forward is the time until the result exists, not the time to queue the kernels.
//
//   linear_mlp [--device cpu|cuda] [--iterations N]
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace kiln;

namespace {

// Median wall time of `iterations` calls of f (after one warm-up call), in milliseconds.
// On a GPU the device is idle when the clock starts and each call is waited for.
template <typename F>
double median_ms(Device dev, int iterations, F&& f) {
  auto wait = [&] {
    if (dev.is_cuda()) cuda::synchronize(dev);
  };
  f();
  wait();
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    wait();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int usage(const char* message) {
  fmt::print(stderr, "linear_mlp: {}\nusage: linear_mlp [--device cpu|cuda] [--iterations N]\n", message);
  return 2;
}

void report(const char* what, const Tensor& x, const Tensor& y, double ms, double flops) {
  fmt::print("{:<32} input {} -> output {}  checksum {:+.6f}  {:8.3f} ms/forward  {:6.1f} GFLOP/s\n", what,
             shape_str(x.sizes()), shape_str(y.sizes()), sum(y).item<double>(), ms, flops / (ms * 1e6));
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 10;
  std::string device_name = cuda::is_available() ? "cuda" : "cpu";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device_name = argv[++i];
    } else {
      return usage(fmt::format("unknown argument \"{}\"", argv[i]).c_str());
    }
  }
  if (device_name != "cpu" && device_name != "cuda")
    return usage(fmt::format("--device must be cpu or cuda, got \"{}\"", device_name).c_str());
  if (device_name == "cuda" && !cuda::is_available())
    return usage(cuda::is_built() ? "--device cuda, but no GPU is visible"
                                  : "--device cuda, but this Kiln was built without CUDA (KILN_CUDA=OFF or no nvcc)");
  try {
    const Device dev = device_name == "cuda" ? Device::cuda(0) : Device::cpu();
    manual_seed(0);
    fmt::print("Kiln {} — the article's Linear and MLP forward on {}\n\n", "0.1", dev.str());

    nn::Linear layer(1024, 4096);
    layer.to(dev);
    const Tensor x = randn({64, 1024}, dev);
    Tensor y;
    const double linear_ms = median_ms(dev, iterations, [&] { y = layer(x); });
    report("nn::Linear(1024, 4096)", x, y, linear_ms, 2.0 * 64 * 1024 * 4096);

    nn::MLP mlp({1024, 4096, 1024}, nn::Activation::GELU);
    mlp.to(dev);
    Tensor z;
    const double mlp_ms = median_ms(dev, iterations, [&] { z = mlp(x); });
    report("nn::MLP({1024, 4096, 1024}) GELU", x, z, mlp_ms, 2.0 * 2 * 64 * 1024 * 4096);

    fmt::print("\n{}\n", mlp.repr());
    fmt::print("\nmedian of {} runs after one warm-up{}; checksum = sum of all output elements\n", iterations,
               dev.is_cuda() ? ", each ended by cuda::synchronize" : "");
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
