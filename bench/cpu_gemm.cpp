// CPU GEMM throughput: kiln::matmul on float32 [n, n] @ [n, n] against Eigen called directly
// on the same buffers (row-major maps, the layout Kiln's tensors have), for n = 1024 and
// 4096. 2 n^3 FLOPs per product; median GFLOP/s over several runs after a warm-up.
// Eigen is timed twice: writing into a preallocated result (the floor) and allocating a
// fresh result per product, which is what matmul does (it returns a new tensor).
//
//   cpu_gemm [--sizes 1024,4096] [--repeats 5]
#include <kiln/kiln.h>

#include <Eigen/Core>
#include <cstring>
#include <sstream>

#include "bench/bench_util.h"

using namespace kiln;


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
  fmt::print("median of {} runs after one warm-up, the three variants taking turns\n\n", repeats);
  fmt::print("{:>6}  {:>13}  {:>18}  {:>18}  {:>12}  {:>12}\n", "n", "Kiln GFLOP/s", "Eigen prealloc", "Eigen alloc",
             "Kiln/prealloc", "Kiln/alloc");
  manual_seed(0);
  for (int64_t n : sizes) {
    const Tensor a = randn({n, n}), b = randn({n, n});
    Tensor c;
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const RowMajor> ea(a.data_ptr<float>(), n, n), eb(b.data_ptr<float>(), n, n);
    RowMajor ec(n, n);
    auto run_kiln = [&] { c = matmul(a, b); };
    auto run_eigen = [&] { ec.noalias() = ea * eb; };
    auto run_eigen_alloc = [&] {
      RowMajor fresh(n, n);
      fresh.noalias() = ea * eb;
      bench::do_not_optimize(fresh.data());
    };
    bench::Turns turns;
    turns.add("kiln", 1, run_kiln);
    turns.add("eigen", 1, run_eigen);
    turns.add("eigen_alloc", 1, run_eigen_alloc);
    turns.run(repeats);
    const double kiln_s = turns.median_ns("kiln") * 1e-9, eigen_s = turns.median_ns("eigen") * 1e-9;
    const double eigen_alloc_s = turns.median_ns("eigen_alloc") * 1e-9;

    // The two results must agree, or the comparison means nothing.
    const float* kc = c.data_ptr<float>();
    double max_diff = 0;
    for (int64_t i = 0; i < n * n; ++i) max_diff = std::max(max_diff, static_cast<double>(std::abs(kc[i] - ec.data()[i])));
    const double flops = 2.0 * static_cast<double>(n) * n * n;
    fmt::print("{:>6}  {:>13.1f}  {:>18.1f}  {:>18.1f}  {:>12.3f}  {:>12.3f}   (max |diff| {:.2e})\n", n,
               flops / kiln_s / 1e9, flops / eigen_s / 1e9, flops / eigen_alloc_s / 1e9, eigen_s / kiln_s,
               eigen_alloc_s / kiln_s, max_diff);
  }
  return 0;
}
