// Validation and layout of the indexing ops; the kernels (indexing_cpu.cpp,
// indexing_cuda.cu) only move elements.
//
// Every op here becomes one of two kernels by building views, never copies:
//   - gather: out[i] = src[i + index[i] * stride] over out's shape, where src is the source
//     viewed at out's shape with stride 0 along the indexed dim. gather passes its index
//     as is; index_select passes its 1-D index broadcast along every other dim; embedding
//     passes the indices with a stride-0 trailing dim for the embedding columns.
//   - scatter: the mirror image over index's shape, writing (or adding) into the target.
// The index range check runs first (a kernel from its own table), so a bad index is an
// error before any element moves.
#include "indexing.h"

#include <string>

#include "../tensor/make.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<IndexCheckKernel> index_check_kernels;
KernelTable<GatherKernel> gather_kernels;
KernelTable<ScatterKernel> scatter_kernels;
}  // namespace dispatch

namespace {

// A 0-dim tensor as a 1-element 1-D view: PyTorch's gather and scatter treat a scalar as a
// vector of one (ensure_nonempty_dim), which lets one code path serve both.
Tensor as_1d(const Tensor& t) { return t.dim() == 0 ? new_view(t, {1}, {1}, t.storage_offset()) : t; }

// `t` viewed at `sizes` with its own strides except 0 along `dim`: the "every position of
// the indexed dim starts at the same element" view that both kernels add index * stride to.
Tensor restrided(const Tensor& t, int64_t dim, const Shape& sizes) {
  Shape strides = t.strides();
  strides[static_cast<size_t>(dim)] = 0;
  return new_view(t, sizes, std::move(strides), t.storage_offset());
}

void check_same_device(const char* name, const Tensor& self, const Tensor& other, const char* what,
                       const char* self_name = "self") {
  // Strictly one device: a kernel reads the index (and src) where it reads the data.
  KILN_CHECK(other.device() == self.device(), "{}: expected {} on {} ({}'s device), got {}", name, what,
             self.device().str(), self_name, other.device().str());
}

void check_int64_index(const char* name, const Tensor& index) {
  KILN_CHECK(index.dtype() == DType::Int64, "{}: expected an index of dtype int64, got {}", name, index.dtype());
}

// index_select and embedding accept int32 indices too (as PyTorch does); the kernels read int64.
Tensor int64_index(const char* name, const Tensor& index, const char* what) {
  KILN_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32,
             "{}: expected {} of dtype int64 or int32, got {}", name, what, index.dtype());
  return index.to(DType::Int64);
}

void check_no_overlap(const char* name, const Tensor& x) {
  for (int64_t d = 0; d < x.dim(); ++d)
    KILN_CHECK(x.strides()[d] != 0 || x.sizes()[d] <= 1,
               "{}: the tensor written to (shape {}, strides {}) has elements that share memory (an expanded view); "
               "call clone() on it first", name, shape_str(x.sizes()), shape_str(x.strides()));
}

// Throws when some value of `index` (int64) lies outside [0, size): the first such value in
// row-major order, with its position in the index tensor the user passed (`shape`).
void check_index_range(const char* name, const Tensor& index, int64_t size, int64_t dim, const Shape& shape,
                       const char* what) {
  if (index.numel() == 0) return;
  const IndexCheck bad = dispatch::index_check_kernels.get(name, index.device())(index, size);
  if (bad.position < 0) return;
  Shape position;
  int64_t rest = bad.position;
  for (size_t d = shape.size(); d-- > 0;) {
    position.insert(position.begin(), shape[d] == 0 ? 0 : rest % shape[d]);
    rest = shape[d] == 0 ? 0 : rest / shape[d];
  }
  KILN_FAIL("{}: index {} is out of bounds for dimension {} with size {} (at position {} of {})", name, bad.value, dim,
            size, shape_str(position), what);
}

// Every size of `index` must be at most `other`'s, except at dim `skip` (-1: none), where
// index may be larger than self.
void check_sizes_within(const char* name, const Tensor& index, const Tensor& other, int64_t skip, const char* what) {
  for (int64_t k = 0; k < index.dim(); ++k) {
    if (k == skip || index.sizes()[k] <= other.sizes()[k]) continue;
    const std::string why = skip >= 0 ? fmt::format("; index may be larger than self only at dimension {}", skip) : "";
    KILN_FAIL("{}: index of shape {} is larger than {} of shape {} at dimension {} ({} > {}{})", name,
              shape_str(index.sizes()), what, shape_str(other.sizes()), k, index.sizes()[k], other.sizes()[k], why);
  }
}

// The validated arguments of a scatter, ready for the kernel.
struct ScatterArgs {
  int64_t dim;
  Tensor index;   // as 1-D if it was 0-dim
  Tensor src;     // undefined for the value forms
};

ScatterArgs check_scatter(const char* name, ScatterMode mode, const Tensor& x, int64_t dim, const Tensor& index,
                          const Tensor* src) {
  check_defined(name, x, "self");
  check_defined(name, index, "index");
  check_int64_index(name, index);
  check_same_device(name, x, index, "index");
  if (src != nullptr) {
    check_defined(name, *src, "src");
    check_same_device(name, x, *src, "src");
    KILN_CHECK(src->dtype() == x.dtype(), "{}: expected self and src of the same dtype, got {} and {}", name,
               x.dtype(), src->dtype());
  }
  KILN_CHECK(mode != ScatterMode::Add || x.dtype() != DType::Bool,
             "{}: unsupported dtype bool (supported: int32, int64, float16, bfloat16, float32, float64)", name);
  const int64_t d = wrap_dim(dim, x.dim(), name);
  ScatterArgs args{d, as_1d(index), src != nullptr ? as_1d(*src) : Tensor()};
  const Tensor self = as_1d(x);
  KILN_CHECK(args.index.dim() == self.dim(),
             "{}: index must have as many dimensions as self: index of shape {}, self of shape {}", name,
             shape_str(index.sizes()), shape_str(x.sizes()));
  if (src != nullptr)
    KILN_CHECK(args.src.dim() == self.dim(),
               "{}: src must have as many dimensions as self: src of shape {}, self of shape {}", name,
               shape_str(src->sizes()), shape_str(x.sizes()));
  if (args.index.numel() > 0) {
    check_sizes_within(name, args.index, self, d, "self");
    if (src != nullptr) check_sizes_within(name, args.index, args.src, -1, "src");
  }
  return args;
}

// Runs a validated scatter into `target` (x itself, or the out-of-place copy).
void run_scatter(const char* name, ScatterMode mode, const Tensor& target, const ScatterArgs& args,
                 const Scalar& value) {
  if (args.index.numel() == 0) return;
  const Tensor self = as_1d(target);
  const int64_t size = self.sizes()[static_cast<size_t>(args.dim)];
  check_index_range(name, args.index, size, args.dim, args.index.sizes(), "index");
  // Operands sharing memory with the target are read from copies, so writes cannot feed reads.
  const Tensor index = args.index.is_alias_of(target) ? args.index.clone() : args.index;
  Tensor src;
  if (args.src.defined()) {
    const Tensor s = args.src.is_alias_of(target) ? args.src.clone() : args.src;
    src = new_view(s, index.sizes(), s.strides(), s.storage_offset());
  } else {
    // The value as a 0-dim tensor on the device (a fill kernel, no host-to-device copy), broadcast.
    const Tensor v = new_contiguous({}, target.dtype(), target.device(), name);
    dispatch::fill_kernels.get(name, target.device())(v, value);
    src = new_view(v, index.sizes(), Shape(index.sizes().size(), 0), 0);
  }
  dispatch::scatter_kernels.get(name, target.device())(mode, restrided(self, args.dim, index.sizes()), src, index,
                                                       self.strides()[static_cast<size_t>(args.dim)], size);
}

Tensor& scatter_in_place(const OpDesc& desc, ScatterMode mode, Tensor& x, int64_t dim, const Tensor& index,
                         const Tensor* src, const Scalar& value) {
  const char* name = desc.name;
  const ScatterArgs args = check_scatter(name, mode, x, dim, index, src);
  check_no_overlap(name, x);
  OpScope scope(desc, {&x, &index, src}, dim, src != nullptr ? std::optional<Scalar>() : value);
  run_scatter(name, mode, x, args, value);
  return scope.output_in_place(x);
}

Tensor scatter_copy(const OpDesc& desc, ScatterMode mode, const Tensor& x, int64_t dim, const Tensor& index,
                    const Tensor* src, const Scalar& value) {
  const char* name = desc.name;
  const ScatterArgs args = check_scatter(name, mode, x, dim, index, src);
  OpScope scope(desc, {&x, &index, src}, dim, src != nullptr ? std::optional<Scalar>() : value);
  Tensor out = new_contiguous(x.sizes(), x.dtype(), x.device(), name);
  dispatch::copy_kernels.get(name, x.device())(out, x);
  run_scatter(name, mode, out, args, value);
  return scope.output(out);
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  constexpr const char* name = "index_select";
  check_defined(name, x, "self");
  check_defined(name, index, "index");
  check_same_device(name, x, index, "index");
  KILN_CHECK(index.dim() <= 1, "{}: index must be a vector (1-D or 0-dim), got shape {}", name,
             shape_str(index.sizes()));
  KILN_CHECK(x.dim() > 0 || index.numel() == 1,
             "{}: an index into a 0-dim tensor must have exactly 1 value, got {}", name, index.numel());
  const int64_t d = wrap_dim(dim, x.dim(), name);
  OpScope scope(op::index_select, {&x, &index}, dim);
  const Tensor idx = as_1d(int64_index(name, index, "an index"));
  const Tensor self = as_1d(x);
  const int64_t size = self.sizes()[static_cast<size_t>(d)];
  check_index_range(name, idx, size, d, idx.sizes(), "index");
  Shape out_shape = self.sizes();
  out_shape[static_cast<size_t>(d)] = idx.numel();
  Tensor out = new_contiguous(out_shape, x.dtype(), x.device(), name);
  if (out.numel() > 0) {
    Shape index_strides(out_shape.size(), 0);
    index_strides[static_cast<size_t>(d)] = idx.strides()[0];
    dispatch::gather_kernels.get(name, x.device())(out, restrided(self, d, out_shape),
                                                   new_view(idx, out_shape, index_strides, idx.storage_offset()),
                                                   self.strides()[static_cast<size_t>(d)], size);
  }
  if (x.dim() == 0) out = new_view(out, {}, {}, 0);
  return scope.output(out);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  constexpr const char* name = "gather";
  check_defined(name, x, "self");
  check_defined(name, index, "index");
  check_int64_index(name, index);
  check_same_device(name, x, index, "index");
  const int64_t d = wrap_dim(dim, x.dim(), name);
  const Tensor self = as_1d(x), idx = as_1d(index);
  KILN_CHECK(idx.dim() == self.dim(),
             "{}: index must have as many dimensions as self: index of shape {}, self of shape {}", name,
             shape_str(index.sizes()), shape_str(x.sizes()));
  check_sizes_within(name, idx, self, d, "self");
  OpScope scope(op::gather, {&x, &index}, dim);
  const int64_t size = self.sizes()[static_cast<size_t>(d)];
  check_index_range(name, idx, size, d, idx.sizes(), "index");
  Tensor out = new_contiguous(index.sizes(), x.dtype(), x.device(), name);
  if (out.numel() > 0)
    dispatch::gather_kernels.get(name, x.device())(as_1d(out), restrided(self, d, idx.sizes()), idx,
                                                   self.strides()[static_cast<size_t>(d)], size);
  return scope.output(out);
}

Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_in_place(op::scatter_, ScatterMode::Assign, x, dim, index, &src, 0);
}
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  return scatter_in_place(op::scatter_, ScatterMode::Assign, x, dim, index, nullptr, value);
}
Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_in_place(op::scatter_add_, ScatterMode::Add, x, dim, index, &src, 0);
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_copy(op::scatter, ScatterMode::Assign, x, dim, index, &src, 0);
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  return scatter_copy(op::scatter, ScatterMode::Assign, x, dim, index, nullptr, value);
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_copy(op::scatter_add, ScatterMode::Add, x, dim, index, &src, 0);
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  constexpr const char* name = "embedding";
  check_defined(name, weight, "weight");
  check_defined(name, indices, "indices");
  KILN_CHECK(weight.dim() == 2,
             "{}: expected a 2-D weight [num_embeddings, embedding_dim], got shape {} (the arguments are (weight, "
             "indices), as in torch.embedding)", name, shape_str(weight.sizes()));
  check_same_device(name, weight, indices, "indices", "weight");
  OpScope scope(op::embedding, {&weight, &indices});
  const Tensor idx = int64_index(name, indices, "indices");
  const int64_t rows = weight.sizes()[0], cols = weight.sizes()[1];
  check_index_range(name, idx, rows, 0, idx.sizes(), "indices");
  Shape out_shape = idx.sizes();
  out_shape.push_back(cols);
  Tensor out = new_contiguous(out_shape, weight.dtype(), weight.device(), name);
  if (out.numel() > 0) {
    Shape src_strides(out_shape.size(), 0);
    src_strides.back() = weight.strides()[1];
    Shape index_strides = idx.strides();
    index_strides.push_back(0);
    dispatch::gather_kernels.get(name, weight.device())(
        out, new_view(weight, out_shape, src_strides, weight.storage_offset()),
        new_view(idx, out_shape, index_strides, idx.storage_offset()), weight.strides()[0], rows);
  }
  return scope.output(out);
}

}  // namespace kiln
