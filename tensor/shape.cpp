// Shape arithmetic. view_strides() follows the rule PyTorch users know: a view exists when
// each run of new dimensions maps onto a run of old dimensions that is contiguous in memory.
#include "shape.h"

#include "../core/error.h"

namespace kiln {

int64_t checked_mul(int64_t a, int64_t b, const char* op, std::span<const int64_t> shape) {
  int64_t r;
  KILN_CHECK(!mul_overflows(a, b, &r), "{}: size arithmetic for shape {} overflows int64 ({} * {})", op,
             shape_str(shape), a, b);
  return r;
}

int64_t checked_add(int64_t a, int64_t b, const char* op, std::span<const int64_t> shape) {
  int64_t r;
  KILN_CHECK(!add_overflows(a, b, &r), "{}: size arithmetic for shape {} overflows int64 ({} + {})", op,
             shape_str(shape), a, b);
  return r;
}

std::optional<int64_t> checked_numel(std::span<const int64_t> sizes) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : sizes) {
    if (s == 0) return 0;  // empty, however large the other sizes are
    overflow |= mul_overflows(n, s, &n);
  }
  if (overflow) return std::nullopt;
  return n;
}

int64_t shape_numel(const Shape& sizes, const char* op) {
  const std::optional<int64_t> n = checked_numel(sizes);
  KILN_CHECK(n.has_value(), "{}: shape {} has too many elements (the element count overflows int64)", op,
             shape_str(sizes));
  return *n;
}

int64_t checked_nbytes(const Shape& sizes, int64_t numel, size_t element_size, const char* op) {
  int64_t nbytes;
  KILN_CHECK(!mul_overflows(numel, static_cast<int64_t>(element_size), &nbytes),
             "{}: shape {} is too large: {} elements of {} bytes overflow int64 bytes", op, shape_str(sizes), numel,
             element_size);
  return nbytes;
}

Shape contiguous_strides(const Shape& sizes, const char* op) {
  Shape strides(sizes.size());
  int64_t running = 1;
  bool overflow = false;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    // The product past the outermost dim is never a stride: it may overflow harmlessly.
    if (i > 0) overflow |= mul_overflows(running, std::max<int64_t>(sizes[i], 1), &running);
  }
  KILN_CHECK(!overflow, "{}: the row-major strides of shape {} overflow int64", op, shape_str(sizes));
  return strides;
}

int64_t storage_extent(const Shape& sizes, const Shape& strides, int64_t offset, const char* op) {
  for (int64_t s : sizes)
    if (s == 0) return 0;
  int64_t last = offset;  // largest element index reached
  bool overflow = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    int64_t span;
    overflow |= mul_overflows(sizes[d] - 1, strides[d], &span) || add_overflows(last, span, &last);
  }
  overflow |= add_overflows(last, 1, &last);
  KILN_CHECK(!overflow, "{}: sizes {} with strides {} and offset {} reach past the largest int64 element index", op,
             shape_str(sizes), shape_str(strides), offset);
  return last;
}

void check_byte_strides(const Shape& sizes, const Shape& strides, size_t element_size, const char* op) {
  for (int64_t st : strides) {
    int64_t bytes;
    KILN_CHECK(!mul_overflows(st, static_cast<int64_t>(element_size), &bytes),
               "{}: stride {} of {}-byte elements overflows int64 in bytes (sizes {}, strides {})", op, st,
               element_size, shape_str(sizes), shape_str(strides));
  }
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

std::optional<Shape> try_broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right: dim i of the result meets dim (i - (n - size)) of each input.
    const int64_t da = i + a.size() >= n ? a[i + a.size() - n] : 1;
    const int64_t db = i + b.size() >= n ? b[i + b.size() - n] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  std::optional<Shape> out = try_broadcast_shapes(a, b);
  if (!out) [[unlikely]] {
    // Name the first dim that does not match (as a negative index, counted from the right).
    const size_t n = std::max(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
      const int64_t da = i + a.size() >= n ? a[i + a.size() - n] : 1;
      const int64_t db = i + b.size() >= n ? b[i + b.size() - n] : 1;
      KILN_CHECK(da == db || da == 1 || db == 1,
                 "{}: shapes {} and {} cannot be broadcast together (dim {}: {} vs {})", op, shape_str(a),
                 shape_str(b), static_cast<int64_t>(i) - static_cast<int64_t>(n), da, db);
    }
    KILN_INTERNAL_ASSERT(false, "{}: shapes {} and {} neither broadcast nor mismatch", op, shape_str(a), shape_str(b));
  }
  // Two valid operands can still broadcast to more elements than int64 counts ([2^32, 1]
  // with [1, 2^32]).
  KILN_CHECK(checked_numel(*out).has_value(),
             "{}: shapes {} and {} broadcast to shape {}, which has too many elements (the element count overflows "
             "int64)",
             op, shape_str(a), shape_str(b), shape_str(*out));
  return std::move(*out);
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
  bool overflow = false, has_zero = false;
  std::optional<size_t> infer_at;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(!infer_at, "{}: only one dimension can be inferred, got shape {}", op, shape_str(requested));
      infer_at = i;
    } else {
      KILN_CHECK(out[i] >= 0, "{}: invalid shape dimension {} in {}", op, out[i], shape_str(requested));
      has_zero |= out[i] == 0;
      overflow |= mul_overflows(known, out[i], &known);
    }
  }
  if (has_zero) known = 0;
  // A product past int64 cannot equal the input's element count (a wrapped one might).
  KILN_CHECK(has_zero || !overflow, "{}: shape {} is invalid for input of size {} (its element count overflows int64)",
             op, shape_str(requested), numel);
  if (infer_at) {
    KILN_CHECK(known != 0 && numel % known == 0,
               "{}: shape {} is invalid for input of size {}", op, shape_str(requested), numel);
    out[*infer_at] = numel / known;
  } else {
    KILN_CHECK(known == numel, "{}: shape {} is invalid for input of size {}", op, shape_str(requested), numel);
  }
  return out;
}

std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes, const char* op) {
  if (sizes.empty() || shape_numel(sizes, op) == 0) {
    // No elements (or one): any layout works. PyTorch keeps the strides of an unchanged
    // shape and gives contiguous strides otherwise.
    if (sizes == new_sizes) return strides;
    return contiguous_strides(new_sizes, op);
  }
  Shape out(new_sizes.size(), 0);
  // Walk old dims from the innermost, closing a "chunk" wherever memory stops being
  // contiguous; the new dims must then exactly tile each chunk.
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    // Partial products of sizes stay within numel; a size-1 dim's stride can be anything,
    // so products with strides are checked (an overflowing one matches no real stride).
    tensor_numel *= sizes[d];
    int64_t span;
    const bool chunk_ends = d == 0 || (sizes[d - 1] != 1 && (mul_overflows(tensor_numel, chunk_stride, &span) ||
                                                             strides[d - 1] != span));
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
      if (mul_overflows(view_numel, chunk_stride, &out[view_d])) return std::nullopt;
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
