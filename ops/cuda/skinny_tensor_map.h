// The TMA tensor map of a skinny-GEMM operand, shared by the sm_90a skinny kernels' host code
// (skinny_wgmma.cu: one linear; skinny_block.cu: the MLP block in one launch): a row-major
// [rows, k] 16-bit matrix moved in [box_rows, 64] boxes with the 128-byte swizzle the wgmma
// descriptors expect, reads past the edges giving zeros. sm_90a host code only (CUtensorMap).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../../core/error.h"
#include "skinny_gemm.h"
#include "sm90_tensor_map.h"

namespace kiln::cuda_kernels::skinny {

/// The tensor map of a row-major [rows, k] matrix of `type` with row stride `ld` elements, in
/// [box_rows, 64] boxes; throws kiln::Error naming `op` when the driver refuses it.
inline CUtensorMap skinny_tensor_map(const char* op, SkinnyType type, const void* base, int64_t k, int64_t rows,
                                     int64_t ld, int box_rows) {
  constexpr int kBoxK = 64;  // one 128-byte swizzle row of 16-bit elements
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kBoxK), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  CUtensorMap map{};
  const CUresult status = sm90::encode_tiled()(
      &map, type == SkinnyType::BFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
      const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  KILN_CHECK(status == CUDA_SUCCESS,
             "{}: cuTensorMapEncodeTiled returned {} for a [{}, {}] operand with row stride {} (the accepts() "
             "check should have declined this call)",
             op, static_cast<int>(status), rows, k, ld);
  return map;
}

}  // namespace kiln::cuda_kernels::skinny
