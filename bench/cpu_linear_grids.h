// The GEMM tile grid measured against its cost model (ops/cpu/gemm_tiled.h), two modes of
// bench/cpu_linear:
//   calibrate: one tile call of many sizes on the calling thread, measured beside the model's
//     estimate; bench/cpu_linear_calibrate.py fits the model's constants to these lines.
//   grids M K N: one product on the current thread count with the model's grid, the whole
//     product on one thread, and other grids of 2-64 tiles, each measured and estimated, so a
//     machine shows whether the model ranks the grids as they run.
// A header of cpu_linear.cpp's (one benchmark binary), not a library part: it calls the tile
// engine directly (gemm_tiled_on_grid), bypassing the op layer, to time the grid alone.
#pragma once

#include <fmt/format.h>

#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "ops/cpu/gemm_tiled.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kiln::bench {

/// Operands of an M x N x K float product in one of linear's three layouts: "nt" (forward,
/// x @ w^T: the weight read column-major), "nn" (the input's gradient, g @ w) and "tn" (the
/// weight's gradient, x^T @ g: the left operand column-major).
struct GemmOperands {
  int64_t M, N, K;
  std::vector<float> a, b, out, bias;
  cpu::MatrixRef<float> ra, rb;

  GemmOperands(int64_t m, int64_t n, int64_t k, const std::string& layout) : M(m), N(n), K(k) {
    std::mt19937 gen(static_cast<unsigned>(m * 131 + n * 7 + k));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    a.resize(static_cast<size_t>(M * K));
    b.resize(static_cast<size_t>(K * N));
    bias.resize(static_cast<size_t>(N));
    out.resize(static_cast<size_t>(M * N));
    for (auto* v : {&a, &b, &bias})
      for (float& x : *v) x = dist(gen);
    ra = layout == "tn" ? cpu::MatrixRef<float>{a.data(), M, K, 1, M} : cpu::MatrixRef<float>{a.data(), M, K, K, 1};
    rb = layout == "nt" ? cpu::MatrixRef<float>{b.data(), K, N, 1, K} : cpu::MatrixRef<float>{b.data(), K, N, N, 1};
  }
  /// One product on `grid` with at most `threads` threads (the bias as linear adds it).
  void run(const cpu::TileGrid& grid, int threads) {
    cpu::gemm_tiled_on_grid<float>(out.data(), ra, rb, 1.0f, 0.0f, bias.data(), grid, threads);
    do_not_optimize(out[0]);
  }
};

/// The tile rule before the cost model (gemm_tiled.cpp until 2026-12-02's third session), for
/// the side-by-side in "grids": start at 512 x 512, halve the longer edge while the grid has
/// fewer than two tiles per thread, each keeps >= 4 Mi multiply-adds and edges stay >= 128.
inline cpu::TileGrid previous_tile_grid(int64_t M, int64_t N, int64_t K, int threads, int64_t mr) {
  const auto split = [](int64_t n, int64_t target, int64_t unit) {
    const int64_t wanted = std::max<int64_t>(1, (n + target - 1) / target);
    return cpu::Split{n, unit, std::min(wanted, std::max<int64_t>(1, n / unit))};
  };
  if (threads <= 1) return {cpu::Split{M, 8, 1}, cpu::Split{N, mr, 1}};
  const double macs = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(std::max<int64_t>(K, 1));
  cpu::TileGrid grid{split(M, 512, 8), split(N, 512, mr)};
  bool rows_can = true, cols_can = true;
  const auto fine_enough = [&](const cpu::Split& rows, const cpu::Split& cols) {
    const double tiles = static_cast<double>(rows.count) * static_cast<double>(cols.count);
    return tiles > static_cast<double>(grid.rows.count) * static_cast<double>(grid.cols.count) &&
           macs / tiles >= 4.0 * 1024.0 * 1024.0;
  };
  while (grid.rows.count * grid.cols.count < 2 * threads) {
    const int64_t row_edge = (M + grid.rows.count - 1) / grid.rows.count;
    const int64_t col_edge = (N + grid.cols.count - 1) / grid.cols.count;
    rows_can = rows_can && row_edge >= 256;
    cols_can = cols_can && col_edge >= 256;
    if (cols_can && (col_edge >= row_edge || !rows_can)) {
      const cpu::Split finer = split(N, col_edge / 2, mr);
      cols_can = fine_enough(grid.rows, finer);
      if (cols_can) grid.cols = finer;
    } else if (rows_can) {
      const cpu::Split finer = split(M, row_edge / 2, 8);
      rows_can = fine_enough(finer, grid.cols);
      if (rows_can) grid.rows = finer;
    } else {
      break;
    }
  }
  return grid;
}

/// Calls per timed batch so that a batch lasts about 2 ms by the model's estimate.
inline int calls_for(double estimate_ns) {
  return std::max(1, static_cast<int>(2e6 / std::max(estimate_ns, 1.0)));
}

/// The "calibrate" mode: tile calls of many sizes, one thread, "tile rows cols K layout
/// median_ns model_ns" per line.
inline void calibrate_tiles(int repeats) {
  struct Shape {
    int64_t rows, cols, K;
    const char* layout;
  };
  std::vector<Shape> shapes;
  for (int64_t K : {64, 256, 784, 1024, 4096})
    for (int64_t rows : {8, 16, 32, 64, 128, 256, 512})
      for (int64_t cols : {10, 48, 64, 128, 192, 256, 384, 512, 1024})
        if (static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(K) <= 6e8)
          shapes.push_back({rows, cols, K, "nt"});
  for (const char* layout : {"nn", "tn"})
    for (int64_t K : {128, 256, 784})
      for (int64_t rows : {32, 128, 256})
        for (int64_t cols : {64, 128, 256}) shapes.push_back({rows, cols, K, layout});
  fmt::print("calibrate: {} tile shapes, one thread, medians of {} batches of about 2 ms\n", shapes.size(), repeats);
  for (const Shape& s : shapes) {
    GemmOperands g(s.rows, s.cols, s.K, s.layout);
    const cpu::TileGrid one{cpu::Split{s.rows, 8, 1}, cpu::Split{s.cols, 16, 1}};
    const double model = cpu::gemm_tile_cost_ns<float>(s.rows, s.cols, s.K);
    Turns turns;
    turns.add("tile", calls_for(model), [&] { g.run(one, 1); });
    turns.run(repeats);
    fmt::print("tile {} {} {} {} {:.0f} {:.0f}\n", s.rows, s.cols, s.K, s.layout, turns.median_ns("tile"), model);
  }
}

/// The "grids" mode: an M x N x K product ("nt" layout unless given) on the current thread
/// count, grid by grid: "grid R C tiles T team n measured_us model_us [chosen|one-thread|
/// previous-rule]" (the model's grid, the whole product on one thread, the rule before the
/// model, then grids of 2-64 tiles in powers of two).
inline void compare_grids(int64_t M, int64_t K, int64_t N, const std::string& layout, int repeats) {
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  GemmOperands g(M, N, K, layout);
  const int64_t mr = cpu::gemm_tile_grid<float>(M, N, K, 1).cols.unit;
  const cpu::TileGrid chosen = cpu::gemm_tile_grid<float>(M, N, K, threads);
  const cpu::TileGrid previous = previous_tile_grid(M, N, K, threads, mr);
  std::vector<cpu::TileGrid> grids{chosen, cpu::TileGrid{cpu::Split{M, 8, 1}, cpu::Split{N, mr, 1}}, previous};
  const int64_t max_rows = std::max<int64_t>(1, M / 8), max_cols = std::max<int64_t>(1, N / mr);
  for (int64_t tiles : {2, 4, 8, 16, 32, 64})
    for (int64_t r = 1; r <= tiles; r *= 2) {
      const int64_t c = tiles / r;
      const auto same = [&](const cpu::TileGrid& g) { return r == g.rows.count && c == g.cols.count; };
      if (r > max_rows || c > max_cols || same(chosen) || same(previous)) continue;
      grids.push_back({cpu::Split{M, 8, r}, cpu::Split{N, mr, c}});
    }
  Turns turns;
  for (size_t i = 0; i < grids.size(); ++i) {
    const int run_threads = i == 1 ? 1 : threads;
    turns.add(std::to_string(i), calls_for(cpu::gemm_grid_cost_ns<float>(K, grids[i], run_threads)),
              [&, i, run_threads] { g.run(grids[i], run_threads); });
  }
  turns.run(repeats);
  fmt::print("grids M={} N={} K={} ({}) on {} threads, medians of {} batches of about 2 ms:\n", M, N, K, layout,
             threads, repeats);
  for (size_t i = 0; i < grids.size(); ++i) {
    const cpu::TileGrid& gr = grids[i];
    const int run_threads = i == 1 ? 1 : threads;
    const int64_t tiles = gr.rows.count * gr.cols.count;
    fmt::print("grid {} {} tiles {} team {} measured_us {:.1f} model_us {:.1f}{}\n", gr.rows.count, gr.cols.count,
               tiles, std::min<int64_t>(run_threads, tiles), turns.median_ns(std::to_string(i)) * 1e-3,
               cpu::gemm_grid_cost_ns<float>(K, gr, run_threads) * 1e-3,
               i == 0 ? " chosen" : i == 1 ? " one-thread" : i == 2 ? " previous-rule" : "");
  }
}

/// The "fork" mode: what opening an empty parallel region costs on the current thread count,
/// and one whose team size alternates with the full team's (as the GEMM's team of
/// min(threads, tiles) alternates with the elementwise ops' full team), in microseconds.
inline void time_fork(int repeats) {
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  Turns turns;
  turns.add("full", 100, [&] {
#pragma omp parallel num_threads(threads)
    do_not_optimize(threads);
  });
  const int quarter = std::max(1, threads / 4);
  turns.add("alternating", 100, [&] {
#pragma omp parallel num_threads(quarter)
    do_not_optimize(quarter);
#pragma omp parallel num_threads(threads)
    do_not_optimize(threads);
  });
  turns.run(repeats);
  fmt::print("fork: an empty region of {} threads {:.2f} us; a region of {} then one of {} {:.2f} us\n", threads,
             turns.median_ns("full") * 1e-3, quarter, threads, turns.median_ns("alternating") * 1e-3);
}

}  // namespace kiln::bench
