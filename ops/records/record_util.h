// Shared pieces of the op records (ops/records/*.cpp): building descriptors, reading a
// replayed call's inputs, and the small tensor helpers the backward formulas use. Internal
// to ops/records.
#pragma once

#include <span>
#include <vector>

#include "../kernels.h"
#include "../op_cost.h"
#include "../op_list.h"
#include "../ops.h"

namespace kiln::records {

/// The input at slot i, or an undefined tensor (absent, or not saved).
inline const Tensor& in(std::span<const Tensor> inputs, size_t i) {
  static const Tensor kNone;
  return i < inputs.size() ? inputs[i] : kNone;
}

/// One output as a replay result.
inline std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

/// Gradients for an op's inputs: `n` slots, all undefined to start with.
inline std::vector<Tensor> grads(size_t n) { return std::vector<Tensor>(n); }

/// The first output's gradient (undefined when none flowed).
inline const Tensor& grad0(const BackwardArgs& a) { return a.grad_outputs[0]; }

/// `g` (the gradient of a reduction's output) shaped back to the input's: reduced dims
/// reinserted as size 1 (unless keepdim kept them) and expanded to `input_sizes`.
Tensor unreduce(const Tensor& g, const Shape& input_sizes, const Shape& dims, bool keepdim);

/// The element positions of `index` (int64) along `dim` expanded to `like`'s shape: the
/// index tensor index_select's backward scatters with.
Tensor expand_index(const Tensor& index, int64_t dim, const Shape& like);

}  // namespace kiln::records
