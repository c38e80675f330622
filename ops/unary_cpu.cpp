// CPU bodies of the unary ops: the formulas of unary_math.h (shared with the CUDA kernels)
// applied elementwise, 16-bit floats computed in float and rounded back. The transcendental
// formulas with a vector version (cpu/vec_math.h: exp, tanh, sigmoid, silu, both GELUs in
// float; exp, sigmoid, silu in double) run through it a block at a time, in every layout, so
// an element's result does not depend on the layout or the thread count; the rest keep the
// scalar functor. Large tensors are split over the OpenMP threads (cpu/loops.h).
#include "../tensor/dtype_dispatch.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "cpu/vec_blocks.h"
#include "kernels.h"
#include "unary_math.h"

namespace kiln::cpu {

namespace {

template <typename T>
void unary_typed(UnaryOp op, const Tensor& out, const Tensor& in) {
  using A = acc_t<T>;
  const bool done = math::with_unary_formula<A>(op, [&](auto formula) {
    using Formula = decltype(formula);
    if constexpr (vec::has_vec_unary<A, Formula>) {
      map_blocks<T, T>(out, vec_unary_block<T, Formula>, kGrainTranscendental, in);
    } else {
      map<T, T>(out, [formula](T v) { return static_cast<T>(formula(static_cast<A>(v))); }, in);
    }
  });
  KILN_INTERNAL_ASSERT(done, "unary op {} reached the CPU kernel with dtype {}", static_cast<int>(op), out.dtype());
}

void unary_cpu(UnaryOp op, const Tensor& out, const Tensor& in) {
  dispatch_numeric(out.dtype(), "unary", [&]<typename T>() { unary_typed<T>(op, out, in); });
}

}  // namespace

void register_unary_kernels() { dispatch::unary_kernels.set(DeviceType::CPU, &unary_cpu); }

}  // namespace kiln::cpu
