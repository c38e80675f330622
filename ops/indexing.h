// Indexing ops with PyTorch's semantics and argument order: index_select, gather, scatter
// (assign and add, in place and out of place) and embedding.
//
// Indices must lie in [0, size) of the indexed dim (negative values are not wrapped, as in
// PyTorch). Every index is checked before anything is read or written, on both devices: an
// out-of-range index is a kiln::Error naming the op, the bad value, the dim and its size and
// the index's position, and a scatter that fails leaves its target untouched. On CUDA the
// check is a kernel plus one synchronizing 16-byte read-back per call (PyTorch instead
// raises an asynchronous device-side assert that poisons the CUDA context); while a stream
// is being captured into a CUDA graph the check is skipped, gathers then read 0 for a bad
// index and scatters drop it, so nothing outside the tensors is ever touched.
//
// Duplicate indices: scatter_add_ sums every contribution (atomically on CUDA, so the order
// of a floating sum, and its last-bit rounding, varies between runs; integer sums are
// exact, wrapping on overflow). scatter_ keeps the last value in row-major index order on
// the CPU; on CUDA which duplicate wins is unspecified, as in PyTorch.
#pragma once

#include "../tensor/tensor.h"

namespace kiln {

/// The entries of x at positions `index` (1-D or 0-dim, int64 or int32) along `dim`: x's
/// shape with index.numel() at `dim`.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1: index (int64) has x's number of dims
/// and no size larger than x's outside `dim`; out has index's shape and x's dtype.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// x[i][index[i][j][k]][k] = src[i][j][k] for dim 1, in place: index (int64) has x's number
/// of dims, no size larger than src's, nor than x's outside `dim`; src has x's dtype.
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// x[i][index[i][j][k]][k] = value for dim 1, in place.
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
/// x[i][index[i][j][k]][k] += src[i][j][k] for dim 1, in place, summing duplicates; not bool.
Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// scatter_ on a copy of x.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// scatter_ of a number on a copy of x.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
/// scatter_add_ on a copy of x.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// The rows of weight [num_embeddings, embedding_dim] picked by integer `indices` (int64 or
/// int32, any shape): indices.shape + [embedding_dim]. Argument order as torch.embedding
/// (torch.nn.functional.embedding takes (indices, weight)).
Tensor embedding(const Tensor& weight, const Tensor& indices);

}  // namespace kiln
