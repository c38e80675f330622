// Gradient clipping by total norm (torch.nn.utils.clip_grad_norm_): the norm of all
// gradients taken together, and every gradient scaled by max_norm / (norm + 1e-6) when that
// is below 1. Computed with Kiln ops on the gradients' device, without reading the norm back
// to the host (unless error_if_nonfinite asks for the check), as PyTorch does: the gradients
// are always multiplied, by a coefficient clamped to 1.
#pragma once

#include <vector>

#include "../tensor/tensor.h"

namespace kiln::nn::utils {

/// Scales the gradients of `params` (those without one are skipped) so that their total
/// `norm_type`-norm (2, 1, any p > 0, or infinity for the largest magnitude) is at most
/// `max_norm`; returns the total norm before clipping as a 0-dim tensor on the first
/// gradient's device (a 0-dim float32 CPU zero when no parameter has a gradient). With
/// error_if_nonfinite, a NaN or infinite total norm throws instead and leaves the gradients
/// unchanged.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

}  // namespace kiln::nn::utils
