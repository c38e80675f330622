// Validation and dtype rules of clamp; the comparisons are in clamp_cpu.cpp / clamp_cuda.cu.
// The bounds travel to the kernel as Scalars and are converted to the element type there,
// so both devices compare against the same value.
#include "clamp.h"

#include <limits>

#include "../tensor/make.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<ClampKernel> clamp_kernels;
}

namespace {

// An integer bound must fit the integer dtype it is compared in (PyTorch: "value cannot be
// converted to type int32_t without overflow"), or the comparison would use a wrapped value.
void check_bound_fits(const char* name, const char* which, const std::optional<Scalar>& bound, DType dtype) {
  if (!bound || !is_integral(dtype)) return;
  const int64_t v = bound->to_int();
  const bool fits = dtype == DType::Int64 || (v >= std::numeric_limits<int32_t>::min() &&
                                              v <= std::numeric_limits<int32_t>::max());
  KILN_CHECK(fits, "{}: {} {} cannot be converted to {} without overflow", name, which, *bound, dtype);
}

// The dtype clamp computes and returns in: x's for floating x, else promoted with the bounds.
DType clamp_dtype(const char* name, const Tensor& x, const std::optional<Scalar>& min,
                  const std::optional<Scalar>& max) {
  check_defined(name, x);
  KILN_CHECK(min.has_value() || max.has_value(), "{}: at least one of 'min' or 'max' must be given", name);
  DType dtype = x.dtype();
  if (!is_floating(dtype)) {
    ResultType rt;
    rt.add(x);
    if (min) rt.add(*min);
    if (max) rt.add(*max);
    dtype = rt.get();
  }
  KILN_CHECK(dtype != DType::Bool, "{}: unsupported dtype bool (supported: int32, int64, float16, bfloat16, float32, "
                                   "float64)", name);
  check_bound_fits(name, "min", min, dtype);
  check_bound_fits(name, "max", max, dtype);
  return dtype;
}

Tensor clamp_op(const OpDesc& desc, const Tensor& x, const std::optional<Scalar>& min,
                const std::optional<Scalar>& max) {
  const char* name = desc.name;
  const DType dtype = clamp_dtype(name, x, min, max);
  // clamp records both bounds; clamp_min and clamp_max their one.
  OpScope scope = desc.attrs.size() == 2 ? OpScope(desc, {&x}, min, max) : OpScope(desc, {&x}, min ? *min : *max);
  const Tensor in = x.to(dtype);
  Tensor out = new_contiguous(x.sizes(), dtype, x.device(), name);
  dispatch::clamp_kernels.get(name, x.device())(out, in, min, max);
  return scope.output(out);
}

}  // namespace

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return clamp_op(op::clamp, x, min, max);
}

Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  const DType dtype = clamp_dtype("clamp_", x, min, max);
  KILN_CHECK(dtype == x.dtype(), "clamp_: result type {} can't be cast to the desired output type {} (an in-place "
                                 "clamp keeps the tensor's dtype)", dtype, x.dtype());
  for (int64_t d = 0; d < x.dim(); ++d)
    KILN_CHECK(x.strides()[d] != 0 || x.sizes()[d] <= 1,
               "clamp_: the tensor (shape {}, strides {}) has elements that share memory (an expanded view); call "
               "clone() on it first", shape_str(x.sizes()), shape_str(x.strides()));
  OpScope scope(op::clamp_, {&x}, min, max);
  dispatch::clamp_kernels.get("clamp_", x.device())(x, x, min, max);
  return scope.output_in_place(x);
}

Tensor clamp_min(const Tensor& x, const Scalar& min) { return clamp_op(op::clamp_min, x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, const Scalar& max) { return clamp_op(op::clamp_max, x, std::nullopt, max); }

}  // namespace kiln
