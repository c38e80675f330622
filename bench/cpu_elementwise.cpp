// Kiln's CPU elementwise ops and the MLP block they sit in, timed for the side-by-side with
// PyTorch (bench/cpu_elementwise_vs_torch.py runs this binary and PyTorch in one script).
// Rows: gelu (exact erf and tanh form), exp, tanh, sigmoid over float32 [64, 4096] and
// [1024, 4096], and nn::MLP({1024, 4096, 1024}, GELU) forward at batch 64 and 1024; each
// row's median over several turns, printed as one machine-readable line:
//
//   row <name> <shape> <threads> <median_us>
//
// Under no_grad, so the MLP times the forward alone, as PyTorch's under torch.no_grad().
//
//   cpu_elementwise [--threads N] [--repeats R] [--only NAME]
#include <kiln/kiln.h>

#include <cstring>
#include <functional>
#include <string>

#include "bench/bench_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace kiln;

namespace {

// Calls per timed batch, so a batch lasts well over a millisecond.
int calls_for(int64_t numel) { return numel >= (int64_t{1} << 22) ? 3 : 20; }

void time_row(const std::string& name, const std::string& shape, int threads, int repeats, int calls,
              const std::function<void()>& f) {
  bench::Turns turns;
  turns.add(name, calls, f);
  turns.run(repeats);
  fmt::print("row {} {} {} {:.1f}\n", name, shape, threads, turns.median_ns(name) / 1e3);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, repeats = 7;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::stoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::stoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      fmt::print(stderr, "usage: cpu_elementwise [--threads N] [--repeats R] [--only NAME]\n");
      return 2;
    }
  }
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads(threads);
  threads = omp_get_max_threads();
#else
  threads = 1;
#endif
  fmt::print("# cpu_elementwise: {}, {} OpenMP threads, median of {} turns\n", bench::machine_description(), threads,
             repeats);
  const NoGradGuard no_grad;
  manual_seed(0);

  struct Unary {
    const char* name;
    std::function<Tensor(const Tensor&)> op;
  };
  const Unary unaries[] = {
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
  };
  for (int64_t rows : {int64_t{64}, int64_t{1024}}) {
    const Tensor x = randn({rows, 4096});
    for (const Unary& u : unaries) {
      if (!only.empty() && only != u.name) continue;
      Tensor y;
      time_row(u.name, fmt::format("{}x4096", rows), threads, repeats, calls_for(x.numel()), [&] { y = u.op(x); });
    }
  }
  if (only.empty() || only == "mlp") {
    nn::MLP mlp({1024, 4096, 1024}, nn::Activation::GELU);
    for (int64_t batch : {int64_t{64}, int64_t{1024}}) {
      const Tensor x = randn({batch, 1024});
      Tensor y;
      time_row("mlp", fmt::format("{}x1024", batch), threads, repeats, batch >= 1024 ? 2 : 10, [&] { y = mlp(x); });
    }
  }
  return 0;
}
