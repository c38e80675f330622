// Issue 17's CPU comparison in one process: Kiln's CPU linear and MLP block against LibTorch's
// (the C++ library of the PyTorch wheel, MKL behind its linear), on the same data, taking turns
// row by row, so the host's process-to-process spread (on the H200 machine's host one binary's
// one-thread GEMM ran 57-72 ms from one process to the next, BENCHMARKS.md 9) falls on both
// sides alike. Rows: linear (64,1024,4096), (64,4096,1024), (1024,1024,4096), (1024,4096,1024)
// and the MLP block 1024-4096-1024 with exact GELU at batch 64 and 1024, float32, forward
// without autograd; one thread and all of them (both libraries told the count through their
// own API; each prints what it then reads). The MLP rows run twice: with weights scaled as
// nn.Linear's initialisation scales them (pre-activations of standard deviation ~1), and
// "wide", the first layer's weights unscaled (pre-activations of standard deviation ~32, a
// third of them below -13, where the exact GELU's result is below float's smallest normal:
// the row that shows what subnormal floats cost, BENCHMARKS.md 9).
//
// Method: per row, both sides are warmed up, their outputs compared (max |difference| over max
// |y|: a row whose libraries disagree is not timed); then `rounds` rounds, each timing
// `repeats` calls of one side and then of the other (the first side alternates by round), a
// call timed alone on the steady clock; each round keeps each side's median. Printed: the
// median over rounds of each side, their ratio (below 1: Kiln faster), the range of the
// per-round ratios and in how many rounds Kiln was faster. `--kiln-kernels auto,primitive`
// times Kiln once per named oneDNN tile kernel (auto: the library's rule; primitive, sgemm,
// sgemm-bias-first: forced, ops/cpu/onednn_matmul.h), all contenders taking turns in each round
// (the first rotating), each Kiln line with its own ratio to LibTorch: an A/B of the kernels in
// one process.
//
//   side_by_side_cpu [--threads 1,16] [--rounds 7] [--repeats 9] [--rows linear,mlp]
//                    [--kiln-kernels auto]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "side_by_side_cpu.h"

namespace {

namespace c = side_by_side::cpu;

using kiln::bench::median;

// Median milliseconds of `repeats` calls, each timed alone.
double median_ms(const std::function<void()>& call, int repeats) {
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(ms);
}

struct Row {
  const char* name;
  int64_t m, k, n, hidden;
  bool wide = false;  // the first layer's weights N(0, 1) instead of N(0, 1/k)
};

c::Operands make_operands(const Row& row, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto fill = [&](std::vector<float>& v, size_t count, float scale) {
    v.resize(count);
    for (float& e : v) e = scale * normal(rng);
  };
  c::Operands ops;
  ops.m = row.m, ops.k = row.k, ops.n = row.n, ops.hidden = row.hidden;
  const int64_t mid = row.hidden ? row.hidden : row.n;
  fill(ops.x, static_cast<size_t>(row.m * row.k), 1.f);
  fill(ops.w, static_cast<size_t>(mid * row.k), row.wide ? 1.f : 1.f / std::sqrt(static_cast<float>(row.k)));
  fill(ops.b, static_cast<size_t>(mid), 0.1f);
  if (row.hidden) {
    fill(ops.w2, static_cast<size_t>(row.n * mid), 1.f / std::sqrt(static_cast<float>(mid)));
    fill(ops.b2, static_cast<size_t>(row.n), 0.1f);
  }
  return ops;
}

std::vector<int> parse_ints(const char* text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> threads = {1, all};
  int rounds = 7, repeats = 9;
  std::string kinds = "linear,mlp";
  std::vector<std::string> kernels = {"auto"};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = parse_ints(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rows")) kinds = argv[i + 1];
    else if (!std::strcmp(argv[i], "--kiln-kernels")) {
      kernels.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string name; std::getline(list, name, ',');) kernels.push_back(name);
    }
  }
  for (const std::string& name : kernels)
    if (!c::kiln_set_tile_kernel(name.c_str())) {
      std::fprintf(stderr,
                   "side_by_side_cpu: --kiln-kernels takes auto, primitive, sgemm and sgemm-bias-first, got '%s'\n",
                   name.c_str());
      return 2;
    }
  if (kernels.empty()) {
    std::fprintf(stderr, "side_by_side_cpu: --kiln-kernels needs at least one kernel\n");
    return 2;
  }
  if (rounds < 1 || repeats < 1 || threads.empty() ||
      std::any_of(threads.begin(), threads.end(), [](int t) { return t < 1; })) {
    std::fprintf(stderr, "side_by_side_cpu: --rounds, --repeats and every --threads entry must be positive\n");
    return 2;
  }
  std::vector<Row> rows;
  if (kinds.find("linear") != std::string::npos)
    for (Row r : {Row{"linear", 64, 1024, 4096, 0}, Row{"linear", 64, 4096, 1024, 0}, Row{"linear", 1024, 1024, 4096, 0},
                  Row{"linear", 1024, 4096, 1024, 0}})
      rows.push_back(r);
  if (kinds.find("mlp") != std::string::npos)
    for (Row r : {Row{"mlp", 64, 1024, 1024, 4096}, Row{"mlp", 1024, 1024, 1024, 4096},
                  Row{"mlp_wide", 64, 1024, 1024, 4096, true}, Row{"mlp_wide", 1024, 1024, 1024, 4096, true}})
      rows.push_back(r);
  std::printf("side_by_side_cpu: %s\n", c::torch_description());
  std::printf("float32, forward, no autograd; %d rounds x %d calls per side, sides alternating first; ms\n", rounds,
              repeats);
  std::printf("%-40s %7s %7s %10s %10s %8s %15s %8s %9s\n", "row", "threads", "seen", "Kiln ms", "torch ms",
              "ratio", "round ratios", "Kiln won", "max diff");
  int failures = 0;
  for (int t : threads) {
    const int kiln_seen = c::kiln_set_threads(t), torch_seen = c::torch_set_threads(t);
    for (const Row& row : rows) {
      const c::Operands ops = make_operands(row, 17);
      c::kiln_setup(ops);
      c::torch_setup(ops);
      const std::vector<float> b = c::torch_output();
      double rel = 0;  // the largest over Kiln's kernels
      for (const std::string& kernel : kernels) {
        c::kiln_set_tile_kernel(kernel.c_str());
        const std::vector<float> a = c::kiln_output();
        double diff = 0, scale = 0;
        for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
          diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
          scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
        }
        rel = std::max(rel, a.size() == b.size() && scale > 0 ? diff / scale : INFINITY);
      }
      char label[64];
      if (row.hidden)
        std::snprintf(label, sizeof label, "mlp block%s, batch %lld", row.wide ? " wide" : "",
                      static_cast<long long>(row.m));
      else
        std::snprintf(label, sizeof label, "linear (%lld,%lld,%lld)", static_cast<long long>(row.m),
                      static_cast<long long>(row.k), static_cast<long long>(row.n));
      if (!(rel < 1e-4)) {  // fp32 GEMMs over K <= 4096 agree far closer than this
        std::printf("%-28s %7d: outputs differ (max diff / max |y| = %.3g): not timed\n", label, t, rel);
        ++failures;
        continue;
      }
      // Contenders 0 .. kernels - 1: Kiln on each kernel; the last: LibTorch. `take` selects a
      // contender's tile kernel (outside the timed calls) and returns its call.
      const size_t sides = kernels.size() + 1;
      const auto take = [&](size_t side) -> void (*)() {
        if (side + 1 == sides) return c::torch_call;
        c::kiln_set_tile_kernel(kernels[side].c_str());
        return c::kiln_call;
      };
      for (int w = 0; w < 2; ++w)
        for (size_t side = 0; side < sides; ++side) take(side)();  // warm-up: caches, JIT kernels
      std::vector<std::vector<double>> ms(sides), ratios(kernels.size());
      for (int r = 0; r < rounds; ++r) {
        std::vector<double> round_ms(sides);
        for (size_t j = 0; j < sides; ++j) {
          const size_t side = (j + static_cast<size_t>(r)) % sides;
          round_ms[side] = median_ms(take(side), repeats);
        }
        for (size_t side = 0; side < sides; ++side) ms[side].push_back(round_ms[side]);
        for (size_t k = 0; k < kernels.size(); ++k) ratios[k].push_back(round_ms[k] / round_ms.back());
      }
      const double tm = median(ms.back());
      for (size_t k = 0; k < kernels.size(); ++k) {
        const double km = median(ms[k]);
        const auto [lo, hi] = std::minmax_element(ratios[k].begin(), ratios[k].end());
        const long won = std::count_if(ratios[k].begin(), ratios[k].end(), [](double x) { return x < 1; });
        char range[32], seen[16], name[96];
        std::snprintf(range, sizeof range, "%.2f-%.2f", *lo, *hi);
        std::snprintf(seen, sizeof seen, "%d/%d", kiln_seen, torch_seen);
        std::snprintf(name, sizeof name, "%s%s%s%s", label, kernels[k] == "auto" ? "" : " [",
                      kernels[k] == "auto" ? "" : kernels[k].c_str(), kernels[k] == "auto" ? "" : "]");
        std::printf("%-40s %7d %7s %10.3f %10.3f %8.3f %15s %5ld/%-2d %9.1e\n", name, t, seen, km, tm, km / tm, range,
                    won, rounds, rel);
        std::printf("RESULT cpu_%s_m%lld_k%lld_n%lld_t%d%s%s kiln_ms %.4f torch_ms %.4f ratio %.4f\n", row.name,
                    static_cast<long long>(row.m), static_cast<long long>(row.k), static_cast<long long>(row.n), t,
                    kernels[k] == "auto" ? "" : "_", kernels[k] == "auto" ? "" : kernels[k].c_str(), km, tm, km / tm);
      }
      c::kiln_set_tile_kernel("auto");
      std::fflush(stdout);
    }
  }
  std::printf("(ratio: Kiln / LibTorch, medians over rounds; round ratios: the range of the rounds' ratios; seen: the "
              "thread counts Kiln / LibTorch read after being told)\n");
  return failures ? 1 : 0;
}
