// Kiln's CPU elementwise ops and the MLP block they sit in, timed for the side-by-side with
// PyTorch (bench/cpu_elementwise_vs_torch.py runs this binary and PyTorch in one script).
// Rows: gelu (exact erf and tanh form), exp, tanh, sigmoid over float32 [64, 4096] and
// [1024, 4096], and nn::MLP({1024, 4096, 1024}, GELU) forward at batch 64 and 1024; "wide"
// rows repeat both GELUs and the MLP with inputs whose pre-activations have a standard
// deviation of ~32 (--only wide runs just those); each
// row's median over several turns, printed as one machine-readable line:
//
//   row <name> <shape> <threads> <median_us>
//
// Under no_grad, so the MLP times the forward alone, as PyTorch's under torch.no_grad().
//
//   cpu_elementwise [--threads N] [--repeats R] [--only NAME]
//
// --only grain prints instead what the parallel grains of ops/cpu/parallel.h rest on: the
// cost of an OpenMP fork/join and the per-element costs of add and gelu on one thread.
// --only mlp_profile prints the profiler's table (by op and shape) over the MLP rows' forwards.
// The rows discard each result (as the PyTorch side's `op(x)` does), so one output buffer is
// reused call after call on both sides.
// --only stream is a probe for the large arrays (float [1024, 4096], 16 MiB each way): the
// library's gelu and exp against a copy (clone: the memory traffic alone) and against the
// same packet formula written here with non-temporal stores (no read-for-ownership of the
// output's lines), on the same threads and chunks; AVX-512 builds only.
#include <kiln/kiln.h>

#include <cstring>
#include <functional>
#include <string>

#include "bench/bench_util.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/vec_math.h"

#ifdef EIGEN_VECTORIZE_AVX512
#include <immintrin.h>
#endif

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

#ifdef EIGEN_VECTORIZE_AVX512
// y = F(x) over dense float arrays, the library's packet formula and chunks, but each packet
// stored with a non-temporal store (the probe's variant; y must be 64-byte aligned).
template <typename F>
void apply_streaming(const float* x, float* y, int64_t n) {
  cpu::parallel_for(n, cpu::kGrainTranscendental, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + 16 <= end; i += 16)
      _mm512_stream_ps(y + i, cpu::vec::VecUnary<float, F>::packet(_mm512_loadu_ps(x + i)));
    if (i < end) cpu::vec::apply_unary<float, F>(x + i, y + i, end - i);
    _mm_sfence();
  }, 16);
}
#endif

// The --only stream probe (see the top of the file).
void stream_probe(int threads, int repeats) {
  const Tensor x = randn({1024, 4096});
  Tensor y;
  time_row("copy", "1024x4096", threads, repeats, 3, [&] { y = x.clone(); });
  time_row("gelu", "1024x4096", threads, repeats, 3, [&] { y = gelu(x); });
  time_row("exp", "1024x4096", threads, repeats, 3, [&] { y = exp(x); });
#ifdef EIGEN_VECTORIZE_AVX512
  const auto streamed = [&](auto formula) {
    using F = decltype(formula);
    y = empty_like(x);
    apply_streaming<F>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  };
  time_row("gelu_stream", "1024x4096", threads, repeats, 3, [&] { streamed(math::Gelu{}); });
  time_row("exp_stream", "1024x4096", threads, repeats, 3, [&] { streamed(math::Exp{}); });
#else
  fmt::print("stream: not an AVX-512 build, no non-temporal rows\n");
#endif
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
  if (only == "stream") {
    stream_probe(threads, repeats);
    return 0;
  }

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
      time_row(u.name, fmt::format("{}x4096", rows), threads, repeats, calls_for(x.numel()), [&] { (void)u.op(x); });
    }
  }
  // Both GELUs over inputs of standard deviation 32: a third of them below -13, where the
  // results are below float's smallest normal (what subnormals would cost, BENCHMARKS.md 9).
  if (only.empty() || only == "wide") {
    const Tensor x = randn({1024, 4096}) * 32.0;
    for (const Unary& u : {unaries[0], unaries[1]})
      time_row(fmt::format("{}_wide", u.name), "1024x4096", threads, repeats, 3, [&] { (void)u.op(x); });
  }
  if (only == "grain") {
    // Where splitting pays: an empty OpenMP fork/join against the per-element cost of a
    // cheap (add) and a transcendental (gelu) op on one thread, timed below the grains. Two
    // threads save half the work, so they pay from n = 2 * fork_join / per_element.
    double fork_join_us = 0;
#ifdef _OPENMP
    {
      bench::Turns turns;
      turns.add("fork_join", 2000, [] {
        int sink = 0;
#pragma omp parallel
        {
          bench::do_not_optimize(sink);
        }
      });
      turns.run(repeats);
      fork_join_us = turns.median_ns("fork_join") / 1e3;
    }
#endif
#ifdef _OPENMP
    omp_set_num_threads(1);  // the per-element costs on one thread
#endif
    const Tensor a = randn({16384}), b = randn({16384});
    Tensor y;
    bench::Turns turns;
    turns.add("add", 200, [&] { y = a + b; });
    turns.add("gelu", 200, [&] { y = gelu(a); });
    turns.add("empty_add", 200, [&] { y = a.narrow(0, 0, 1) + b.narrow(0, 0, 1); });
    turns.run(repeats);
    const double call_us = turns.median_ns("empty_add") / 1e3;
    const double add_ns = (turns.median_ns("add") - turns.median_ns("empty_add")) / 16383;
    const double gelu_ns = (turns.median_ns("gelu") - turns.median_ns("empty_add")) / 16383;
    fmt::print("grain: fork/join {:.2f} us ({} threads), op call {:.2f} us, add {:.3f} ns/element, gelu {:.3f} ns/element\n",
               fork_join_us, threads, call_us, add_ns, gelu_ns);
    if (fork_join_us > 0)
      fmt::print("grain: 2 threads pay from about {:.0f} elements (add), {:.0f} (gelu)\n",
                 2 * fork_join_us * 1e3 / add_ns, 2 * fork_join_us * 1e3 / gelu_ns);
    return 0;
  }
  if (only.empty() || only == "mlp" || only == "wide") {
    nn::MLP mlp({1024, 4096, 1024}, nn::Activation::GELU);
    for (int64_t batch : {int64_t{64}, int64_t{1024}}) {
      const Tensor x = randn({batch, 1024});
      if (only != "wide")
        time_row("mlp", fmt::format("{}x1024", batch), threads, repeats, batch >= 1024 ? 2 : 10, [&] { (void)mlp(x); });
      // The input scaled by 64: pre-activations of standard deviation ~37 (nn::Linear's init).
      const Tensor wide = x * 64.0;
      time_row("mlp_wide", fmt::format("{}x1024", batch), threads, repeats, batch >= 1024 ? 2 : 10,
               [&] { (void)mlp(wide); });
    }
  }
  if (only == "mlp_profile") {
    // Where the MLP row's time goes: the profiler's table over `repeats` forwards per batch.
    nn::MLP mlp({1024, 4096, 1024}, nn::Activation::GELU);
    for (int64_t batch : {int64_t{64}, int64_t{1024}}) {
      const Tensor x = randn({batch, 1024});
      (void)mlp(x);  // warm-up
      profiler::Profiler prof({.record_shapes = true});
      {
        profiler::ProfileGuard recording(prof);
        for (int i = 0; i < repeats; ++i) {
          profiler::RecordFunction scope("mlp_forward");
          (void)mlp(x);
        }
      }
      fmt::print("mlp_profile batch {} threads {}, {} forwards:\n{}\n", batch, threads, repeats,
                 prof.key_averages(true).table({.sort_by = "cpu_time_total", .row_limit = 12}));
    }
  }
  return 0;
}
