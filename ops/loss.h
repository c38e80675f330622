// Losses with mean reduction: cross_entropy over class indices (log_softmax + nll_loss, as
// PyTorch composes it) and mse_loss.
#pragma once

#include "../tensor/tensor.h"

namespace kiln {

/// Mean negative log-likelihood of class-index targets under log-probabilities
/// logp [N, C] (or [C] with a 0-dim target); targets equal to ignore_index are skipped.
Tensor nll_loss(const Tensor& logp, const Tensor& target, int64_t ignore_index = -100);
/// Mean cross entropy between logits [N, C] (or [C], or [N, C, d1, ...]) and integer class
/// indices [N] (or [], or [N, d1, ...]); targets equal to ignore_index are skipped.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100);
/// Mean squared error between two tensors of the same shape.
Tensor mse_loss(const Tensor& input, const Tensor& target);

}  // namespace kiln
