// The optimizers' update steps as ops (PyTorch's _fused_sgd_, _fused_adam_, _fused_adamw_):
// one call updates a parameter and its state in place with the formula of
// ops/optimizer_math.h. The list forms update many parameters with one call: on CUDA, when
// every tensor is contiguous and all share one floating dtype, in one multi-tensor launch
// (or a few, for very many tensors); otherwise parameter by parameter. Both give the same
// bits: they run the same functor on the same host-computed scalars.
//
// Step counts are host doubles, one per parameter: `step` is the count *after* this update
// (1 on the first step), as PyTorch increments its step before using it.
//
// Operand rules: grad and every state tensor have the parameter's shape, dtype and device;
// the parameter and the state tensors it writes must not have overlapping elements
// (expanded views); any strides otherwise. Floating dtypes only; the arithmetic runs in
// float for float32/float16/bfloat16 and in double for float64.
#pragma once

#include <initializer_list>
#include <span>

#include "../tensor/tensor.h"
#include "optimizer_math.h"

namespace kiln {

/// One SGD step of `param` in place with gradient `grad`; `momentum_buffer` (undefined when
/// config.momentum == 0) is set to the gradient when `first_step`, else updated.
void _fused_sgd_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdConfig& config,
                 bool first_step);
/// One Adam step of `param` in place (L2 weight decay added to the gradient); `step` >= 1 is
/// the count after this update; `max_exp_avg_sq` is used (and must be defined) with amsgrad.
void _fused_adam_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& max_exp_avg_sq, double step, const AdamConfig& config);
/// One AdamW step of `param` in place (decoupled weight decay: param *= 1 - lr * weight_decay).
void _fused_adamw_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const Tensor& max_exp_avg_sq, double step, const AdamConfig& config);

/// _fused_sgd_ over lists of equal length (momentum_buffers empty when momentum == 0;
/// first_steps one flag per parameter).
void _fused_sgd_(std::span<const Tensor> params, std::span<const Tensor> grads,
                 std::span<const Tensor> momentum_buffers, const SgdConfig& config, std::span<const bool> first_steps);
/// _fused_adam_ over lists of equal length (max_exp_avg_sqs empty unless amsgrad; one step
/// count per parameter).
void _fused_adam_(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                  std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> max_exp_avg_sqs,
                  std::span<const double> steps, const AdamConfig& config);
/// _fused_adamw_ over lists of equal length.
void _fused_adamw_(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                   std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> max_exp_avg_sqs,
                   std::span<const double> steps, const AdamConfig& config);

/// True when the list forms run these tensors (one list of every operand kind, each list
/// one tensor per parameter) as one multi-tensor launch rather than one kernel per
/// parameter: all on one CUDA device, contiguous, one floating dtype.
bool fused_step_uses_multi_tensor(std::initializer_list<std::span<const Tensor>> lists);

}  // namespace kiln
