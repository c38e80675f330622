// The cuBLASLt context of the CUDA GEMMs: one handle per device, one workspace per (device,
// stream), and a cache of matmul plans (descriptors, layouts and the algorithm the heuristic
// chose) keyed by everything that shapes them, so a repeated call pays a hash lookup and
// cublasLtMatmul, never a heuristic query. All of it is shared process state behind one
// mutex, taken once per call.
//
// Workspaces are tensors from Kiln's caching allocator (allocated on the stream they serve,
// so stream-ordered reuse keeps them safe) and live as long as the process, like the handles.
// The cache itself is deliberately leaked: at exit, CUDA and the allocators may already be
// gone, and nothing here must run after them. CUDA builds only.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda_kernels {

/// One cuBLASLt matmul in cuBLASLt's column-major terms: D [m, n] = epilogue(alpha * op(A)
/// [m, k] @ op(B) [k, n] + beta * C), C and D being the same memory with one layout. Equal
/// descriptions share a plan. Epilogues (cublasLt.h has the list):
///   - with the BIAS bit (BIAS, GELU_BIAS, GELU_AUX_BIAS, ...): bias [m] added to every column
///     of D (every row of Kiln's row-major output), read from LtGemmArgs::bias;
///   - with an auxiliary matrix (GELU_AUX*, DGELU*): aux [m, n] column-major with leading
///     dimension aux_ld (cuBLASLt wants a multiple of 8, at least m), the pre-activation that
///     GELU_AUX writes and DGELU reads, at LtGemmArgs::aux;
///   - with a bias gradient (BGRADA: sums of op(A) over k, length m; BGRADB: sums of op(B)
///     over k, length n; DGELU_BGRAD: sums of D's rows, length m): written to
///     LtGemmArgs::bias_grad.
/// D, aux and the bias (gradient) have D's element type.
struct LtGemmDesc {
  int32_t device = 0;
  cudaDataType_t dtype = CUDA_R_32F;  ///< A, B, C, D (and the bias vector, the aux matrix)
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t aux_ld = 0;                                 ///< epilogues with an aux matrix only
  int64_t batch = 1;                                  ///< strided batch count
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  ///< elements between batch entries
  int64_t stride_aux = 0;                             ///< elements between the aux matrices of a batch
  /// bytes: powers of two <= 256 (align_bias: the bias or the bias gradient vector)
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_bias = 0, align_aux = 0;

  bool operator==(const LtGemmDesc&) const = default;
};

/// The pointers and scalars of one call. alpha and beta are host values in the scale type:
/// double for CUBLAS_COMPUTE_64F, float otherwise. Each pointer is used only by the
/// epilogues that name it (LtGemmDesc).
struct LtGemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  const void* bias = nullptr;  ///< read by BIAS epilogues
  void* aux = nullptr;         ///< written by GELU_AUX*, read by DGELU*
  void* bias_grad = nullptr;   ///< written by BGRADA, BGRADB, DGELU_BGRAD
  const void* alpha = nullptr;
  const void* beta = nullptr;
};

/// Whether `epilogue` reads a bias vector.
bool lt_reads_bias(cublasLtEpilogue_t epilogue);
/// Whether `epilogue` writes or reads an auxiliary matrix.
bool lt_uses_aux(cublasLtEpilogue_t epilogue);
/// Whether `epilogue` writes a bias gradient.
bool lt_writes_bias_grad(cublasLtEpilogue_t epilogue);

/// Enqueues the matmul on `stream` (the current stream of desc.device, with that device
/// current). Returns false, launching nothing, when cuBLASLt offers no algorithm for `desc`
/// (remembered: asking again costs only the lookup), or when an aux matrix's leading
/// dimension breaks cuBLASLt's rule (a multiple of 8, at least m).
bool lt_matmul(const LtGemmDesc& desc, const LtGemmArgs& args, cudaStream_t stream);

/// The handle of `device` and the workspace of (device, stream), for callers that build
/// their own cuBLASLt calls. Both stay valid for the life of the process.
struct LtContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};
/// The LtContext of (device, stream), created on first use (call with `device` current).
LtContext lt_context(int device, cudaStream_t stream);

/// The largest power of two, at most 256, dividing `bits` (an address OR-ed with byte
/// offsets): the alignment cuBLASLt may assume for the matrices reached through them.
inline uint32_t alignment_of(uint64_t bits) {
  if (bits == 0) return 256;
  const uint64_t low = bits & (~bits + 1);
  return low >= 256 ? 256u : static_cast<uint32_t>(low);
}

}  // namespace kiln::cuda_kernels
