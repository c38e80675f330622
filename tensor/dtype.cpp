// dtype names and PyTorch's promotion lattice: bool < integers < floating types, with
// float16 + bfloat16 meeting at float32 because neither holds the other.
#include "dtype.h"

// Note [dtype is a value]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A Tensor's element type is a DType held in its TensorImpl, not a template parameter: a
// PyTorch program changes dtypes at run time (x.to(kHalf), promotion in a + b, a checkpoint
// read from disk), and one Tensor type lets ops, modules, the profiler's records and the
// kernel tables stay ordinary functions and values. The price is paid once per op call: the
// kernel turns the DType into a C++ type with one switch (dispatch_all, dispatch_floating,
// ... in dtype_dispatch.h) and runs a loop typed for it, so inner loops never branch on
// dtype, and an unsupported dtype becomes an error naming the op and the dtypes it
// supports. Every kernel is compiled once per dtype it lists: that is the build-time cost.

namespace kiln {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "unknown";
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (!fa && !fb) return DType::Int64;  // int32 with int64
  if (fa && !fb) return a;              // an integer never widens a floating type
  if (fb && !fa) return b;
  // Both floating and different.
  if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
    return DType::Float32;
  if (a == DType::Float64 || b == DType::Float64) return DType::Float64;
  return DType::Float32;  // one of them is float32, the other a 16-bit type
}

}  // namespace kiln

#include "dtype_dispatch.h"

namespace kiln::detail {

void throw_unsupported_dtype(const char* op, DType got, std::initializer_list<DType> supported) {
  std::string names;
  for (DType t : supported) names += (names.empty() ? "" : ", ") + std::string(dtype_name(t));
  KILN_FAIL("{}: unsupported dtype {} (supported: {})", op, got, names);
}

}  // namespace kiln::detail
