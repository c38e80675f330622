// Kiln's side of bench/cpu_vs_torch.py: times one CPU workload and prints its median, so the
// script can run the same shapes through PyTorch and print the ratios. The thread count is
// OMP_NUM_THREADS (the script sets it, and torch.set_num_threads to the same value).
//
//   cpu_linear linear M K N [--repeats 21] [--dtype float32|bfloat16|float16|float64]
//       linear(x[M, K], w[N, K], bias[N]), float32 unless --dtype says otherwise
//
// Prints one line: "median_ms <ms> threads <n> cpu_ms_per_call <ms>" (CPU time of all
// threads). The GEMM tile grid's own modes (bench/cpu_linear_grids.h):
//
//   cpu_linear calibrate [--repeats 7]          tile calls against the cost model, one thread
//   cpu_linear grids M K N [--layout nt|nn|tn] [--repeats 11]   grids of one product
//   cpu_linear fork [--repeats 21]              an empty parallel region's cost
#include <kiln/kiln.h>

#include <cstring>
#include <ctime>

#include "bench/bench_util.h"
#include "bench/cpu_linear_grids.h"

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace kiln;

namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The value of option `name` among argv[from..], or `fallback`.
std::string option(int argc, char** argv, int from, const char* name, const std::string& fallback) {
  for (int i = from; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

/// The benchmark itself; main() turns its errors into a message and exit status 2.
int run(int argc, char** argv) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  if (mode == "calibrate") {
    bench::calibrate_tiles(std::stoi(option(argc, argv, 2, "--repeats", "7")));
    return 0;
  }
  if (mode == "fork") {
    bench::time_fork(std::stoi(option(argc, argv, 2, "--repeats", "21")));
    return 0;
  }
  if (mode == "grids") {
    KILN_CHECK(argc >= 5, "cpu_linear: usage: cpu_linear grids M K N [--layout nt|nn|tn] [--repeats r], got {} argument(s)",
               argc - 1);
    bench::compare_grids(std::stoll(argv[2]), std::stoll(argv[3]), std::stoll(argv[4]),
                         option(argc, argv, 5, "--layout", "nt"), std::stoi(option(argc, argv, 5, "--repeats", "11")));
    return 0;
  }
  KILN_CHECK(argc >= 5 && std::strcmp(argv[1], "linear") == 0,
             "cpu_linear: usage: cpu_linear linear M K N [--repeats r], got {} argument(s)", argc - 1);
  const int64_t m = std::stoll(argv[2]), k = std::stoll(argv[3]), n = std::stoll(argv[4]);
  int repeats = 21;
  DType dtype = kFloat32;
  for (int i = 5; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) repeats = std::stoi(argv[++i]);
    else if (std::strcmp(argv[i], "--dtype") == 0 && i + 1 < argc) {
      const std::string name = argv[++i];
      bool found = false;
      for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16})
        if (name == dtype_name(d)) dtype = d, found = true;
      KILN_CHECK(found, "cpu_linear: --dtype wants float32, float64, float16 or bfloat16, got '{}'", name);
    }
  }
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  manual_seed(0);
  const Tensor x = randn({m, k}).to(dtype), w = randn({n, k}).to(dtype), bias = randn({n}).to(dtype);
  Tensor out;
  bench::Turns turns;
  turns.add("linear", 1, [&] { out = linear(x, w, bias); });
  // CPU time of all the process's threads over the warm-up and the timed calls: on a shared
  // machine, less disturbed by other tenants than wall time (descheduled time is not counted).
  const double cpu0 = process_cpu_seconds();
  turns.run(repeats);
  const double cpu_ms = (process_cpu_seconds() - cpu0) * 1e3 / (repeats + 1);
  fmt::print("median_ms {:.4f} threads {} cpu_ms_per_call {:.4f}\n", turns.median_ns("linear") * 1e-6, threads, cpu_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a usage or library error: say it, no abort
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
}
