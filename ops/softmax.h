// softmax and log_softmax along one dim (floating dtypes), computed stably by subtracting
// each row's max.
#pragma once

#include "../tensor/tensor.h"

namespace kiln {

/// exp(x - max) / sum(exp(x - max)) along `dim`.
Tensor softmax(const Tensor& x, int64_t dim);
/// log(softmax(x, dim)), computed as (x - max) - log(sum(exp(x - max))).
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace kiln
