// Kiln's side of bench/cpu_vs_torch.py: times one CPU workload and prints its median, so the
// script can run the same shapes through PyTorch and print the ratios. The thread count is
// OMP_NUM_THREADS (the script sets it, and torch.set_num_threads to the same value).
//
//   cpu_linear linear M K N [--repeats 21] [--dtype float32|bfloat16|float16|float64]
//       linear(x[M, K], w[N, K], bias[N]), float32 unless --dtype says otherwise
//
// Prints one line: "median_ms <ms> threads <n> cpu_ms_per_call <ms>" (CPU time of all threads). Workloads are named so the MLP block
// (GELU) can be added as another name beside linear.
#include <kiln/kiln.h>

#include <cstring>
#include <ctime>

#include "bench/bench_util.h"

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

}  // namespace

int main(int argc, char** argv) {
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
