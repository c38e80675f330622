// The CPU GEMM's tiled engine (ops/cpu/gemm_tiled.h): sizes that cut the output into
// several row and column tiles with short edge tiles, K longer than one chunk and off every
// block size, the bias written per tile, both operand orientations and copied (strided)
// operands, every dtype; against a float64 reference written here. Inputs are random
// multiples of 1/8 (every sum below is exact in float32, so the comparison is exact in every
// order) or continuous positive values (within the dtype's tolerance). Then: the same bits
// with 1, 2 and 3 OpenMP threads.
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "ops/cpu/gemm_tiled.h"
#include "ops/cpu/onednn_matmul.h"
#include "onednn_tiles.h"
#include "ops/kernels.h"
#include "testing.h"
#include "thread_count_guard.h"

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace kiln;
using namespace kiln::testing;

namespace {

// float64 out = alpha * a @ b + (bias defined ? bias over the rows : beta * c).
std::vector<double> reference_gemm(const Tensor& a, const Tensor& b, double alpha, const Tensor& bias, double beta,
                                   const Tensor& c) {
  const int64_t M = a.sizes()[0], K = a.sizes()[1], N = b.sizes()[1];
  const std::vector<double> va = values(a), vb = values(b);
  const std::vector<double> vbias = bias.defined() ? values(bias) : std::vector<double>();
  const std::vector<double> vc = c.defined() ? values(c) : std::vector<double>();
  std::vector<double> r(static_cast<size_t>(M * N));
  std::vector<double> acc(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double x = va[i * K + k];
      for (int64_t j = 0; j < N; ++j) acc[j] += x * vb[k * N + j];
    }
    for (int64_t j = 0; j < N; ++j) {
      const double base = bias.defined() ? vbias[j] : beta == 0.0 ? 0.0 : beta * vc[i * N + j];
      r[i * N + j] = base + alpha * acc[j];
    }
  }
  return r;
}

// a [M, K] laid out row-major, transposed in memory, or as every other column of a wider
// buffer (neither stride 1: the engine copies it).
Tensor operand(const Shape& shape, int layout, DType dt, bool eighths) {
  auto make = [&](const Shape& s) { return eighths ? random_eighths(s, dt) : random(s, dt, 0.0, 1.0); };
  if (layout == 1) return make({shape[1], shape[0]}).t();
  if (layout == 2) return make({shape[0], 2 * shape[1]}).slice(1, 1, 2 * shape[1], 2);
  return make(shape);
}

const char* layout_label(int layout) { return layout == 0 ? "row-major" : layout == 1 ? "transposed" : "strided"; }

// The kernel with alpha, beta, an optional bias and out starting as `c`, checked against
// the reference.
void check_kernel(const Tensor& a, const Tensor& b, double alpha, double beta, const Tensor& bias, bool exact) {
  const int64_t M = a.sizes()[0], N = b.sizes()[1];
  const DType dt = a.dtype();
  const Tensor c = exact ? random_eighths({M, N}, dt) : random({M, N}, dt, 0.0, 1.0);
  Tensor out = c.clone();
  dispatch::gemm_kernels.get("matmul", Device::cpu())(out, a, b, alpha, beta, bias);
  const std::vector<double> want = reference_gemm(a, b, alpha, bias, beta, c);
  if (exact && (dt == kFloat32 || dt == kFloat64)) {
    // Exact inputs: every order of summation gives the reference itself.
    check_close(out, want, {M, N}, Tolerance{0, 0});
  } else {
    check_close(out, want, {M, N});
  }
}

}  // namespace

namespace {

// Every part non-empty, the parts in order and covering [0, n), inner boundaries multiples
// of the unit, and no part more than one unit (plus the end's remainder) off the others.
void check_split(const cpu::Split& s, int64_t target) {
  INFO("n ", s.n, " unit ", s.unit, " count ", s.count);
  REQUIRE(s.count >= 1);
  CHECK(s.begin(0) == 0);
  CHECK(s.begin(s.count) == s.n);
  int64_t shortest = s.n, longest = 0;
  for (int64_t t = 0; t < s.count; ++t) {
    const int64_t size = s.begin(t + 1) - s.begin(t);
    CHECK(size > 0);
    if (t > 0) CHECK(s.begin(t) % s.unit == 0);
    if (t + 1 < s.count) {
      shortest = std::min(shortest, size);
      longest = std::max(longest, size);
    }
  }
  if (s.count > 2) CHECK(longest - shortest <= s.unit);
  // About `target` per part, never more parts than units.
  if (s.n >= s.unit) CHECK(s.count <= s.n / s.unit);
  CHECK(s.count <= std::max<int64_t>(1, (s.n + target - 1) / target));
}

}  // namespace

TEST_CASE("the tile grid: one tile on one thread; on several, the least estimated time of all grids it may cut") {
  const int64_t mr = cpu::gemm_tile_grid<float>(1, 1, 1, 2).cols.unit;  // Eigen's register block
  REQUIRE(mr % 8 == 0);
  for (int threads : {1, 2, 3, 16})
    for (int64_t K : {1, 64, 517, 4096})
      for (int64_t M : {1, 7, 64, 65, 256, 384, 385, 1000, 4096})
        for (int64_t N : {1, 17, 47, 48, 255, 256, 257, 300, 784, 4096, 4097}) {
          CAPTURE(threads);
          CAPTURE(M);
          CAPTURE(N);
          CAPTURE(K);
          const cpu::TileGrid g = cpu::gemm_tile_grid<float>(M, N, K, threads);
          REQUIRE(g.rows.unit == 8);
          REQUIRE(g.cols.unit == mr);
          REQUIRE(g.rows.n == M);
          REQUIRE(g.cols.n == N);
          const int64_t tiles = g.rows.count * g.cols.count;
          if (threads == 1) {  // the whole product in one call
            CHECK(tiles == 1);
            CHECK(g.rows.begin(1) == M);
            CHECK(g.cols.begin(1) == N);
            continue;
          }
          check_split(g.rows, 32);
          check_split(g.cols, 2 * mr);
          // At most four tiles per thread; no part below 32 rows or 2 register blocks of columns.
          CHECK(tiles <= 4 * threads);
          CHECK((g.rows.count == 1 || M / g.rows.count >= 32));
          CHECK((g.cols.count == 1 || N / g.cols.count >= 2 * mr));
          // Exhaustively: no grid the rule may cut has a lower estimate (ties keep the first).
          const double cost = cpu::gemm_grid_cost_ns<float>(K, g, threads);
          for (int64_t r = 1; r <= std::max<int64_t>(1, M / 32); ++r)
            for (int64_t c = 1; c <= std::max<int64_t>(1, N / (2 * mr)) && r * c <= 4 * threads; ++c) {
              const cpu::TileGrid other{cpu::Split{M, 8, r}, cpu::Split{N, mr, c}};
              const double other_cost = cpu::gemm_grid_cost_ns<float>(K, other, threads);
              if (!(cost <= other_cost)) FAIL_CHECK("grid " << r << " x " << c << " costs " << other_cost << " < " << cost);
            }
          // Sizes and thread count only: the same answer every time.
          const cpu::TileGrid again = cpu::gemm_tile_grid<float>(M, N, K, threads);
          CHECK(again.rows.count == g.rows.count);
          CHECK(again.cols.count == g.cols.count);
        }
  // A small product never forks: 64 x 64 x 64 on 16 threads is one tile.
  CHECK(cpu::gemm_tile_grid<float>(64, 64, 64, 16).rows.count * cpu::gemm_tile_grid<float>(64, 64, 64, 16).cols.count == 1);
  // A training step's 256 x 256 x 784 on 16 threads: at least 8 tiles (the fixed rule gave 4).
  const cpu::TileGrid step = cpu::gemm_tile_grid<float>(256, 256, 784, 16);
  CHECK(step.rows.count * step.cols.count >= 8);
  // The batch-64 block's 64 x 1024 x 4096 on 16 threads: at least 14 tiles (the fixed rule gave 8).
  const cpu::TileGrid second = cpu::gemm_tile_grid<float>(64, 1024, 4096, 16);
  CHECK(second.rows.count * second.cols.count >= 14);
  // (1024, 4096, 1024) on 16 threads: tiles whose panels fit a 2 MiB L2, several per thread
  // (one wave of 16 tiles of 256 x 1024 before the team's L2 term: 8.0 against 6.5 ms).
  const cpu::TileGrid big = cpu::gemm_tile_grid<float>(1024, 4096, 1024, 16);
  CHECK(big.rows.count * big.cols.count >= 32);
  // A huge n does not overflow the boundary arithmetic.
  const cpu::Split huge{int64_t{1} << 61, 8, int64_t{1} << 40};
  CHECK(huge.begin(huge.count - 1) < huge.n);
  CHECK(huge.begin(huge.count - 1) % 8 == 0);
}

TEST_CASE("the tile cost model grows with every edge and counts the region only for a team") {
  for (int64_t K : {1, 64, 784, 4096}) {
    CAPTURE(K);
    const double base = cpu::gemm_tile_cost_ns<float>(64, 96, K);
    CHECK(base > 0.0);
    CHECK(cpu::gemm_tile_cost_ns<float>(128, 96, K) > base);
    CHECK(cpu::gemm_tile_cost_ns<float>(64, 192, K) > base);
    CHECK(cpu::gemm_tile_cost_ns<float>(64, 96, 2 * K) > base);
    CHECK(cpu::gemm_tile_cost_ns<double>(64, 96, K) >= base);
  }
  const cpu::TileGrid whole{cpu::Split{256, 8, 1}, cpu::Split{256, 48, 1}};
  const cpu::TileGrid four{cpu::Split{256, 8, 2}, cpu::Split{256, 48, 2}};
  // One tile: the tile's cost on any thread count. Four tiles on one thread: four calls of the
  // largest tile (256 columns in parts of 48: 96 and 160).
  CHECK(cpu::gemm_grid_cost_ns<float>(784, whole, 16) == cpu::gemm_tile_cost_ns<float>(256, 256, 784));
  CHECK(cpu::gemm_grid_cost_ns<float>(784, four, 1) ==
        doctest::Approx(4.0 * cpu::gemm_tile_cost_ns<float>(128, 160, 784)));
  // Four tiles on four threads: one tile call plus the region; on sixteen, the same tile call
  // and a region of all sixteen (run_tiles forks the whole team).
  const cpu::GemmCostModel& m = cpu::gemm_cost_model<float>();
  CHECK(cpu::gemm_grid_cost_ns<float>(784, four, 4) ==
        doctest::Approx(cpu::gemm_tile_cost_ns<float>(128, 160, 784, 4) + m.fork_ns + 4.0 * m.fork_thread_ns));
  CHECK(cpu::gemm_grid_cost_ns<float>(784, four, 16) ==
        doctest::Approx(cpu::gemm_tile_cost_ns<float>(128, 160, 784, 4) + m.fork_ns + 16.0 * m.fork_thread_ns));
  // In a team of 16 (or more), a tile whose panels of A and B ((rows + cols) min(K, 2048)
  // floats) overflow the L2 pays 1 + team_l2_spill min(2, log2(panels / L2)) times for its
  // multiply-adds; one whose panels fit, once; a team of t pays (t - 1) / 15 of the extra.
  CHECK(cpu::gemm_tile_cost_ns<float>(128, 160, 784, 16) == cpu::gemm_tile_cost_ns<float>(128, 160, 784));
  for (const auto& [rows, cols, K, doublings] : {std::tuple{256, 1024, 1024, 1.3219280948873624},  // 5 MiB: log2 2.5
                                                 std::tuple{1024, 1024, 1024, 2.0},                 // 8 MiB
                                                 std::tuple{256, 128, 1536, 0.16992500144231237},  // 2.25 MiB
                                                 std::tuple{1024, 1024, 4096, 2.0},  // 2048 of K: 16 MiB, capped
                                                 std::tuple{64, 64, 8192, 0.0}}) {   // 2048 of K: 1 MiB, fits
    CAPTURE(rows);
    CAPTURE(cols);
    const double alone = cpu::gemm_tile_cost_ns<float>(rows, cols, K);
    const double full = m.team_l2_spill * doublings * m.mac_ns * rows * cols * K;
    CHECK(cpu::gemm_tile_cost_ns<float>(rows, cols, K, 16) - alone == doctest::Approx(full));
    CHECK(cpu::gemm_tile_cost_ns<float>(rows, cols, K, 64) - alone == doctest::Approx(full));
    CHECK(cpu::gemm_tile_cost_ns<float>(rows, cols, K, 4) - alone == doctest::Approx(full * 3.0 / 15.0));
  }
}

TEST_CASE("the tiled GEMM on an explicit grid: exact against float64, the same bits on any thread count") {
  manual_seed(175);
  const ThreadCountGuard guard;
  // 3 x 4 tiles with short edge parts, K over several chunks; exact eighths, so every order of
  // summation gives the reference, and one grid gives the same bits on 1, 2, 3 and 5 threads.
  const int64_t M = 203, K = 517, N = 301;
  for (DType dt : {kFloat32, kFloat64}) {
    CAPTURE(dt);
    const Tensor a = random_eighths({M, K}, dt), w = random_eighths({N, K}, dt), bias = random_eighths({N}, dt);
    const std::vector<double> want = reference_gemm(a, w.t(), 1.0, bias, 0.0, Tensor());
    const int64_t unit = dt == kFloat64 ? cpu::gemm_tile_grid<double>(1, 1, 1, 2).cols.unit
                                        : cpu::gemm_tile_grid<float>(1, 1, 1, 2).cols.unit;
    for (const auto& [r, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 4}, {25, 1}, {1, 6}}) {
      CAPTURE(r);
      CAPTURE(c);
      const cpu::TileGrid grid{cpu::Split{M, 8, r}, cpu::Split{N, unit, c}};
      Tensor first;
      for (int threads : {1, 2, 3, 5}) {
        CAPTURE(threads);
        Tensor out = empty({M, N}, dt);
        if (dt == kFloat64) {
          cpu::gemm_tiled_on_grid<double>(out.data_ptr<double>(), {a.data_ptr<double>(), M, K, K, 1},
                                          {w.data_ptr<double>(), K, N, 1, K}, 1.0, 0.0, bias.data_ptr<double>(), grid,
                                          threads);
        } else {
          cpu::gemm_tiled_on_grid<float>(out.data_ptr<float>(), {a.data_ptr<float>(), M, K, K, 1},
                                         {w.data_ptr<float>(), K, N, 1, K}, 1.0f, 0.0f, bias.data_ptr<float>(), grid,
                                         threads);
        }
        check_close(out, want, {M, N}, Tolerance{0, 0});
        if (!first.defined()) first = out;
        else CHECK(std::memcmp(first.data_ptr(), out.data_ptr(), static_cast<size_t>(M * N) * out.element_size()) == 0);
      }
    }
  }
}

TEST_CASE("gemm_tiled_on_grid rejects a grid of another size, with no parts, a zero unit or empty parts") {
  std::vector<float> a(6 * 16, 1.0f), b(6 * 16, 1.0f), out(16 * 16, 0.0f);
  const cpu::MatrixRef<float> ra{a.data(), 16, 6, 6, 1}, rb{b.data(), 6, 16, 16, 1};
  const cpu::TileGrid wrong_rows{cpu::Split{3, 8, 1}, cpu::Split{16, 8, 1}};
  const cpu::TileGrid wrong_cols{cpu::Split{16, 8, 1}, cpu::Split{5, 8, 1}};
  const cpu::TileGrid no_parts{cpu::Split{16, 8, 0}, cpu::Split{16, 8, 1}};
  const cpu::TileGrid zero_unit{cpu::Split{16, 8, 1}, cpu::Split{16, 0, 1}};
  const cpu::TileGrid empty_parts{cpu::Split{16, 8, 3}, cpu::Split{16, 8, 1}};  // 3 parts of 2 units
  for (const cpu::TileGrid& g : {wrong_rows, wrong_cols, no_parts, zero_unit, empty_parts})
    CHECK_THROWS_WITH_AS(cpu::gemm_tiled_on_grid<float>(out.data(), ra, rb, 1.0f, 0.0f, nullptr, g, 1),
                         doctest::Contains("gemm_tiled_on_grid: a grid of"), Error);
  // The message shows the offending grid and the output.
  CHECK_THROWS_WITH_AS(cpu::gemm_tiled_on_grid<float>(out.data(), ra, rb, 1.0f, 0.0f, nullptr, empty_parts, 1),
                       "gemm_tiled_on_grid: a grid of 3 x 1 parts (units 8 x 8) over 16 x 16 does not fit the 16 x 16 "
                       "output",
                       Error);
  // Two parts of one unit each fit, and compute the product: every element is K = 6.
  const cpu::TileGrid two{cpu::Split{16, 8, 2}, cpu::Split{16, 8, 2}};
  cpu::gemm_tiled_on_grid<float>(out.data(), ra, rb, 1.0f, 0.0f, nullptr, two, 2);
  for (float v : out) REQUIRE(v == 6.0f);
}

TEST_CASE("the tiled GEMM matches float64 at M = 1, 7, 64, 65 and 1000 with N and K off every block size") {
  manual_seed(171);
  // K = 517: longer than Eigen's kc on common L1 sizes (so several chunks), not a multiple of 8;
  // N = 300: two column tiles (160 and 140), neither a multiple of the register block.
  const int64_t K = 517, N = 300;
  for (int64_t M : {1, 7, 64, 65, 1000}) {
    CAPTURE(M);
    const std::vector<DType> types = M == 1000 ? std::vector<DType>{kFloat32, kFloat64}
                                               : std::vector<DType>{kFloat32, kFloat64, kFloat16, kBFloat16, kInt32,
                                                                    kInt64};
    for (DType dt : types) {
      CAPTURE(dt);
      for (int la = 0; la < 3; ++la)
        for (int lb = 0; lb < 3; ++lb) {
          if (M == 1000 && la + lb > 1) continue;  // the big case: row-major and one transposed operand
          INFO("a ", layout_label(la), ", b ", layout_label(lb));
          const Tensor a = operand({M, K}, la, dt, true), b = operand({K, N}, lb, dt, true);
          const Tensor bias = random_eighths({N}, dt);
          check_kernel(a, b, 1.0, 0.0, Tensor(), true);
          check_kernel(a, b, 2.0, 0.0, bias, true);
          if (M != 1000) check_kernel(a, b, is_floating(dt) ? 0.5 : 3.0, is_floating(dt) ? 1.5 : -2.0, Tensor(), true);
        }
    }
  }
}

TEST_CASE("the tiled GEMM on continuous values stays within the dtype tolerance, with and without a bias") {
  manual_seed(172);
  for (DType dt : kFloatTypes) {
    CAPTURE(dt);
    for (int64_t M : {7, 65, 1000}) {
      if (M == 1000 && !(dt == kFloat32 || dt == kFloat64)) continue;
      CAPTURE(M);
      const Tensor a = operand({M, 517}, 0, dt, false), w = operand({300, 517}, 0, dt, false);
      const Tensor bias = random({300}, dt, 0.0, 1.0);
      check_close(linear(a, w, bias), reference_linear(a, w, bias), {M, 300});
      check_close(linear(a, w, Tensor()), reference_linear(a, w, Tensor()), {M, 300});
      check_kernel(a, w.t(), 1.0, 0.5, Tensor(), false);
    }
  }
}

TEST_CASE("the tiled GEMM with K = 0 writes the bias, zeros or beta * out into every tile") {
  manual_seed(173);
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kInt64}) {
    CAPTURE(dt);
    const Tensor a = random_eighths({600, 0}, dt), b = random_eighths({0, 700}, dt), bias = random_eighths({700}, dt);
    check_kernel(a, b, 1.0, 0.0, bias, true);
    check_kernel(a, b, 1.0, 0.0, Tensor(), true);
    check_kernel(a, b, 1.0, is_floating(dt) ? 0.5 : 2.0, Tensor(), true);
  }
}

TEST_CASE("the float tiles: beta = 0 ignores NaN in out, and one primitive serves every call of a tile shape") {
  manual_seed(176);
  // NaN where the output starts: beta = 0 (and a bias) must not read it; exact eighths, so
  // the comparison is exact.
  const int64_t M = 37, K = 129, N = 75;
  const Tensor a = random_eighths({M, K}, kFloat32), w = random_eighths({N, K}, kFloat32);
  const Tensor bias = random_eighths({N}, kFloat32);
  for (bool with_bias : {false, true}) {
    CAPTURE(with_bias);
    Tensor out = full({M, N}, std::numeric_limits<double>::quiet_NaN(), kFloat32);
    dispatch::gemm_kernels.get("matmul", Device::cpu())(out, a, w.t(), 1.0, 0.0, with_bias ? bias : Tensor());
    check_close(out, reference_gemm(a, w.t(), 1.0, with_bias ? bias : Tensor(), 0.0, Tensor()), {M, N},
                Tolerance{0, 0});
  }
  // The same shape and layout again builds nothing new (a one-tile grid on one thread).
  const cpu::TileGrid whole{cpu::Split{M, 8, 1}, cpu::Split{N, 8, 1}};
  Tensor out = empty({M, N}, kFloat32);
  const auto run = [&] {
    cpu::gemm_tiled_on_grid<float>(out.data_ptr<float>(), {a.data_ptr<float>(), M, K, K, 1},
                                   {w.data_ptr<float>(), K, N, 1, K}, 1.0f, 0.0f, bias.data_ptr<float>(), whole, 1);
  };
  run();
  const int64_t cached = cpu::onednn_matmul_cached_primitives();
  for (int i = 0; i < 3; ++i) run();
  CHECK(cpu::onednn_matmul_cached_primitives() == cached);
  if (onednn_tiles()) CHECK(cached >= 1);
}

TEST_CASE("the float tiles: oneDNN refusing a tile or a scratchpad that cannot grow is a clear error, and nothing is lost") {
  if (!onednn_tiles()) {
    MESSAGE("SKIPPED: this build's CPU GEMM has no oneDNN tiles (KILN_ONEDNN off or libdnnl missing)");
    return;
  }
  manual_seed(177);
  const ThreadCountGuard guard;
  // Shapes no other case uses, so their primitives are not cached yet.
  const int64_t M = 41, K = 77, N = 59;
  const Tensor x = random_eighths({M, K}, kFloat32), w = random_eighths({N, K}, kFloat32);
  const Tensor bias = random_eighths({N}, kFloat32);
  const Tensor x0 = x.clone(), w0 = w.clone(), bias0 = bias.clone();
  const std::vector<double> expected = reference_gemm(x, w.t(), 1.0, bias, 0.0, Tensor());
#ifdef _OPENMP
  omp_set_num_threads(1);  // one tile: the whole product
#endif
  const int64_t cached = cpu::onednn_matmul_cached_primitives();
  cpu::onednn_matmul_inject_fault_for_testing(cpu::OnednnFault::PrimitiveBuild);
  const std::string refused = error_message([&] { (void)linear(x, w, bias); });
  CHECK(refused.find("matmul: oneDNN's matmul failed") != std::string::npos);
  CHECK(refused.find("41x59x77 tile") != std::string::npos);
  CHECK(cpu::onednn_matmul_cached_primitives() == cached);  // nothing half-built is kept
  // The inputs are intact and the next call works.
  CHECK(values(x) == values(x0));
  CHECK(values(w) == values(w0));
  CHECK(values(bias) == values(bias0));
  check_close(linear(x, w, bias), expected, {M, N}, Tolerance{0, 0});

#ifdef _OPENMP
  // Several tiles on a team: the refused tile's error leaves the parallel region as the same
  // kiln::Error, on the calling thread.
  omp_set_num_threads(3);
  const int64_t M2 = 43, N2 = 61;
  const Tensor a2 = random_eighths({M2, K}, kFloat32), w2 = random_eighths({N2, K}, kFloat32);
  Tensor out2 = empty({M2, N2}, kFloat32);
  const cpu::TileGrid grid{cpu::Split{M2, 8, 2}, cpu::Split{N2, 8, 2}};
  const auto run_grid = [&] {
    cpu::gemm_tiled_on_grid<float>(out2.data_ptr<float>(), {a2.data_ptr<float>(), M2, K, K, 1},
                                   {w2.data_ptr<float>(), K, N2, 1, K}, 1.0f, 0.0f, nullptr, grid, 3);
  };
  cpu::onednn_matmul_inject_fault_for_testing(cpu::OnednnFault::PrimitiveBuild);
  CHECK(error_message(run_grid).find("matmul: oneDNN's matmul failed") != std::string::npos);
  run_grid();
  check_close(out2, reference_gemm(a2, w2.t(), 1.0, Tensor(), 0.0, Tensor()), {M2, N2}, Tolerance{0, 0});
  omp_set_num_threads(1);
#endif

  // A scratchpad that cannot grow: on a fresh thread (whose scratchpad is still empty), as
  // an exhausted allocator would leave it. Whether oneDNN asks for a scratchpad depends on the
  // shape and the CPU (AVX-512's brgemm does for this one; on an AVX2 machine it does not), so
  // the first of a few shapes that asks for one on this CPU is the one refused.
  const auto on_fresh_thread = [](const std::function<void()>& fn) {
    std::thread fresh([&] {
#ifdef _OPENMP
      omp_set_num_threads(1);  // the tile on this thread, not on a pool thread whose scratchpad grew
#endif
      fn();
    });
    fresh.join();
  };
  std::vector<Tensor> padded;  // x, w, bias of the first shape that asks for a scratchpad
  for (const std::array<int64_t, 3> mkn : {std::array<int64_t, 3>{M, K, N}, {256, 256, 256}, {64, 1024, 4096}}) {
    std::vector<Tensor> args{random_eighths({mkn[0], mkn[1]}, kFloat32), random_eighths({mkn[2], mkn[1]}, kFloat32),
                             random_eighths({mkn[2]}, kFloat32)};
    int64_t bytes = 0;
    on_fresh_thread([&] {
      (void)linear(args[0], args[1], args[2]);
      bytes = cpu::onednn_matmul_thread_scratchpad_bytes();
    });
    if (bytes > 0) {
      padded = std::move(args);
      break;
    }
  }
  if (padded.empty()) {
    MESSAGE("SKIPPED (the scratchpad failure only): oneDNN asks for no scratchpad on this CPU for any shape tried");
    return;
  }
  const Tensor px0 = padded[0].clone(), pw0 = padded[1].clone(), pb0 = padded[2].clone();
  std::string no_scratchpad;
  on_fresh_thread([&] {
    cpu::onednn_matmul_inject_fault_for_testing(cpu::OnednnFault::Scratchpad);
    no_scratchpad = error_message([&] { (void)linear(padded[0], padded[1], padded[2]); });
  });
  CHECK(no_scratchpad.find("matmul: could not allocate oneDNN's") != std::string::npos);
  CHECK(no_scratchpad.find("-byte scratchpad") != std::string::npos);
  // The inputs are intact and the next call works.
  CHECK(values(padded[0]) == values(px0));
  CHECK(values(padded[1]) == values(pw0));
  CHECK(values(padded[2]) == values(pb0));
  check_close(linear(padded[0], padded[1], padded[2]),
              reference_gemm(padded[0], padded[1].t(), 1.0, padded[2], 0.0, Tensor()),
              {padded[0].size(0), padded[1].size(0)}, Tolerance{0, 0});
}

#ifdef _OPENMP

namespace {

bool same_bits(const Tensor& x, const Tensor& y) {
  const Tensor a = x.contiguous(), b = y.contiguous();
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<size_t>(a.numel()) * a.element_size()) == 0;
}

}  // namespace

TEST_CASE("the tiled GEMM: the same bits on every call for a thread count, and within rounding across thread counts") {
  manual_seed(174);
  const ThreadCountGuard guard;
  const int64_t K = 1031, N = 517;
  for (int64_t M : {1, 7, 64, 65, 1000})
    for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
      if (M == 1000 && (dt == kFloat64 || dt == kFloat16)) continue;
      CAPTURE(M);
      CAPTURE(dt);
      // Continuous values of both signs: the rounding depends on the order of every sum.
      const Tensor x = random({M, K}, dt), w = random({N, K}, dt), bias = random({N}, dt);
      const Tensor xt = random({K, M}, dt).t(), c = random({M, N}, dt);
      auto run_all = [&] {
        return std::vector<Tensor>{linear(x, w, bias), linear(x, w, Tensor()), matmul(xt, w.t()),
                                   addmm(c, x, w.t(), 0.5, 1.5)};
      };
      // Two summation orders of an output element differ by at most 2 K u times the sum of
      // its terms' magnitudes (u: the accumulator's unit roundoff), plus the two roundings to
      // the 16-bit output, half an ulp each: one ulp, up to 2 u16 |value| (u16: the 16-bit
      // type's unit roundoff, 2^-8 for bf16, 2^-11 for f16).
      const auto mag = [](const Tensor& t) { return abs(t.to(kFloat64)); };
      const Tensor prod = matmul(mag(x), mag(w).t());
      const std::vector<Tensor> scales{prod + mag(bias), prod, matmul(mag(xt), mag(w).t()), mag(c) * 0.5 + prod * 1.5};
      const double u = dt == kFloat64 ? 0x1p-53 : 0x1p-24;
      const double out_u = dt == kBFloat16 ? 0x1p-7 : dt == kFloat16 ? 0x1p-10 : 0.0;  // 2 u16
      const auto within_rounding = [&](const Tensor& a, const Tensor& b, const Tensor& scale) {
        const std::vector<double> av = values(a), bv = values(b), sv = values(scale);
        for (size_t e = 0; e < av.size(); ++e) {
          const double bound = 2.0 * static_cast<double>(K) * u * sv[e] + out_u * std::max(std::abs(av[e]), std::abs(bv[e]));
          if (!(std::abs(av[e] - bv[e]) <= bound)) {
            FAIL_CHECK("element " << e << ": " << av[e] << " vs " << bv[e] << " (bound " << bound << ")");
            return;
          }
        }
      };
      omp_set_num_threads(1);
      const std::vector<Tensor> one = run_all();
      for (int threads : {1, 2, 3}) {
        CAPTURE(threads);
        omp_set_num_threads(threads);
        const std::vector<Tensor> first = run_all(), second = run_all();
        // The grid of this thread count; the 1-thread grid is the whole product.
        const cpu::TileGrid g =
            dt == kFloat64 ? cpu::gemm_tile_grid<double>(M, N, K, threads) : cpu::gemm_tile_grid<float>(M, N, K, threads);
        const bool one_tile = g.rows.count * g.cols.count == 1;
        for (size_t i = 0; i < one.size(); ++i) {
          CAPTURE(i);
          CHECK(same_bits(first[i], second[i]));       // deterministic for a fixed thread count
          if (one_tile) CHECK(same_bits(first[i], one[i]));  // the same grid gives the same bits
          // Another grid may sum in another blocking: differences at the rounding level only.
          within_rounding(first[i], one[i], scales[i]);
        }
      }
    }
}

#endif  // _OPENMP
