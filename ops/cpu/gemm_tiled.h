// The CPU GEMM's float and double engine: the output is cut into tiles whose sizes depend on
// the matrix sizes only, OpenMP threads take whole tiles, and each tile runs Eigen's
// single-threaded GEMM kernel over fixed chunks of K. Every output element is therefore
// summed in one order whatever the thread count: the same tile call, on whichever thread.
// The bias (or beta term) is written into each tile by the thread that computes it, just
// before its first product, instead of in a separate pass over the output.
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
/// calling thread's OpenMP team size; the result does not depend on it.
template <typename T>
void gemm_tiled(T* out, const MatrixRef<T>& a, const MatrixRef<T>& b, T alpha, T beta, const T* bias);

/// Which kernel runs the tiles in this build: oneDNN's sgemm for float (KILN_ONEDNN) and
/// Eigen's for double, or Eigen's for both.
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

/// The output tiling of gemm_tiled for an M x N x K product of T: a function of the sizes
/// (and of Eigen's register block for T) only, never of the thread count.
struct TileGrid {
  Split rows, cols;
};
/// The tile grid gemm_tiled<T> uses for an M x N output with inner size K.
template <typename T>
TileGrid gemm_tile_grid(int64_t M, int64_t N, int64_t K);

}  // namespace kiln::cpu
