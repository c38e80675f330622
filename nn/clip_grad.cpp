// clip_grad_norm_: per-gradient norms, the norm of those norms, and one multiply per gradient
// by the clamped coefficient, all as Kiln ops on the gradients' devices.
#include "clip_grad.h"

#include <cmath>
#include <limits>

#include "../ops/ops.h"
#include "../ops/grad_mode.h"

namespace kiln::nn::utils {

namespace {

// The norm_type-norm of all elements of `x` as a 0-dim tensor of x's dtype. 16-bit inputs are
// reduced in float32 (as torch.linalg.vector_norm accumulates them), so squares of large
// float16 values do not overflow before the sum.
Tensor vector_norm(const Tensor& x, double norm_type) {
  if (x.element_size() == 2) return vector_norm(x.to(kFloat32), norm_type).to(x.dtype());
  if (std::isinf(norm_type)) return max(abs(x));
  if (norm_type == 1.0) return sum(abs(x));
  if (norm_type == 2.0) return sqrt(sum(x * x));
  return pow(sum(pow(abs(x), norm_type)), 1.0 / norm_type);
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  KILN_CHECK(norm_type > 0.0, "clip_grad_norm_: norm_type must be positive or infinity, got {}", norm_type);
  KILN_CHECK(max_norm >= 0.0, "clip_grad_norm_: max_norm must be >= 0, got {}", max_norm);
  NoGradGuard no_grad;  // scaling gradients is not part of any computation to differentiate
  std::vector<Tensor> grads;
  for (size_t i = 0; i < params.size(); ++i) {
    KILN_CHECK(params[i].defined(), "clip_grad_norm_: parameter {} is an undefined tensor", i);
    if (params[i].grad().defined()) grads.push_back(params[i].grad());
  }
  if (grads.empty()) return zeros({});
  const Device device = grads[0].device();
  DType dtype = grads[0].dtype();
  for (const Tensor& g : grads) dtype = promote_types(dtype, g.dtype());
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) {
    if (g.numel() == 0) continue;  // contributes nothing (and max() of no elements is undefined)
    norms.push_back(vector_norm(g, norm_type).to(device, dtype));
  }
  const Tensor total =
      norms.empty() ? zeros({}, TensorOptions(dtype).device(device)) : vector_norm(stack(norms), norm_type);
  if (error_if_nonfinite) {
    const double value = total.item<double>();
    KILN_CHECK(std::isfinite(value),
               "clip_grad_norm_: the total norm of order {} for gradients from `parameters` is "
               "non-finite ({}), so it cannot be clipped. To disable this error and scale the "
               "gradients by the non-finite norm anyway, set error_if_nonfinite=false",
               norm_type, value);
  }
  const Tensor coef = clamp_max(max_norm / (total + 1e-6), 1.0);
  for (Tensor g : grads) g.copy_(g * coef.to(g.device()));
  return total;
}

}  // namespace kiln::nn::utils
