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

/// The tile sizes gemm_tiled uses for an M x N output with inner size K ({rows, cols}).
struct TileShape {
  int64_t rows, cols;
};
/// The tile shape for an M x N x K product: a function of the sizes only, never of threads.
TileShape gemm_tile_shape(int64_t M, int64_t N, int64_t K);

}  // namespace kiln::cpu
