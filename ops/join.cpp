// cat and stack: validation, then one copy-kernel call per input into a narrow view of the
// output.
#include "join.h"

#include "../tensor/make.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace {
bool is_legacy_empty(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }
}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i)
    KILN_CHECK(tensors[i].defined(), "cat: tensor {} of the list is undefined", i);
  // The reference shape is the first tensor that is not a legacy empty.
  size_t ref_index = 0;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!is_legacy_empty(tensors[i])) {
      ref_index = i;
      break;
    }
  const Tensor* ref = &tensors[ref_index];
  KILN_CHECK(ref->dim() > 0, "cat: zero-dimensional tensor cannot be concatenated (tensor of shape {})",
             shape_str(ref->sizes()));
  const int64_t d = wrap_dim(dim, ref->dim(), "cat");
  Device device = ref->device();
  ResultType rt;
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KILN_CHECK(t.device() == device, "cat: expected all tensors to be on the same device, but found {} and {}",
               device.str(), t.device().str());
    rt.add(t);
    if (is_legacy_empty(t) && &t != ref) continue;
    KILN_CHECK(t.dim() == ref->dim(), "cat: tensors must have the same number of dimensions: tensor {} has shape {} but "
               "tensor {} has shape {}", ref_index, shape_str(ref->sizes()), i, shape_str(t.sizes()));
    for (int64_t k = 0; k < t.dim(); ++k)
      KILN_CHECK(k == d || t.sizes()[k] == ref->sizes()[k],
                 "cat: sizes of tensors must match except in dimension {}: expected size {} but got size {} for tensor "
                 "{} in dimension {} (shapes {} and {})",
                 d, ref->sizes()[k], t.sizes()[k], i, k, shape_str(ref->sizes()), shape_str(t.sizes()));
    // Expanded inputs can be huge without memory: the sum is checked (the output's element
    // count is, by new_contiguous).
    int64_t sum;
    KILN_CHECK(!add_overflows(total, t.sizes()[d], &sum),
               "cat: the output's size in dimension {} overflows int64 (tensor {} of shape {} adds {} to {})", d, i,
               shape_str(t.sizes()), t.sizes()[d], total);
    total = sum;
  }
  Shape out_shape = ref->sizes();
  out_shape[d] = total;
  OpScope scope(op::cat, tensors, d);
  Tensor out = new_contiguous(out_shape, rt.get(), device, "cat");
  const auto copy = dispatch::copy_kernels.get("cat", device);
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (is_legacy_empty(t) && &t != ref) continue;
    const int64_t n = t.sizes()[d];
    if (n > 0) {
      Shape part = out_shape;
      part[d] = n;
      copy(new_view(out, part, out.strides(), offset * out.strides()[d], "cat"), t);
    }
    offset += n;
  }
  return scope.output(out);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].defined(), "stack: tensor {} of the list is undefined", i);
    KILN_CHECK(tensors[i].sizes() == tensors[0].sizes(),
               "stack: expects each tensor to be equal size, but got {} at entry 0 and {} at entry {}",
               shape_str(tensors[0].sizes()), shape_str(tensors[i].sizes()), i);
  }
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  // Checked here so the error names stack, not the cat it is built on.
  Shape out_shape = tensors[0].sizes();
  out_shape.insert(out_shape.begin() + d, static_cast<int64_t>(tensors.size()));
  KILN_CHECK(checked_numel(out_shape).has_value(),
             "stack: {} tensors of shape {} stack to shape {}, which has too many elements (the element count "
             "overflows int64)",
             tensors.size(), shape_str(tensors[0].sizes()), shape_str(out_shape));
  OpScope scope(op::stack, tensors, d);
  std::vector<Tensor> expanded;
  expanded.reserve(tensors.size());
  for (const Tensor& t : tensors) expanded.push_back(t.unsqueeze(d));
  return scope.output(cat(expanded, d));
}

}  // namespace kiln
