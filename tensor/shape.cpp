// Shape arithmetic. view_strides() follows the rule PyTorch users know: a view exists when
// each run of new dimensions maps onto a run of old dimensions that is contiguous in memory.
#include "shape.h"

#include "../core/error.h"

namespace kiln {

int64_t shape_numel(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    running *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

bool strides_are_contiguous(const Shape& sizes, const Shape& strides) {
  // A tensor without elements is contiguous whatever its strides (as in PyTorch): look for
  // a zero size before any stride can disqualify the layout.
  for (int64_t s : sizes)
    if (s == 0) return true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

std::string shape_str(std::span<const int64_t> sizes) { return fmt::format("[{}]", fmt::join(sizes, ", ")); }

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  KILN_CHECK(dim >= -n && dim < n, "{}: dim {} is out of range for a {}-D tensor (expected a dim in [{}, {}])",
             op, dim, ndim, -n, n - 1);
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right: dim i of the result meets dim (i - (n - size)) of each input.
    const int64_t da = i + a.size() >= n ? a[i + a.size() - n] : 1;
    const int64_t db = i + b.size() >= n ? b[i + b.size() - n] : 1;
    KILN_CHECK(da == db || da == 1 || db == 1,
               "{}: shapes {} and {} cannot be broadcast together (dim {}: {} vs {})", op, shape_str(a),
               shape_str(b), static_cast<int64_t>(i) - static_cast<int64_t>(n), da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target) {
  Shape out(target.size(), 0);
  const size_t lead = target.size() - sizes.size();
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[lead + i] = (sizes[i] == 1 && target[lead + i] != 1) ? 0 : strides[i];
  }
  return out;
}

Shape infer_shape(const Shape& requested, int64_t numel, const char* op) {
  Shape out = requested;
  int64_t known = 1;
  std::optional<size_t> infer_at;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(!infer_at, "{}: only one dimension can be inferred, got shape {}", op, shape_str(requested));
      infer_at = i;
    } else {
      KILN_CHECK(out[i] >= 0, "{}: invalid shape dimension {} in {}", op, out[i], shape_str(requested));
      known *= out[i];
    }
  }
  if (infer_at) {
    KILN_CHECK(known != 0 && numel % known == 0,
               "{}: shape {} is invalid for input of size {}", op, shape_str(requested), numel);
    out[*infer_at] = numel / known;
  } else {
    KILN_CHECK(known == numel, "{}: shape {} is invalid for input of size {}", op, shape_str(requested), numel);
  }
  return out;
}

std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes) {
  if (sizes.empty() || shape_numel(sizes) == 0) {
    // No elements (or one): any layout works. PyTorch keeps the strides of an unchanged
    // shape and gives contiguous strides otherwise.
    if (sizes == new_sizes) return strides;
    return contiguous_strides(new_sizes);
  }
  Shape out(new_sizes.size(), 0);
  // Walk old dims from the innermost, closing a "chunk" wherever memory stops being
  // contiguous; the new dims must then exactly tile each chunk.
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    const bool chunk_ends = d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
      out[view_d] = view_numel * chunk_stride;
      view_numel *= new_sizes[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace kiln
