// Views: new sizes/strides/offset over the same storage, no data moved. Each is an op (it
// opens a scope) so graph capture records reshapes in user code and the profiler lists
// them, as PyTorch's does. reshape() is the one that may copy.
#include <algorithm>
#include <optional>

#include "../tensor/make.h"
#include "op_scope.h"

namespace kiln {

namespace {
Tensor finish(OpScope& scope, const char* op, const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  return scope.output(new_view(base, std::move(sizes), std::move(strides), offset, op));
}

// The stride a * b (a size times a stride, or a stride times a step), or nullopt when it
// does not fit int64 in bytes (kernels walk in byte strides). Strides that span elements
// always fit; only a dim of size 1 (never stepped along, so any stride describes it) or a
// dim of an empty view can get here with one that does not.
std::optional<int64_t> scaled_stride(int64_t a, int64_t b, size_t element_size) {
  int64_t stride, bytes;
  if (mul_overflows(a, b, &stride) || mul_overflows(stride, static_cast<int64_t>(element_size), &bytes))
    return std::nullopt;
  return stride;
}
}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  const Shape sizes_out = infer_shape(shape, numel(), "view");
  auto st = view_strides(sizes(), strides(), sizes_out, "view");
  KILN_CHECK(st.has_value(),
             "view: size {} is not compatible with input tensor's size {} and stride {} (at least one dimension "
             "spans across two contiguous subspaces); use reshape() instead",
             shape_str(sizes_out), shape_str(sizes()), shape_str(strides()));
  OpScope scope(op::view, {this}, shape);
  return finish(scope, "view", *this, sizes_out, std::move(*st), storage_offset());
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape sizes_out = infer_shape(shape, numel(), "reshape");
  OpScope scope(op::reshape, {this}, shape);
  if (auto st = view_strides(sizes(), strides(), sizes_out, "reshape"))
    return finish(scope, "reshape", *this, sizes_out, std::move(*st), storage_offset());
  const Tensor dense = clone();
  return finish(scope, "reshape", dense, sizes_out, contiguous_strides(sizes_out, "reshape"), 0);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t d0 = wrap_dim(dim0, dim(), "transpose"), d1 = wrap_dim(dim1, dim(), "transpose");
  OpScope scope(op::transpose, {this}, dim0, dim1);
  Shape sz = sizes(), st = strides();
  if (dim() > 0) {
    std::swap(sz[d0], sz[d1]);
    std::swap(st[d0], st[d1]);
  }
  return finish(scope, "transpose", *this, sz, st, storage_offset());
}

Tensor Tensor::t() const {
  KILN_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dimensions, but got a {}-D tensor of shape {}", dim(),
             shape_str(sizes()));
  OpScope scope(op::t, {this});
  if (dim() < 2) return finish(scope, "t", *this, sizes(), strides(), storage_offset());
  return scope.output(transpose(0, 1));  // nested, as aten::t calls aten::transpose
}

Tensor Tensor::permute(const Shape& dims) const {
  KILN_CHECK(static_cast<int64_t>(dims.size()) == dim(),
             "permute: number of dims in the permutation ({}) does not match the tensor's dims ({}): got {} for shape {}",
             dims.size(), dim(), shape_str(dims), shape_str(sizes()));
  Shape sz(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    KILN_CHECK(!seen[d], "permute: dim {} appears more than once in {}", d, shape_str(dims));
    seen[d] = true;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
  }
  OpScope scope(op::permute, {this}, dims);
  return finish(scope, "permute", *this, sz, st, storage_offset());
}

Tensor Tensor::movedim(int64_t source, int64_t destination) const {
  const int64_t s = wrap_dim(source, dim(), "movedim"), d = wrap_dim(destination, dim(), "movedim");
  Shape order;
  for (int64_t i = 0; i < dim(); ++i)
    if (i != s) order.push_back(i);
  if (dim() > 0) order.insert(order.begin() + d, s);
  return permute(order);
}

Tensor Tensor::narrow(int64_t dim_, int64_t start, int64_t length) const {
  KILN_CHECK(dim() > 0, "narrow: cannot be applied to a 0-dim tensor");
  const int64_t d = wrap_dim(dim_, dim(), "narrow");
  const int64_t size_d = sizes()[d];
  KILN_CHECK(start >= -size_d && start <= size_d,
             "narrow: start {} is out of range for dim {} of size {} (expected a start in [{}, {}])", start, d, size_d,
             -size_d, size_d);
  if (start < 0) start += size_d;
  KILN_CHECK(length >= 0, "narrow: length must be non-negative, got {}", length);
  KILN_CHECK(length <= size_d - start,  // not start + length, which can overflow
             "narrow: start ({}) + length ({}) exceeds dimension size ({}) of dim {}", start, length, size_d, d);
  OpScope scope(op::narrow, {this}, dim_, start, length);
  Shape sz = sizes();
  sz[d] = length;
  return finish(scope, "narrow", *this, sz, strides(), storage_offset() + start * strides()[d]);
}

Tensor Tensor::slice(int64_t dim_, int64_t start, int64_t end, int64_t step) const {
  KILN_CHECK(dim() > 0, "slice: cannot be applied to a 0-dim tensor");
  const int64_t d = wrap_dim(dim_, dim(), "slice");
  KILN_CHECK(step > 0, "slice: step must be positive, got {}", step);
  const int64_t n = sizes()[d];
  // Python slicing: negative bounds count from the end, out-of-range bounds clamp.
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  // end - start + step - 1 could overflow for a large step; this form cannot.
  const int64_t length = end > start ? (end - start - 1) / step + 1 : 0;
  Shape sz = sizes(), st = strides();
  sz[d] = length;
  // A step past the end leaves one element, whose stride may then overflow harmlessly.
  const std::optional<int64_t> stepped = scaled_stride(st[d], step, element_size());
  KILN_CHECK(stepped.has_value() || length <= 1,
             "slice: stride {} times step {} overflows int64 in bytes (sizes {}, strides {})", st[d], step,
             shape_str(sizes()), shape_str(strides()));
  if (stepped) st[d] = *stepped;
  OpScope scope(op::slice, {this}, d, start, end, step);
  return finish(scope, "slice", *this, sz, st, storage_offset() + start * strides()[d]);
}

Tensor Tensor::select(int64_t dim_, int64_t index) const {
  KILN_CHECK(dim() > 0, "select: cannot be applied to a 0-dim tensor");
  const int64_t d = wrap_dim(dim_, dim(), "select");
  const int64_t n = sizes()[d];
  KILN_CHECK(index >= -n && index < n, "select: index {} is out of bounds for dimension {} with size {}", index, d, n);
  if (index < 0) index += n;
  OpScope scope(op::select, {this}, dim_, index);
  Shape sz = sizes(), st = strides();
  const int64_t offset = storage_offset() + index * st[d];
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return finish(scope, "select", *this, sz, st, offset);
}

Tensor Tensor::unsqueeze(int64_t dim_) const {
  // The new dim may go anywhere in [0, dim()], so the range is one wider than for other ops.
  KILN_CHECK(dim_ >= -(dim() + 1) && dim_ <= dim(),
             "unsqueeze: dim {} is out of range for a {}-D tensor (expected a dim in [{}, {}])", dim_, dim(),
             -(dim() + 1), dim());
  const int64_t d = dim_ < 0 ? dim_ + dim() + 1 : dim_;
  Shape sz = sizes(), st = strides();
  const int64_t new_stride = d < dim() ? scaled_stride(sz[d], st[d], element_size()).value_or(1) : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  OpScope scope(op::unsqueeze, {this}, dim_);
  return finish(scope, "unsqueeze", *this, sz, st, storage_offset());
}

Tensor Tensor::squeeze() const {
  OpScope scope(op::squeeze, {this}, std::optional<int64_t>());
  Shape sz, st;
  for (int64_t d = 0; d < dim(); ++d) {
    if (sizes()[d] == 1) continue;
    sz.push_back(sizes()[d]);
    st.push_back(strides()[d]);
  }
  return finish(scope, "squeeze", *this, sz, st, storage_offset());
}

Tensor Tensor::squeeze(int64_t dim_) const {
  const int64_t d = wrap_dim(dim_, dim(), "squeeze");
  OpScope scope(op::squeeze, {this}, std::optional<int64_t>(dim_));
  Shape sz = sizes(), st = strides();
  if (dim() > 0 && sz[d] == 1) {
    sz.erase(sz.begin() + d);
    st.erase(st.begin() + d);
  }
  return finish(scope, "squeeze", *this, sz, st, storage_offset());
}

Tensor Tensor::expand(const Shape& target) const {
  KILN_CHECK(static_cast<int64_t>(target.size()) >= dim(),
             "expand: the number of sizes provided ({}) must be greater or equal to the number of dimensions in the "
             "tensor ({}): got {} for shape {}",
             target.size(), dim(), shape_str(target), shape_str(sizes()));
  const size_t lead = target.size() - sizes().size();
  Shape sz(target.size()), st(target.size());
  // Right to left, as PyTorch's inferExpandGeometry: a new leading dim of size 1 gets the
  // stride of a dense dim over the dim inside it; any other new or expanded dim gets 0
  // (so does every dim when a 0-dim tensor is expanded).
  for (size_t i = target.size(); i-- > 0;) {
    if (i < lead) {
      KILN_CHECK(target[i] >= 0, "expand: the expanded size {} is not allowed in a leading, non-existing dimension "
                                 "{} (target {})", target[i], i, shape_str(target));
      sz[i] = target[i];
      st[i] = (target[i] == 1 && i + 1 < target.size())
                  ? scaled_stride(sz[i + 1], st[i + 1], element_size()).value_or(1)
                  : 0;
      continue;
    }
    const int64_t have = sizes()[i - lead];
    const int64_t want = target[i] == -1 ? have : target[i];
    KILN_CHECK(want == have || have == 1,
               "expand: the expanded size of the tensor ({}) must match the existing size ({}) at non-singleton "
               "dimension {}: target sizes {}, tensor sizes {}",
               want, have, i, shape_str(target), shape_str(sizes()));
    KILN_CHECK(want >= 0, "expand: invalid size {} in {}", want, shape_str(target));
    sz[i] = want;
    st[i] = (want == have) ? strides()[i - lead] : 0;
  }
  // Stride-0 dims make any size free in memory, but the element count must still fit int64.
  shape_numel(sz, "expand");
  OpScope scope(op::expand, {this}, target);
  return finish(scope, "expand", *this, sz, st, storage_offset());
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  const int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  if (dim() == 0) return reshape({1});
  KILN_CHECK(s <= e, "flatten: start_dim ({}) cannot come after end_dim ({})", s, e);
  Shape out;
  for (int64_t d = 0; d < s; ++d) out.push_back(sizes()[d]);
  // Fits int64 unless the tensor is empty (a zero size elsewhere): then an error naming flatten.
  out.push_back(shape_numel(Shape(sizes().begin() + s, sizes().begin() + e + 1), "flatten"));
  for (int64_t d = e + 1; d < dim(); ++d) out.push_back(sizes()[d]);
  return reshape(out);
}

Tensor Tensor::as_strided(const Shape& sz, const Shape& st, int64_t offset) const {
  KILN_CHECK(sz.size() == st.size(), "as_strided: {} sizes but {} strides", sz.size(), st.size());
  KILN_CHECK(offset >= 0, "as_strided: negative storage offset {}", offset);
  for (size_t d = 0; d < sz.size(); ++d)
    KILN_CHECK(sz[d] >= 0 && st[d] >= 0, "as_strided: negative size or stride in sizes {} strides {}", shape_str(sz),
               shape_str(st));
  shape_numel(sz, "as_strided");
  check_byte_strides(sz, st, element_size(), "as_strided");
  const int64_t extent = storage_extent(sz, st, offset, "as_strided");  // 0 for an empty view
  const int64_t capacity = static_cast<int64_t>(unsafe_impl()->storage()->nbytes() / element_size());
  KILN_CHECK(extent <= capacity,
             "as_strided: sizes {} strides {} offset {} reach element {}, but the storage holds {} elements",
             shape_str(sz), shape_str(st), offset, extent - 1, capacity);
  OpScope scope(op::as_strided, {this}, sz, st, offset);
  return finish(scope, "as_strided", *this, sz, st, offset);
}

Tensor Tensor::detach() const {
  OpScope scope(op::detach, {this});
  return scope.output(new_view(*this, sizes(), strides(), storage_offset(), "detach"));
}

}  // namespace kiln
