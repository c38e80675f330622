// The tensor helpers of record_util.h.
#include "record_util.h"

#include "../../tensor/shape.h"

namespace kiln::records {

Tensor unreduce(const Tensor& g, const Shape& input_sizes, const Shape& dims, bool keepdim) {
  const int64_t nd = static_cast<int64_t>(input_sizes.size());
  Tensor out = g;
  if (!keepdim && nd > 0) {
    std::vector<bool> reduced(static_cast<size_t>(nd), dims.empty());
    for (int64_t d : dims) reduced[static_cast<size_t>(wrap_dim(d, nd, "unreduce"))] = true;
    Shape kept;
    for (int64_t d = 0; d < nd; ++d) kept.push_back(reduced[static_cast<size_t>(d)] ? 1 : input_sizes[static_cast<size_t>(d)]);
    out = out.reshape(kept);
  }
  return out.expand(input_sizes);
}

Tensor expand_index(const Tensor& index, int64_t dim, const Shape& like) {
  Shape shape(like.size(), 1);
  shape[static_cast<size_t>(dim)] = index.numel();
  return index.to(DType::Int64).reshape(shape).expand(like);
}

}  // namespace kiln::records
