// The CPU GEMM's float and double engine: the output is cut into tiles whose sizes depend on
// the matrix sizes and the thread count (chosen by a cost model per tile: the grid with the
// shortest estimated time on those threads; one thread always takes the whole product in one
// call), OpenMP threads take whole tiles, and each tile runs a single-threaded GEMM kernel
// (oneDNN's for float: its matmul primitive, or its sgemm for large tiles on Intel CPUs,
// onednn_matmul.h; Eigen's over fixed chunks of K for double). For a
// given thread count every output element is therefore summed in one order, on whichever
// thread takes its tile; another thread count may cut other tiles and change the last digits.
// The bias (or beta term) is applied to each tile by the thread that computes it (by the
// oneDNN primitive itself, added to the tile right after sgemm, or written into the tile before
// Eigen's first product), instead of in a separate pass over the output.
#pragma once

#include <cstdint>

namespace kiln::cpu {

/// A strided rows x cols matrix view (strides in elements).
template <typename T>
struct MatrixRef {
  const T* data;
  int64_t rows, cols, row_stride, col_stride;
};

/// out (dense row-major a.rows x b.cols) = alpha * a @ b + (bias ? bias broadcast over the
/// rows : beta * out), for float and double; beta == 0 ignores out's contents. Runs on the
/// calling thread's OpenMP team size (one thread inside a parallel region); the bits depend
/// on the sizes and that thread count only.
template <typename T>
void gemm_tiled(T* out, const MatrixRef<T>& a, const MatrixRef<T>& b, T alpha, T beta, const T* bias);

/// Which kernel runs the tiles in this build: oneDNN's matmul primitive for float
/// (KILN_ONEDNN) and Eigen's for double, or Eigen's for both.
const char* gemm_backend();

/// A near-equal split of [0, n) into `count` parts whose boundaries are multiples of `unit`
/// (all but the end, n): part t is [begin(t), begin(t + 1)).
struct Split {
  int64_t n, unit, count;
  /// The first index of part t (n for t == count).
  int64_t begin(int64_t t) const {
    // (n / unit) * t can overflow int64 for a huge n; the quotient fits.
    return t >= count ? n : static_cast<int64_t>(static_cast<unsigned __int128>(n / unit) * t / count) * unit;
  }
};

/// The output tiling of gemm_tiled for an M x N x K product of T on a number of threads: a
/// function of the sizes, the thread count and Eigen's register block for T only.
struct TileGrid {
  Split rows, cols;
};
/// The tile grid gemm_tiled<T> uses for an M x N output with inner size K on `threads` threads:
/// of the grids with parts in multiples of (8, Eigen's register block), the one whose
/// estimated time (gemm_grid_cost_ns) is least; one tile when threads <= 1.
template <typename T>
TileGrid gemm_tile_grid(int64_t M, int64_t N, int64_t K, int threads);

/// The constants of the tile cost model, nanoseconds on one core (calibration: gemm_tiled.cpp).
struct GemmCostModel {
  double call_ns;         // fixed cost of one kernel call
  double pack_rows_ns;    // per element of the tile's rows of A, rows * K
  double pack_cols_ns;    // per element of the tile's columns of B, cols * K
  double mac_ns;          // per multiply-add of the tile, its columns rounded up to whole 16-float vectors
  double out_ns;          // per output element (the bias written first, the result stored)
  double fork_ns;         // opening and closing a parallel region
  double fork_thread_ns;  // and per thread of its team
  double team_l2_bytes;   // in a team: a core's L2, which a tile's panels of A and B should fit
  double team_l2_k;       // the most of K the panels count
  double team_l2_spill;   // the multiply-add's extra cost per doubling of the panels beyond the L2 (two at most)
  double team_l2_full_team;  // in a team this large or larger; in a team of t, (t - 1) / (this - 1) of it
};

/// The cost model gemm_tile_grid<T> minimises.
template <typename T>
const GemmCostModel& gemm_cost_model();

/// The estimated time of one tile call of rows x cols x K on one core, while team - 1 other
/// threads run theirs (1: alone); in a team, panels that overflow the L2 cost more.
template <typename T>
double gemm_tile_cost_ns(int64_t rows, int64_t cols, int64_t K, int team = 1);

/// The estimated time of a product with inner size K on `grid` with `threads` threads: with
/// min(threads, tiles) of them busy, each takes ceil(tiles / busy) tiles of the largest
/// tile's cost in a team of the busy ones, plus a region of all `threads` when that is more than one.
template <typename T>
double gemm_grid_cost_ns(int64_t K, const TileGrid& grid, int threads);

/// gemm_tiled on an explicit grid (benchmarks and tests), the tiles on a region of `threads`
/// OpenMP threads (all of them, even when fewer have a tile); one tile, or one thread, runs
/// on the calling thread without a region. The bits depend on the sizes and the grid only.
/// Throws kiln::Error when the grid is not over the output's sizes or has an empty part.
template <typename T>
void gemm_tiled_on_grid(T* out, const MatrixRef<T>& a, const MatrixRef<T>& b, T alpha, T beta, const T* bias,
                        const TileGrid& grid, int threads);

}  // namespace kiln::cpu
