// dropout validation and dispatch; the mask is drawn inside the kernel from Philox blocks
// reserved here (one uniform per element).
#include "dropout.h"

#include "../tensor/make.h"
#include "../tensor/philox.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<DropoutKernel> dropout_kernels;
}

Tensor dropout(const Tensor& x, double p, bool train) {
  check_defined("dropout", x);
  KILN_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability has to be between 0 and 1, but got {}", p);
  KILN_CHECK(is_floating(x.dtype()), "dropout: unsupported dtype {} (supported: float16, bfloat16, float32, float64)",
             x.dtype());
  const bool active = train && p != 0.0;
  // Uniforms are drawn 4 per Philox block whatever the dtype (the mask needs no more bits).
  // The state is drawn before the scope opens, so the record carries it: replay and the
  // backward pass regenerate the very same mask from it.
  const PhiloxState state =
      active ? default_generator().reserve((static_cast<uint64_t>(x.numel()) + 3) / 4) : PhiloxState{0, 0};
  return detail::dropout_with_state(x, p, train, state);
}

namespace detail {
Tensor dropout_with_state(const Tensor& x, double p, bool train, PhiloxState state) {
  OpScope scope(op::dropout, {&x}, p, train, static_cast<int64_t>(state.seed), static_cast<int64_t>(state.first_block));
  if (!train || p == 0.0) return scope.output(x);
  const Tensor in = x.contiguous();
  Tensor out = new_contiguous(x.sizes(), x.dtype(), x.device(), "dropout");
  dispatch::dropout_kernels.get("dropout", x.device())(out, in, p, default_generator().for_kernel(state));
  return scope.output(out);
}
}  // namespace detail

}  // namespace kiln
