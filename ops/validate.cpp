// Shared validation and type promotion.
#include "validate.h"

#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"

namespace kiln {

void check_defined(const char* op, const Tensor& t, const char* arg) {
  KILN_CHECK(t.defined(), "{}: argument '{}' is an undefined tensor", op, arg);
}

Device common_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  std::optional<Device> device;
  bool only_cpu_scalars_so_far = true;
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    const bool cpu_scalar = t->dim() == 0 && t->device().is_cpu();
    if (!device) {
      device = t->device();
      only_cpu_scalars_so_far = cpu_scalar;
      continue;
    }
    if (t->device() == *device) continue;
    if (cpu_scalar) continue;                 // a CPU number joins a GPU op
    if (only_cpu_scalars_so_far) {           // everything before was a CPU number
      device = t->device();
      only_cpu_scalars_so_far = false;
      continue;
    }
    KILN_FAIL("{}: expected all tensors to be on the same device, but found at least two devices, {} and {}", op,
              device->str(), t->device().str());
  }
  KILN_INTERNAL_ASSERT(device.has_value(), "{}: no tensor operands", op);
  return *device;
}

namespace {
DType promote(std::optional<DType> a, DType b) { return a ? promote_types(*a, b) : b; }

// Combines a higher-priority group's dtype with a lower-priority group's: the higher group
// keeps its dtype unless the lower one brings a higher category.
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}
}  // namespace

ResultType& ResultType::add(const Tensor& t) {
  if (t.dim() > 0) dim_ = promote(dim_, t.dtype());
  else zero_dim_ = promote(zero_dim_, t.dtype());
  return *this;
}

ResultType& ResultType::add(const Scalar& s) {
  wrapped_ = promote(wrapped_, s.default_dtype());
  return *this;
}

DType ResultType::get() const {
  auto r = combine(dim_, combine(zero_dim_, wrapped_));
  KILN_INTERNAL_ASSERT(r.has_value(), "result type of no operands");
  return *r;
}

DType result_type(const Tensor& a, const Tensor& b) { return ResultType().add(a).add(b).get(); }
DType result_type(const Tensor& a, const Scalar& b) { return ResultType().add(a).add(b).get(); }

Tensor scalar_tensor(const Scalar& value, DType dtype) {
  Tensor t = new_contiguous({}, dtype, Device::cpu(), "scalar_tensor");
  dispatch_all(dtype, "scalar_tensor", [&]<typename T>() { *static_cast<T*>(t.data_ptr()) = value.to<T>(); });
  return t;
}

}  // namespace kiln
