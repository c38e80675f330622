// CPU GEMM throughput: kiln::matmul on float32 [n, n] @ [n, n] against Eigen called directly
// on the same buffers (row-major maps, the layout Kiln's tensors have), for n = 1024 and
// 4096. 2 n^3 FLOPs per product; median GFLOP/s over several runs after a warm-up.
//
//   cpu_gemm [--sizes 1024,4096] [--repeats 5]
#include <kiln/kiln.h>

#include <Eigen/Core>
#include <chrono>
#include <cstring>
#include <sstream>

#include "bench/bench_util.h"

using namespace kiln;

namespace {
template <typename F>
double median_seconds(int repeats, F&& f) {
  f();
  std::vector<double> s;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes = {1024, 4096};
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
      sizes.clear();
      std::stringstream ss(argv[++i]);
      for (std::string tok; std::getline(ss, tok, ',');) sizes.push_back(std::stoll(tok));
    } else if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::stoi(argv[++i]);
    }
  }
  fmt::print("cpu_gemm: float32 n x n x n, {} ({} Eigen threads)\n", bench::machine_description(), Eigen::nbThreads());
  fmt::print("median of {} runs after one warm-up\n\n", repeats);
  fmt::print("{:>6}  {:>14}  {:>14}  {:>10}\n", "n", "Kiln GFLOP/s", "Eigen GFLOP/s", "Kiln/Eigen");
  manual_seed(0);
  for (int64_t n : sizes) {
    const Tensor a = randn({n, n}), b = randn({n, n});
    Tensor c;
    const double kiln_s = median_seconds(repeats, [&] { c = matmul(a, b); });

    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const RowMajor> ea(a.data_ptr<float>(), n, n), eb(b.data_ptr<float>(), n, n);
    RowMajor ec(n, n);
    const double eigen_s = median_seconds(repeats, [&] { ec.noalias() = ea * eb; });

    // The two results must agree, or the comparison means nothing.
    const float* kc = c.data_ptr<float>();
    double max_diff = 0;
    for (int64_t i = 0; i < n * n; ++i) max_diff = std::max(max_diff, static_cast<double>(std::abs(kc[i] - ec.data()[i])));
    const double flops = 2.0 * static_cast<double>(n) * n * n;
    fmt::print("{:>6}  {:>14.1f}  {:>14.1f}  {:>10.3f}   (max |diff| {:.2e})\n", n, flops / kiln_s / 1e9,
               flops / eigen_s / 1e9, eigen_s / kiln_s, max_diff);
  }
  return 0;
}
