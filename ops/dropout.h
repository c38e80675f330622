// Dropout: during training, zero each element with probability p and scale the survivors
// by 1 / (1 - p); in evaluation it is the identity. The mask comes from the default
// generator, so manual_seed makes it reproducible.
#pragma once

#include "../tensor/generator.h"
#include "../tensor/tensor.h"

namespace kiln {

/// Inverted dropout with probability p in [0, 1]; returns x itself when !train or p == 0.
Tensor dropout(const Tensor& x, double p = 0.5, bool train = true);

namespace detail {
/// dropout with the mask drawn from `state` (the recorded call; replay and backward use it).
Tensor dropout_with_state(const Tensor& x, double p, bool train, PhiloxState state);
}  // namespace detail

}  // namespace kiln
