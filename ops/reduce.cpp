// Reduction ops: dim bookkeeping, dtype rules and keepdim. The input is viewed with the
// reduced dims moved last (no copy), so every kernel reduces trailing dims only.
#include "reduce.h"

#include "../tensor/make.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<ReduceKernel> reduce_kernels;
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::ArgMax: return "argmax";
    case ReduceOp::ArgMin: return "argmin";
  }
  return "reduce";
}

namespace {

DType output_dtype(ReduceOp op, DType in, const char* name) {
  switch (op) {
    case ReduceOp::Sum: return is_floating(in) ? in : DType::Int64;
    case ReduceOp::Mean:
      KILN_CHECK(is_floating(in), "{}: could not infer output dtype; the input must be a floating point tensor, got {}",
                 name, in);
      return in;
    case ReduceOp::Max:
    case ReduceOp::Min: return in;
    case ReduceOp::ArgMax:
    case ReduceOp::ArgMin:
      KILN_CHECK(in != DType::Bool, "{}: unsupported dtype bool", name);
      return DType::Int64;
  }
  return in;
}

// An empty `dims` reduces every dim. `desc` is what the user called (amax for an amax call,
// so errors and profiles say amax); its code is the ReduceOp. argmax and argmin record their
// one dim (None for all).
Tensor reduce(const OpDesc& desc, const Tensor& x, const Shape& dims, bool keepdim) {
  const auto op = static_cast<ReduceOp>(desc.code);
  const char* name = desc.name;
  check_defined(name, x);
  const int64_t nd = x.dim();
  std::vector<bool> reduced(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, nd, name);
    if (nd == 0) continue;  // dim 0 / -1 of a 0-dim tensor reduces nothing
    KILN_CHECK(!reduced[w], "{}: dim {} appears multiple times in the list of dims {}", name, w, shape_str(dims));
    reduced[w] = true;
  }
  const DType out_dtype = output_dtype(op, x.dtype(), name);

  // Permute: kept dims first (in order), reduced dims last.
  Shape perm_sizes, perm_strides, out_sizes, keep_sizes;
  int64_t reduced_count = 0;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) {
      perm_sizes.push_back(x.sizes()[d]);
      perm_strides.push_back(x.strides()[d]);
      out_sizes.push_back(x.sizes()[d]);
    }
    keep_sizes.push_back(reduced[d] ? 1 : x.sizes()[d]);
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) continue;
    const bool needs_values = op != ReduceOp::Sum && op != ReduceOp::Mean;
    KILN_CHECK(!needs_values || x.sizes()[d] != 0 || shape_numel(out_sizes) == 0,
               "{}: cannot reduce over dim {} of size 0 (input shape {}); the result would be undefined", name, d,
               shape_str(x.sizes()));
    perm_sizes.push_back(x.sizes()[d]);
    perm_strides.push_back(x.strides()[d]);
    ++reduced_count;
  }
  const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  OpScope scope = arg ? OpScope(desc, {&x}, dims.empty() ? std::optional<int64_t>() : dims[0], keepdim)
                      : OpScope(desc, {&x}, dims, keepdim);
  const Tensor permuted = new_view(x, perm_sizes, perm_strides, x.storage_offset());
  Tensor out = new_contiguous(out_sizes, out_dtype, x.device(), name);
  dispatch::reduce_kernels.get(name, x.device())(op, out, permuted, reduced_count);
  if (keepdim) out = new_view(out, keep_sizes, contiguous_strides(keep_sizes), 0);
  return scope.output(out);
}

}  // namespace

Tensor sum(const Tensor& x) { return reduce(op::sum, x, {}, false); }
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) { return reduce(op::sum, x, dims, keepdim); }
Tensor mean(const Tensor& x) { return reduce(op::mean, x, {}, false); }
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) { return reduce(op::mean, x, dims, keepdim); }
Tensor max(const Tensor& x) { return reduce(op::max, x, {}, false); }
Tensor max(const Tensor& x, const Shape& dims, bool keepdim) { return reduce(op::max, x, dims, keepdim); }
Tensor min(const Tensor& x) { return reduce(op::min, x, {}, false); }
Tensor min(const Tensor& x, const Shape& dims, bool keepdim) { return reduce(op::min, x, dims, keepdim); }
Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) {
  return reduce(op::amax, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) {
  return reduce(op::amin, x, dims, keepdim);
}
Tensor argmax(const Tensor& x) { return reduce(op::argmax, x, {}, false); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return reduce(op::argmax, x, {dim}, keepdim); }
Tensor argmin(const Tensor& x) { return reduce(op::argmin, x, {}, false); }
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) { return reduce(op::argmin, x, {dim}, keepdim); }

}  // namespace kiln
