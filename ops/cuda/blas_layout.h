// How a Kiln GEMM is put to cuBLASLt, shared by the GEMM kernel (matmul_cuda.cu) and the
// fused linear+GELU kernels (fused_linear_gelu_cuda.cu): which strided matrices BLAS can read
// in place and how (transposed or not, leading dimension), and the cuBLASLt data and compute
// types of a Kiln dtype (float32 in true fp32 unless allow_tf32(), as in PyTorch). Kiln
// matrices are row-major, cuBLASLt's column-major: out = a @ b is computed as out^T = b^T a^T.
// CUDA builds only.
#pragma once

#include <cublasLt.h>

#include <algorithm>
#include <cstdint>

#include "../../core/error.h"
#include "../../tensor/dtype.h"
#include "../matmul.h"

namespace kiln::cuda_kernels {

/// A strided rows x cols matrix (strides in elements).
struct MatrixLayout {
  int64_t rows, cols, row_stride, col_stride;
};

/// How BLAS reads a Kiln matrix X as the column-major operand op(X^T): `trans` means the
/// memory holds X column-major (use op T); otherwise it holds X^T column-major (op N).
struct BlasView {
  bool ok = false;
  bool trans = false;
  int64_t ld = 0;
};

/// The BLAS view of `m`: one of its strides 1 and the other spanning a row or a column
/// (size-1 dims take any stride); anything else is not ok (copy it densely first).
inline BlasView blas_view(const MatrixLayout& m) {
  const bool row_major = (m.col_stride == 1 || m.cols == 1) && (m.rows == 1 || m.row_stride >= m.cols);
  if (row_major) return {true, false, m.rows == 1 ? std::max<int64_t>(m.cols, 1) : m.row_stride};
  const bool col_major = (m.row_stride == 1 || m.rows == 1) && (m.cols == 1 || m.col_stride >= m.rows);
  if (col_major) return {true, true, m.cols == 1 ? std::max<int64_t>(m.rows, 1) : m.col_stride};
  return {};
}

/// cuBLASLt's element type for a floating dtype (`op` names the caller in the error).
inline cudaDataType_t lt_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float64: return CUDA_R_64F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    default: KILN_FAIL("{}: cuBLASLt has no GEMM for dtype {}", op, dtype);
  }
}

/// The compute type: float64 in double, float32 in fp32 (TF32 when allow_tf32()), and
/// float16/bfloat16 with float accumulation.
inline cublasComputeType_t lt_compute(DType dtype) {
  if (dtype == DType::Float64) return CUBLAS_COMPUTE_64F;
  if (dtype == DType::Float32 && allow_tf32()) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;
}

}  // namespace kiln::cuda_kernels
