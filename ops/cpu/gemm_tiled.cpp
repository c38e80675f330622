// Tiled, OpenMP-parallel float/double GEMM on Eigen's single-threaded kernel (gemm_tiled.h).
//
// Why not Eigen's own threads: Eigen splits a product across threads only along one
// dimension and re-decides its blocking per thread count; at linear's small M (64 rows) it
// barely scaled past one core. Here Kiln owns the parallel loop: the output is cut into tiles
// sized from M, N, K and the thread count, OpenMP threads take whole tiles (first come, first
// served), and each tile calls oneDNN (float: onednn_matmul.h, one thread; the matmul
// primitive applying the bias or beta itself, or on Intel CPUs for large tiles sgemm) or Eigen's sequential GEMM driver
// (internal::general_matrix_matrix_product with no parallel info) once per chunk of K. Chunks
// are never longer than Eigen's kc, so Eigen never splits them further: an output element is
// the bias (or beta * out, or 0), then plus alpha times each chunk's dot product in chunk
// order, each chunk summed in registers by the kernel. The same tile call runs whichever
// thread takes it, so for a given thread count the bits never change.
//
// Why the tiles depend on the thread count (they did not before 2026-12-02): one grid cannot
// suit one thread and sixteen. Each tile packs its panel of B again and pays a call, so one
// thread is fastest with the whole product in one call (15% faster than 512 x 512 tiles at
// linear (1024, 1024, 4096) with oneDNN), while sixteen threads want enough tiles to keep
// every one busy. Which grid is best depends on M, N and K together, so a cost model per tile
// picks it (gemm_tile_grid, below). The README says what the thread count changes.
#include "gemm_tiled.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <exception>
#include <type_traits>
#include <vector>

#include "../../core/error.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include "onednn_matmul.h"

namespace kiln::cpu {

namespace {

using Eigen::Index;

// The longest run of K Eigen's single-threaded kernel keeps in one block. Eigen picks kc by
// a cache heuristic (products/GeneralBlockPanelKernel.h) from the L1 size; fed chunks no
// longer than that, it never splits them. Asked with large M and N so that only the cache
// bounds it; a multiple of 8 (Eigen's k peeling).
template <typename T>
int64_t sequential_kc() {
  static const int64_t kc = [] {
    Index k = Index{1} << 30, m = 4096, n = 4096;
    Eigen::internal::computeProductBlockingSizes<T, T>(k, m, n, Index{1});
    return std::max<int64_t>(8, k / 8 * 8);
  }();
  return kc;
}

// True when Eigen can read m in place as row-major (unit column stride).
template <typename T>
bool is_row_major(const MatrixRef<T>& m) {
  return (m.col_stride == 1 || m.cols == 1) && (m.rows == 1 || m.row_stride >= m.cols);
}

template <typename T>
bool is_col_major(const MatrixRef<T>& m) {
  return (m.row_stride == 1 || m.rows == 1) && (m.cols == 1 || m.col_stride >= m.rows);
}

// `m` itself when Eigen can map it in place, else a column-major copy in `scratch`.
template <typename T>
MatrixRef<T> mappable(const MatrixRef<T>& m, std::vector<T>& scratch) {
  if (is_row_major(m) || is_col_major(m)) return m;
  scratch.resize(static_cast<size_t>(m.rows * m.cols));
  for (int64_t c = 0; c < m.cols; ++c)
    for (int64_t r = 0; r < m.rows; ++r) scratch[c * m.rows + r] = m.data[r * m.row_stride + c * m.col_stride];
  return {scratch.data(), m.rows, m.cols, 1, std::max<int64_t>(m.rows, 1)};
}

// A mapped operand as Eigen's driver reads it: storage order and leading dimension.
template <typename T>
struct Operand {
  const T* data;
  int64_t row_stride, col_stride;  // element (r, c) is data[r * row_stride + c * col_stride]
  Index ld;
};

template <typename T>
Operand<T> operand_of(const MatrixRef<T>& m, bool row_major) {
  if (row_major) {
    const Index ld = m.rows == 1 ? std::max<int64_t>(m.cols, 1) : m.row_stride;
    return {m.data, m.rows == 1 ? ld : m.row_stride, 1, ld};
  }
  const Index ld = m.cols == 1 ? std::max<int64_t>(m.rows, 1) : m.col_stride;
  return {m.data, 1, m.cols == 1 ? ld : m.col_stride, ld};
}

// Writes the bias, zeros or beta * out into rows [i0, i0 + mt), columns [j0, j0 + nt).
template <typename T>
void init_tile(T* out, int64_t ldo, int64_t i0, int64_t mt, int64_t j0, int64_t nt, T beta, const T* bias) {
  for (int64_t i = i0; i < i0 + mt; ++i) {
    T* row = out + i * ldo + j0;
    if (bias) std::copy(bias + j0, bias + j0 + nt, row);
    else if (beta == T(0)) std::fill(row, row + nt, T(0));
    else if (beta != T(1)) for (int64_t j = 0; j < nt; ++j) row[j] *= beta;
  }
}

// One tile: rows [i0, i0 + mt) and columns [j0, j0 + nt) of out, K in fixed chunks.
template <typename T, int LhsOrder, int RhsOrder>
void run_tile(T* out, int64_t ldo, const Operand<T>& a, const Operand<T>& b, int64_t i0, int64_t mt, int64_t j0,
              int64_t nt, int64_t K, int64_t chunk, T alpha, T beta, const T* bias) {
#ifdef KILN_WITH_ONEDNN
  // Float through oneDNN's matmul primitive, which applies the bias or beta itself; a bias
  // with alpha != 1 is written first and summed into (oneDNN would scale it).
  if constexpr (std::is_same_v<T, float>) {
    if (K > 0) {
      const bool own_bias = bias && alpha == 1.0f;
      if (bias && !own_bias) init_tile(out, ldo, i0, mt, j0, nt, beta, bias);
      onednn_matmul_tile(out + i0 * ldo + j0, ldo, {a.data + i0 * a.row_stride, a.row_stride, a.col_stride},
                         {b.data + j0 * b.col_stride, b.row_stride, b.col_stride}, mt, nt, K, alpha,
                         own_bias || !bias ? beta : 1.0f, own_bias ? bias + j0 : nullptr);
      return;
    }
  }
#endif
  init_tile(out, ldo, i0, mt, j0, nt, beta, bias);
  if (K == 0) return;
  using Blocking = Eigen::internal::gemm_blocking_space<Eigen::RowMajor, T, T, Eigen::Dynamic, Eigen::Dynamic,
                                                        Eigen::Dynamic>;
  using Product = Eigen::internal::general_matrix_matrix_product<Index, T, LhsOrder, false, T, RhsOrder, false,
                                                                 Eigen::RowMajor, 1>;
  Blocking blocking(mt, nt, std::min(chunk, K), 1, true);
  blocking.allocateAll();
  for (int64_t k0 = 0; k0 < K; k0 += chunk) {
    const int64_t kc = std::min(chunk, K - k0);
    Product::run(mt, nt, kc, a.data + i0 * a.row_stride + k0 * a.col_stride, a.ld,
                 b.data + k0 * b.row_stride + j0 * b.col_stride, b.ld, out + i0 * ldo + j0, 1, ldo, alpha, blocking,
                 nullptr);
  }
}

template <typename T, int LhsOrder, int RhsOrder>
void run_tiles(T* out, const Operand<T>& a, const Operand<T>& b, int64_t N, int64_t K, T alpha, T beta, const T* bias,
               const TileGrid& grid, int threads) {
  const int64_t col_tiles = grid.cols.count, tiles = grid.rows.count * col_tiles;
  // Equal chunks (a function of K and kc only), so the last one is not a short remainder.
  const int64_t limit = sequential_kc<T>();
  const int64_t chunks = std::max<int64_t>(1, (K + limit - 1) / limit);
  const int64_t chunk = std::min(limit, ((K + chunks - 1) / chunks + 7) / 8 * 8);
  const auto tile = [&](int64_t t) {
    const int64_t r = t / col_tiles, c = t % col_tiles;
    const int64_t i0 = grid.rows.begin(r), j0 = grid.cols.begin(c);
    run_tile<T, LhsOrder, RhsOrder>(out, N, a, b, i0, grid.rows.begin(r + 1) - i0, j0, grid.cols.begin(c + 1) - j0, K,
                                    chunk, alpha, beta, bias);
  };
  // One tile, or one thread: on the calling thread with no region at all (the grid's cost
  // model gives small products one tile, so they never fork). Otherwise the region has all
  // `threads`, even when there are fewer tiles: libgomp lets the threads beyond a smaller
  // team exit and creates new ones for the next larger team, and on the GPU machine's 16-core
  // host a region of 4 threads followed by one of 16 cost 1.43 ms against 4.5 us for two of 16
  // (`cpu_linear fork`). Threads without a tile only arrive at the closing barrier.
  if (threads <= 1 || tiles <= 1) {
    for (int64_t t = 0; t < tiles; ++t) tile(t);
    return;
  }
  std::exception_ptr error;
  // Dynamic: a thread that shares its core with another process (or started late) takes
  // fewer tiles instead of holding everyone at the end; which thread runs a tile does not
  // change its bits.
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t t = 0; t < tiles; ++t) {
    try {
      tile(t);
    } catch (...) {
      // An exception must not leave an OpenMP region (std::terminate): keep the first one.
#pragma omp critical(kiln_gemm_tiled_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

const char* gemm_backend() {
#ifdef KILN_WITH_ONEDNN
  return "oneDNN (matmul primitive; sgemm on Intel CPUs for tiles with every edge >= 1024) for float and 16-bit, "
         "Eigen for double, on Kiln's tiles";
#else
  return "Eigen on Kiln's tiles";
#endif
}

// The tile rule (2026-12-02, third version): a cost model per tile, minimised over the grids.
//
// A tile call of rows x cols x K costs, on one core, a fixed amount (the call, oneDNN's
// set-up of its packing buffers), packing its panels of A and B (~ (rows + cols) x K
// elements), the multiply-adds (rows x cols x K, the columns rounded up to whole vectors,
// which a partial vector computes anyway) and writing the output (rows x cols). A grid
// on T threads keeps min(T, tiles) of them busy; with dynamic scheduling each takes about
// tiles / busy tiles, so the product ends after ceil(tiles / busy) tile times, plus the fork
// and join of a region of all T threads (run_tiles says why all). gemm_tile_grid takes the
// grid of least estimated time. So K = 4096
// products on many threads take narrow tiles (their packing per multiply-add, 1/rows +
// 1/cols, matters less than filling the threads), while small products stay whole when the
// fork and the extra packing cost more than the threads save. One thread always takes the
// whole product in one call (no grid of several tiles costs less there). The fixed edges
// before (start at 512, halve to ~2 tiles per thread, stop at 128) gave 64 x 1024 x 4096 8
// tiles of 128 columns on 16 threads (the batch-64 MLP block's second GEMM) and the training
// step's 256 x 256 x 784 four: BENCHMARKS.md 9, third session.
//
// Calibration: see kFloatModel.
namespace {

// The tile terms: bench/cpu_linear_calibrate.py fitted them to four runs of `taskset -c 1
// build/bench/cpu_linear calibrate` on the 2-core development VM (2026-12-02: an AMD EPYC
// with AVX-512, oneDNN 2.6.3's matmul primitive, idle), 242 tile shapes of 16-512 rows,
// 10-1024 columns and K = 64-4096 in linear's three layouts: median relative error 3.9%,
// worst 39%. Packing: 0.062 ns per element of the rows' panel and 0.108 per element of the
// columns' (the primitive packs the transposed weight of linear's forward far more cheaply
// than sgemm did: 0.35 and 0.15 in the fit of 2026-12-02's earlier sgemm tiles on a Xeon VM).
// The multiply-add, 0.0102 ns on the columns rounded up to whole 16-float vectors, is 98 G/s;
// writing the output adds nothing measurable. The region's terms are a judgement, not a fit:
// an empty region of 2 threads cost 0.4-0.7 us on the idle VM, but a region waits for its
// slowest thread, which on shared or many-core hosts costs far more (BENCHMARKS.md 9); set
// at 5 us + 0.5 us per thread, they keep products of 64 x 64 x 64 whole (`cpu_linear fork`
// measures a host's).
//
// The team's L2 term is a fit to the host's grid tables, not to the single-thread
// calibration, which cannot see it: on the GPU machine's 16-core host (2 MiB of L2 per core;
// BENCHMARKS.md 9, sixth session) tiles on 16 threads cost 21-24 ps per multiply-add when a
// tile's panels of A and B fitted the L2, and 28-35 ps when they were 2.5-8 times larger: the
// overflowing panels stream again from the shared L3, which the whole team contends for. In
// a team of 16 the multiply-add costs 1 + spill min(2, log2(panels / L2)) times its fitted cost,
// the panels being (rows + cols) min(K, 2048) elements (a longer K runs in blocks; counting
// all of it chose, at 1024 x 1024 x 4096, a grid measured 23% slower than the best). The cap
// keeps any team cheaper than one thread for a large product. At 0.25 per doubling the
// host's tables at 1024 rows and K = 1024 pick 8 x 8 (6.1 and 6.5 ms in two calls, against 7.6
// and 8.0 for the 4 x 4 chosen without the term), at K = 4096 (the batch-1024 MLP's second
// GEMM) 9 x 7 (not measured; 8 x 8, 16 x 4 and 8 x 4 took 6.5-6.9 ms against 7.7 for the 8 x 2
// chosen before), and the same grid as before for every other product there. A smaller team
// contends less: the extra cost scales with (team - 1) / 15, so at 2 threads it is 1/15 of
// that (on the 2-core VM, the full term moved (1024, 4096, 1024) from 2 x 1 to a 2 x 3 grid
// measured 11% slower). Constants, not the machine's L2, so the grids stay a function of the
// sizes and the thread count only.
constexpr GemmCostModel kFloatModel{.call_ns = 1725.0,
                                    .pack_rows_ns = 0.06246,
                                    .pack_cols_ns = 0.1082,
                                    .mac_ns = 0.01022,
                                    .out_ns = 0.0,
                                    .fork_ns = 5000.0,
                                    .fork_thread_ns = 500.0,
                                    .team_l2_bytes = 2.0 * 1024 * 1024,
                                    .team_l2_k = 2048.0,
                                    .team_l2_spill = 0.25,
                                    .team_l2_full_team = 16.0};

// Double (Eigen's kernel): half the lanes per vector, so twice the time per multiply-add and
// per packed element; not calibrated on its own.
constexpr GemmCostModel kDoubleModel = [] {
  GemmCostModel m = kFloatModel;  // the call, the region and the team's L2 terms stay
  m.pack_rows_ns *= 2.0;
  m.pack_cols_ns *= 2.0;
  m.mac_ns *= 2.0;
  m.out_ns *= 2.0;
  return m;
}();

// No part below these (but a whole edge shorter than them; measured with the sgemm tiles
// before the matmul primitive, not yet re-measured): oneDNN's sgemm runs tiles of 8-16
// rows at K >= 1024, or of 48-64 columns with the weight transposed (linear's forward),
// 1.5-2.5x slower per multiply-add than the model's fit (e.g. 32 x 48 x 784 took as long as
// 32 x 128 x 784; 64 x 1024 x 4096 as four tiles of 16 rows 1.9x as long as whole), which no
// term of the model follows; so the search does not offer them.
constexpr int64_t kMinRows = 32;
template <typename T>
constexpr int64_t kMinCols = 2 * Eigen::internal::gebp_traits<T, T>::mr;

// The model rounds a tile's columns up to whole vectors of this many elements (AVX-512
// floats; it fitted the measurements better than oneDNN's 48-column register block).
constexpr int64_t kVectorFloats = 16;

// The longest part of a split (the last one takes the remainder of n over the unit).
int64_t largest_part(const Split& s) {
  int64_t longest = 0;
  for (int64_t t = 0; t < s.count; ++t) longest = std::max(longest, s.begin(t + 1) - s.begin(t));
  return longest;
}

}  // namespace

template <typename T>
const GemmCostModel& gemm_cost_model() {
  static constexpr GemmCostModel model = std::is_same_v<T, float> ? kFloatModel : kDoubleModel;
  return model;
}

template <typename T>
double gemm_tile_cost_ns(int64_t rows, int64_t cols, int64_t K, int team) {
  const GemmCostModel& m = gemm_cost_model<T>();
  const double r = static_cast<double>(rows), c = static_cast<double>(cols), k = static_cast<double>(K);
  const double padded_cols = static_cast<double>((cols + kVectorFloats - 1) / kVectorFloats * kVectorFloats);
  double mac_ns = m.mac_ns;
  if (team > 1) {
    const double panels = (r + c) * std::min(k, m.team_l2_k) * static_cast<double>(sizeof(T));
    const double share = std::min(1.0, static_cast<double>(team - 1) / (m.team_l2_full_team - 1.0));
    if (panels > m.team_l2_bytes)
      mac_ns *= 1.0 + share * m.team_l2_spill * std::min(2.0, std::log2(panels / m.team_l2_bytes));
  }
  return m.call_ns + (m.pack_rows_ns * r + m.pack_cols_ns * c) * k + mac_ns * r * padded_cols * k + m.out_ns * r * c;
}

template <typename T>
double gemm_grid_cost_ns(int64_t K, const TileGrid& grid, int threads) {
  const GemmCostModel& m = gemm_cost_model<T>();
  const int64_t tiles = grid.rows.count * grid.cols.count;
  const int64_t team = std::min<int64_t>(std::max(threads, 1), tiles);  // the threads with a tile
  const int64_t waves = (tiles + team - 1) / team;
  // The region forks every thread (run_tiles says why), busy or not.
  const double fork = team > 1 ? m.fork_ns + m.fork_thread_ns * static_cast<double>(threads) : 0.0;
  return fork +
         static_cast<double>(waves) *
             gemm_tile_cost_ns<T>(largest_part(grid.rows), largest_part(grid.cols), K, static_cast<int>(team));
}

template <typename T>
TileGrid gemm_tile_grid(int64_t M, int64_t N, int64_t K, int threads) {
  // Eigen computes the row-major output as its transpose, so our columns are its rows, cut
  // into register blocks of mr (3 packets: 48 floats with AVX-512; oneDNN's AVX-512 sgemm
  // kernel has the same 48): column parts in multiples of mr keep every tile but the last off
  // the slower remainder paths; rows go in multiples of 8.
  constexpr int64_t mr = Eigen::internal::gebp_traits<T, T>::mr;
  TileGrid best{Split{M, 8, 1}, Split{N, mr, 1}};
  if (threads <= 1) return best;
  double best_cost = gemm_grid_cost_ns<T>(K, best, threads);
  // Every grid of several tiles costs more than its region's fork and join alone (each tile
  // call costs call_ns > 0): when the whole product costs no more than that, none can win,
  // and the small products of an eager step skip the search.
  const GemmCostModel& m = gemm_cost_model<T>();
  if (best_cost <= m.fork_ns + m.fork_thread_ns * static_cast<double>(threads)) return best;
  // More than a few tiles per thread only adds packing and calls; the search stays small
  // (about 4 T ln(4 T) grids: on the VM at T = 16, 0.4 us for the training step's 256 x 256
  // x 784, 6-20 us for the batch-64 and 1024-row products, well under 1% of their time).
  const int64_t max_tiles = 4 * static_cast<int64_t>(threads);
  const int64_t max_rows = std::min(std::max<int64_t>(1, M / kMinRows), max_tiles);
  const int64_t max_cols = std::max<int64_t>(1, N / kMinCols<T>);
  for (int64_t r = 1; r <= max_rows; ++r)
    for (int64_t c = 1; c <= std::min(max_cols, max_tiles / r); ++c) {
      if (r * c == 1) continue;
      const TileGrid grid{Split{M, 8, r}, Split{N, mr, c}};
      const double cost = gemm_grid_cost_ns<T>(K, grid, threads);
      if (cost < best_cost) {  // ties keep the earlier grid: fewer row parts, then fewer column parts
        best = grid;
        best_cost = cost;
      }
    }
  return best;
}

template const GemmCostModel& gemm_cost_model<float>();
template const GemmCostModel& gemm_cost_model<double>();
template double gemm_tile_cost_ns<float>(int64_t, int64_t, int64_t, int);
template double gemm_tile_cost_ns<double>(int64_t, int64_t, int64_t, int);
template double gemm_grid_cost_ns<float>(int64_t, const TileGrid&, int);
template double gemm_grid_cost_ns<double>(int64_t, const TileGrid&, int);
template TileGrid gemm_tile_grid<float>(int64_t, int64_t, int64_t, int);
template TileGrid gemm_tile_grid<double>(int64_t, int64_t, int64_t, int);

template <typename T>
void gemm_tiled_on_grid(T* out, const MatrixRef<T>& a_in, const MatrixRef<T>& b_in, T alpha, T beta, const T* bias,
                        const TileGrid& grid, int threads) {
  const int64_t M = a_in.rows, N = b_in.cols, K = a_in.cols;
  // Every part non-empty: at least one part, units of at least 1, no more parts than units.
  const auto fits = [](const Split& s, int64_t n) {
    return s.n == n && s.unit >= 1 && s.count >= 1 && s.count <= std::max<int64_t>(1, n / s.unit);
  };
  KILN_CHECK(fits(grid.rows, M) && fits(grid.cols, N),
             "gemm_tiled_on_grid: a grid of {} x {} parts (units {} x {}) over {} x {} does not fit the {} x {} output",
             grid.rows.count, grid.cols.count, grid.rows.unit, grid.cols.unit, grid.rows.n, grid.cols.n, M, N);
  if (M == 0 || N == 0) return;
  std::vector<T> scratch_a, scratch_b;
  const MatrixRef<T> a = mappable(a_in, scratch_a), b = mappable(b_in, scratch_b);
  const bool a_rows = is_row_major(a), b_rows = is_row_major(b);
  const Operand<T> oa = operand_of(a, a_rows), ob = operand_of(b, b_rows);
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  if (a_rows && b_rows) run_tiles<T, R, R>(out, oa, ob, N, K, alpha, beta, bias, grid, threads);
  else if (a_rows) run_tiles<T, R, C>(out, oa, ob, N, K, alpha, beta, bias, grid, threads);
  else if (b_rows) run_tiles<T, C, R>(out, oa, ob, N, K, alpha, beta, bias, grid, threads);
  else run_tiles<T, C, C>(out, oa, ob, N, K, alpha, beta, bias, grid, threads);
}

template <typename T>
void gemm_tiled(T* out, const MatrixRef<T>& a, const MatrixRef<T>& b, T alpha, T beta, const T* bias) {
  const int64_t M = a.rows, N = b.cols, K = a.cols;
  if (M == 0 || N == 0) return;
#ifdef _OPENMP
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  const int threads = 1;
#endif
  gemm_tiled_on_grid<T>(out, a, b, alpha, beta, bias, gemm_tile_grid<T>(M, N, K, threads), threads);
}

template void gemm_tiled_on_grid<float>(float*, const MatrixRef<float>&, const MatrixRef<float>&, float, float,
                                        const float*, const TileGrid&, int);
template void gemm_tiled_on_grid<double>(double*, const MatrixRef<double>&, const MatrixRef<double>&, double, double,
                                         const double*, const TileGrid&, int);
template void gemm_tiled<float>(float*, const MatrixRef<float>&, const MatrixRef<float>&, float, float, const float*);
template void gemm_tiled<double>(double*, const MatrixRef<double>&, const MatrixRef<double>&, double, double,
                                 const double*);

}  // namespace kiln::cpu
