// Losses with mean reduction: cross_entropy over class indices (one fused kernel:
// log-softmax, gather and mean), nll_loss and mse_loss; and the internal forward/backward
// pieces of cross_entropy and nll_loss that autograd's formulas call (PyTorch's names with a
// leading underscore: public, but not what a user calls).
//
// On CUDA neither loss waits for the GPU: a target outside [0, C) is found by the kernel and
// raised as a kiln::Error naming the op at the next synchronisation (cuda::synchronize,
// item(), to_vector(), a blocking copy to the host), like PyTorch's device-side assert but
// leaving the context usable (Note [Device-side errors], core/device_error.h). On the CPU it
// is raised by the call itself.
#pragma once

#include "../tensor/tensor.h"

namespace kiln {

/// Mean negative log-likelihood of class-index targets under log-probabilities
/// logp [N, C] (or [C] with a 0-dim target, or [N, C, d1, ...] with target [N, d1, ...]);
/// targets equal to ignore_index are skipped (all skipped: NaN, as in PyTorch).
Tensor nll_loss(const Tensor& logp, const Tensor& target, int64_t ignore_index = -100);
/// Mean cross entropy between logits [N, C] (or [C], or [N, C, d1, ...]) and integer class
/// indices [N] (or [], or [N, d1, ...]); targets equal to ignore_index are skipped.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100);
/// Mean squared error between two tensors of the same shape.
Tensor mse_loss(const Tensor& input, const Tensor& target);

/// What cross_entropy's forward computes and its backward needs.
struct CrossEntropyForward {
  Tensor loss;       ///< 0-dim, the logits' dtype: cross_entropy's result
  Tensor logsumexp;  ///< per position (the target's shape): log(sum over classes of exp(logits)),
                     ///< float32 (float64 for float64 logits)
  Tensor count;      ///< 0-dim int64: how many targets are not ignore_index
};
/// cross_entropy with the values its backward needs (one fused kernel).
CrossEntropyForward _cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100);
/// Gradient of cross_entropy wrt logits (logits' shape): grad_output (0-dim) *
/// (softmax(logits) - one_hot(target)) / count along the class dim, 0 where the target is
/// ignore_index; logsumexp and count come from _cross_entropy_forward.
Tensor _cross_entropy_backward(const Tensor& grad_output, const Tensor& logits, const Tensor& target,
                               const Tensor& logsumexp, const Tensor& count, int64_t ignore_index = -100);

/// What nll_loss's forward computes and its backward needs.
struct NllLossForward {
  Tensor loss;   ///< 0-dim, logp's dtype: nll_loss's result
  Tensor count;  ///< 0-dim int64: how many targets are not ignore_index
};
/// nll_loss with the count of targets that are not ignore_index.
NllLossForward _nll_loss_forward(const Tensor& logp, const Tensor& target, int64_t ignore_index = -100);
/// Gradient of nll_loss wrt logp (logp's shape): -grad_output / count at each target's class,
/// 0 elsewhere and where the target is ignore_index; count comes from _nll_loss_forward.
Tensor _nll_loss_backward(const Tensor& grad_output, const Tensor& logp, const Tensor& target, const Tensor& count,
                          int64_t ignore_index = -100);

}  // namespace kiln
