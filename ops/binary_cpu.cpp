// CPU bodies of the binary ops (arithmetic and comparisons): the formulas of binary_math.h
// (shared with the CUDA kernels) applied elementwise, 16-bit floats computed in float and
// rounded back. Integer arithmetic wraps, as PyTorch's does; integer pow is exact. The GELU
// derivatives in float (and 16-bit) run through their vector versions (cpu/vec_math.h), as
// the fused linear+GELU backward does; large tensors are split over the threads (cpu/loops.h).
#include "../tensor/dtype_dispatch.h"
#include "binary_math.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "cpu/vec_blocks.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {

template <typename T>
void binary_typed(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  using A = acc_t<T>;
  const bool done = math::with_binary_formula<A>(op, alpha.to<A>(), [&](auto formula) {
    using Formula = decltype(formula);
    using Out = math::binary_out_t<Formula, A, T>;
    if constexpr (vec::has_vec_binary<A, Formula>) {
      map_blocks<T, T, T>(out, vec_binary_block<T, Formula>, kGrainTranscendental, a, b);
    } else {
      map<Out, T, T>(out, [formula](T x, T y) { return static_cast<Out>(formula(static_cast<A>(x), static_cast<A>(y))); },
                     a, b);
    }
  });
  KILN_INTERNAL_ASSERT(done, "binary op {} reached the CPU kernel with dtype {}", static_cast<int>(op), a.dtype());
}

void binary_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  dispatch_all(a.dtype(), "binary", [&]<typename T>() { binary_typed<T>(op, out, a, b, alpha); });
}

void where_cpu(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_all(out.dtype(), "where", [&]<typename T>() {
    map<T, bool, T, T>(out, [](bool c, T x, T y) { return c ? x : y; }, cond, a, b);
  });
}

}  // namespace

void register_binary_kernels() {
  dispatch::binary_kernels.set(DeviceType::CPU, &binary_cpu);
  dispatch::where_kernels.set(DeviceType::CPU, &where_cpu);
}

}  // namespace kiln::cpu
