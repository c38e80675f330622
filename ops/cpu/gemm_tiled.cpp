// Tiled, OpenMP-parallel float/double GEMM on Eigen's single-threaded kernel (gemm_tiled.h).
//
// Why not Eigen's own threads: Eigen splits a product across threads only along one
// dimension and re-decides its blocking per thread count; at linear's small M (64 rows) it
// barely scaled past one core. Here Kiln owns the parallel loop: the output is cut into tiles
// sized from M, N, K and the thread count, OpenMP threads take whole tiles (first come, first
// served), and each tile calls oneDNN's sgemm (float) or Eigen's sequential GEMM driver
// (internal::general_matrix_matrix_product with no parallel info) once per chunk of K. Chunks
// are never longer than Eigen's kc, so Eigen never splits them further: an output element is
// the bias (or beta * out, or 0), then plus alpha times each chunk's dot product in chunk
// order, each chunk summed in registers by the kernel. The same tile call runs whichever
// thread takes it, so for a given thread count the bits never change.
//
// Why the tiles depend on the thread count (they did not before 2026-12-02): one grid cannot
// suit one thread and sixteen. Each tile packs its panels of A and B again, so one thread is
// fastest with the whole product in one call (15% faster than 512 x 512 tiles at linear
// (1024, 1024, 4096) with oneDNN), while sixteen threads want several tiles each so that one
// late thread does not hold the rest (16 tiles of 512 x 512 for 16 threads cost the MLP block
// at batch 1024 a third of its speed against PyTorch). The README says what this changes.
#include "gemm_tiled.h"

#include <Eigen/Core>
#include <algorithm>
#include <exception>
#include <vector>

#include "../../core/error.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef KILN_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

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

// `count` parts of about `target` (at least one, none empty) in multiples of `unit`.
Split split(int64_t n, int64_t target, int64_t unit) {
  const int64_t wanted = std::max<int64_t>(1, (n + target - 1) / target);
  return {n, unit, std::min(wanted, std::max<int64_t>(1, n / unit))};
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

#ifdef KILN_WITH_ONEDNN
// One float tile through oneDNN's sgemm (row-major; 'T' reads a column-major operand), added
// to the initialised tile (beta = 1). oneDNN runs it on the calling thread: inside an active
// parallel region it does not nest, and omp_set_num_threads(1) here (this implicit task's
// setting only) keeps it from forking when the region runs on one thread. oneDNN then blocks
// K by the sizes alone, so the tile's bits do not depend on the thread count.
void onednn_tile(float* out, int64_t ldo, const Operand<float>& a, bool a_rows, const Operand<float>& b, bool b_rows,
                 int64_t i0, int64_t mt, int64_t j0, int64_t nt, int64_t K, float alpha) {
  omp_set_num_threads(1);
  const dnnl_status_t status =
      dnnl_sgemm(a_rows ? 'N' : 'T', b_rows ? 'N' : 'T', mt, nt, K, alpha, a.data + i0 * a.row_stride, a.ld,
                 b.data + j0 * b.col_stride, b.ld, 1.0f, out + i0 * ldo + j0, ldo);
  KILN_CHECK(status == dnnl_success, "matmul: oneDNN's sgemm failed with status {} on a {}x{}x{} tile",
             static_cast<int>(status), mt, nt, K);
}
#endif

// One tile: rows [i0, i0 + mt) and columns [j0, j0 + nt) of out, K in fixed chunks.
template <typename T, int LhsOrder, int RhsOrder>
void run_tile(T* out, int64_t ldo, const Operand<T>& a, const Operand<T>& b, int64_t i0, int64_t mt, int64_t j0,
              int64_t nt, int64_t K, int64_t chunk, T alpha, T beta, const T* bias) {
  init_tile(out, ldo, i0, mt, j0, nt, beta, bias);
#ifdef KILN_WITH_ONEDNN
  if constexpr (std::is_same_v<T, float>) {
    if (K > 0)
      onednn_tile(out, ldo, a, LhsOrder == Eigen::RowMajor, b, RhsOrder == Eigen::RowMajor, i0, mt, j0, nt, K, alpha);
    return;
  }
#endif
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
void run_tiles(T* out, const Operand<T>& a, const Operand<T>& b, int64_t M, int64_t N, int64_t K, T alpha, T beta,
               const T* bias) {
#ifdef _OPENMP
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  const int threads = 1;
#endif
  const TileGrid grid = gemm_tile_grid<T>(M, N, K, threads);
  const int64_t col_tiles = grid.cols.count, tiles = grid.rows.count * col_tiles;
  // Equal chunks (a function of K and kc only), so the last one is not a short remainder.
  const int64_t limit = sequential_kc<T>();
  const int64_t chunks = std::max<int64_t>(1, (K + limit - 1) / limit);
  const int64_t chunk = std::min(limit, ((K + chunks - 1) / chunks + 7) / 8 * 8);
  // Below about a million multiply-adds a fork costs more than it saves; the tiles (and so
  // the bits) are the same either way. No more threads than tiles: an idle thread would only
  // add its arrival at the closing barrier.
  const bool parallel = tiles > 1 && static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) >= 1e6;
  const int team = static_cast<int>(std::min<int64_t>(threads, tiles));
  std::exception_ptr error;
  // Dynamic: a thread that shares its core with another process (or started late) takes
  // fewer tiles instead of holding everyone at the end; which thread runs a tile does not
  // change its bits.
#pragma omp parallel for schedule(dynamic, 1) if (parallel) num_threads(team)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t r = t / col_tiles, c = t % col_tiles;
    const int64_t i0 = grid.rows.begin(r), j0 = grid.cols.begin(c);
    try {
      run_tile<T, LhsOrder, RhsOrder>(out, N, a, b, i0, grid.rows.begin(r + 1) - i0, j0, grid.cols.begin(c + 1) - j0, K,
                                      chunk, alpha, beta, bias);
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
  return "oneDNN sgemm (float, 16-bit) and Eigen (double) on Kiln's tiles";
#else
  return "Eigen on Kiln's tiles";
#endif
}

template <typename T>
TileGrid gemm_tile_grid(int64_t M, int64_t N, int64_t K, int threads) {
  // Eigen computes the row-major output as its transpose, so our columns are its rows, cut
  // into register blocks of mr (3 packets: 48 floats with AVX-512): column tiles in multiples of
  // mr keep every tile off Eigen's slower remainder paths (one packet, then scalars) except at
  // the right edge; rows go in multiples of 8.
  //
  // One thread: the whole product is one tile (one call packs each panel once). Several: each
  // tile call packs its panels of A and B again, a cost per multiply-add that goes as
  // 1/rows + 1/cols of the tile, so tiles start at 512 x 512; then the larger edge is halved
  // while the grid has fewer than kTilesPerThread tiles per thread and each tile keeps at least
  // kMinTileMacs multiply-adds, so the small GEMMs of a training step (256 x 784 x 256) still
  // spread over a few cores. Edges stop near kMinEdge (128): a oneDNN call has a fixed cost
  // (packing set-up) that smaller tiles do not repay; one thread ran 256 x 784 x 256 in 824 us
  // as one call, 696 us as 2 x 2 tiles of 128, 1634 us as 4 x 4 tiles of 64 and 2727 us as 8 x 8
  // (2-core VM, oneDNN 2.6, medians of 30). (Before: 1 Mi multiply-adds and 32-row tiles; on the
  // GPU machine's host 16 threads then ran a Fashion-MNIST epoch 3x slower than 8, in a run
  // with much steal time, and 1.2x slower with these in a run without: BENCHMARKS.md 9.)
  constexpr int64_t mr = Eigen::internal::gebp_traits<T, T>::mr;
  if (threads <= 1) return TileGrid{Split{M, 8, 1}, Split{N, mr, 1}};
  constexpr int64_t kTilesPerThread = 2;
  const int64_t wanted_tiles = kTilesPerThread * threads;
  constexpr double kMinTileMacs = 4.0 * 1024.0 * 1024.0;
  constexpr int64_t kMinEdge = 128;
  const double macs = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(std::max<int64_t>(K, 1));
  TileGrid grid{split(M, 512, 8), split(N, 512, mr)};
  bool rows_can = true, cols_can = true;  // false once halving that edge would not do
  // A finer grid is taken only if it has more tiles and each keeps kMinTileMacs.
  const auto fine_enough = [&](const Split& rows, const Split& cols) {
    const double tiles = static_cast<double>(rows.count) * static_cast<double>(cols.count);
    return tiles > static_cast<double>(grid.rows.count) * static_cast<double>(grid.cols.count) &&
           macs / tiles >= kMinTileMacs;
  };
  while (grid.rows.count * grid.cols.count < wanted_tiles) {
    // Halve the longer edge of the current tiles, if it can still shrink.
    const int64_t row_edge = (M + grid.rows.count - 1) / grid.rows.count;
    const int64_t col_edge = (N + grid.cols.count - 1) / grid.cols.count;
    rows_can = rows_can && row_edge >= 2 * kMinEdge;
    cols_can = cols_can && col_edge >= 2 * kMinEdge;
    if (cols_can && (col_edge >= row_edge || !rows_can)) {
      const Split finer = split(N, col_edge / 2, mr);
      cols_can = fine_enough(grid.rows, finer);
      if (cols_can) grid.cols = finer;
    } else if (rows_can) {
      const Split finer = split(M, row_edge / 2, 8);
      rows_can = fine_enough(finer, grid.cols);
      if (rows_can) grid.rows = finer;
    } else {
      break;
    }
  }
  return grid;
}

template TileGrid gemm_tile_grid<float>(int64_t, int64_t, int64_t, int);
template TileGrid gemm_tile_grid<double>(int64_t, int64_t, int64_t, int);

template <typename T>
void gemm_tiled(T* out, const MatrixRef<T>& a_in, const MatrixRef<T>& b_in, T alpha, T beta, const T* bias) {
  const int64_t M = a_in.rows, N = b_in.cols, K = a_in.cols;
  if (M == 0 || N == 0) return;
  std::vector<T> scratch_a, scratch_b;
  const MatrixRef<T> a = mappable(a_in, scratch_a), b = mappable(b_in, scratch_b);
  const bool a_rows = is_row_major(a), b_rows = is_row_major(b);
  const Operand<T> oa = operand_of(a, a_rows), ob = operand_of(b, b_rows);
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  if (a_rows && b_rows) run_tiles<T, R, R>(out, oa, ob, M, N, K, alpha, beta, bias);
  else if (a_rows) run_tiles<T, R, C>(out, oa, ob, M, N, K, alpha, beta, bias);
  else if (b_rows) run_tiles<T, C, R>(out, oa, ob, M, N, K, alpha, beta, bias);
  else run_tiles<T, C, C>(out, oa, ob, M, N, K, alpha, beta, bias);
}

template void gemm_tiled<float>(float*, const MatrixRef<float>&, const MatrixRef<float>&, float, float, const float*);
template void gemm_tiled<double>(double*, const MatrixRef<double>&, const MatrixRef<double>&, double, double,
                                 const double*);

}  // namespace kiln::cpu
