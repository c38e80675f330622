// Validation and dispatch of the fused optimizer steps (see optimizer_step.h). The single
// forms check one parameter's operands and run its kernel; the list forms check every
// parameter once, then take the multi-tensor kernel when the tensors allow it (CUDA,
// contiguous, one dtype) and the per-parameter kernel otherwise.
//
// These ops write their operands in place, so each bumps the version counter of the
// parameter and of the state tensors it writes (autograd's saved-tensor check reads it).
#include "optimizer_step.h"

#include <cmath>
#include <vector>

#include "../tensor/shape.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<SgdStepKernel> sgd_step_kernels;
KernelTable<AdamStepKernel> adam_step_kernels;
KernelTable<SgdMultiStepKernel> sgd_multi_step_kernels;
KernelTable<AdamMultiStepKernel> adam_multi_step_kernels;
}  // namespace dispatch

namespace {

// True when some element of t is reached by two indices (a stride-0 dim of size > 1): an
// in-place update through such a view would race with itself.
bool has_overlap(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && t.sizes()[d] > 1) return true;
  return false;
}

// Checks that `state` (argument `arg`) matches the parameter's shape, dtype and device.
void check_like_param(const char* op, const Tensor& param, const Tensor& state, const char* arg) {
  check_defined(op, state, arg);
  KILN_CHECK(state.sizes() == param.sizes(), "{}: {} has shape {} but the parameter has shape {}", op, arg,
             shape_str(state.sizes()), shape_str(param.sizes()));
  KILN_CHECK(state.dtype() == param.dtype(), "{}: {} has dtype {} but the parameter has dtype {}", op, arg,
             state.dtype(), param.dtype());
  KILN_CHECK(state.device() == param.device(), "{}: {} is on {} but the parameter is on {}", op, arg, state.device(),
             param.device());
}

// Checks a written operand: no overlapping elements, no memory shared with the parameter.
void check_written(const char* op, const Tensor& param, const Tensor& t, const char* arg) {
  KILN_CHECK(!has_overlap(t),
             "{}: {} (shape {}, strides {}) has elements that share memory (an expanded view); "
             "an in-place update needs distinct elements",
             op, arg, shape_str(t.sizes()), shape_str(t.strides()));
  KILN_CHECK(&t == &param || !t.is_alias_of(param), "{}: {} shares memory with the parameter", op, arg);
}

void check_param(const char* op, const Tensor& param, const Tensor& grad) {
  check_defined(op, param, "param");
  KILN_CHECK(param.is_floating_point(), "{}: the parameter must be floating point, got dtype {}", op, param.dtype());
  check_written(op, param, param, "the parameter");
  check_like_param(op, param, grad, "grad");
}

void check_step(const char* op, double step) {
  KILN_CHECK(std::isfinite(step) && step >= 1.0,
             "{}: step must be a finite count >= 1 (the count after this update), "
             "got {}",
             op, step);
}

void check_sgd(const char* op, const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdConfig& config) {
  check_param(op, param, grad);
  if (config.momentum != 0.0) {
    check_like_param(op, param, buf, "momentum_buffer");
    check_written(op, param, buf, "momentum_buffer");
  } else {
    KILN_CHECK(!buf.defined(), "{}: momentum is 0, so no momentum_buffer is used; pass an undefined tensor", op);
  }
}

void check_adam(const char* op, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, double step, const AdamConfig& config) {
  check_param(op, param, grad);
  check_like_param(op, param, exp_avg, "exp_avg");
  check_written(op, param, exp_avg, "exp_avg");
  check_like_param(op, param, exp_avg_sq, "exp_avg_sq");
  check_written(op, param, exp_avg_sq, "exp_avg_sq");
  KILN_CHECK(!exp_avg.is_alias_of(exp_avg_sq), "{}: exp_avg and exp_avg_sq share memory", op);
  if (config.amsgrad) {
    check_like_param(op, param, max_exp_avg_sq, "max_exp_avg_sq");
    check_written(op, param, max_exp_avg_sq, "max_exp_avg_sq");
  } else {
    KILN_CHECK(!max_exp_avg_sq.defined(),
               "{}: amsgrad is off, so no max_exp_avg_sq is used; pass an undefined "
               "tensor",
               op);
  }
  check_step(op, step);
}

void bump(const Tensor& t) {
  if (t.defined()) t.unsafe_impl()->storage()->bump_version();
}

// Checks that every list has one tensor per parameter (an optional list may be empty).
void check_list_size(const char* op, size_t params, size_t size, const char* what, bool may_be_empty) {
  KILN_CHECK(size == params || (may_be_empty && size == 0), "{}: {} lists {} tensors for {} parameters", op, what, size,
             params);
}

// The lists, flattened into one vector for the op scope.
std::vector<Tensor> scope_inputs(std::initializer_list<std::span<const Tensor>> lists) {
  std::vector<Tensor> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

// The record's attributes of an SGD call over n parameters with these first-step flags.
#define KILN_SGD_ATTRS(n, firsts, config)                                                                \
  static_cast<int64_t>(n), firsts, (config).lr, (config).momentum, (config).dampening, (config).weight_decay, \
      (config).nesterov, (config).maximize

// The record's attributes of an Adam call over n parameters with these step counts.
#define KILN_ADAM_ATTRS(n, steps, config)                                                                       \
  static_cast<int64_t>(n), steps, (config).lr, (config).beta1, (config).beta2, (config).eps, (config).weight_decay, \
      (config).amsgrad, (config).maximize

void adam_single(const char* op, bool decoupled, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, double step, const AdamConfig& config) {
  check_adam(op, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, config);
  const std::vector<Tensor> list = config.amsgrad ? std::vector<Tensor>{param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq}
                                                  : std::vector<Tensor>{param, grad, exp_avg, exp_avg_sq};
  const std::vector<double> steps{step};
  OpScope scope(decoupled ? op::_fused_adamw_ : op::_fused_adam_, list, KILN_ADAM_ATTRS(1, steps, config));
  dispatch::adam_step_kernels.get(op, param.device())(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, config,
                                                      decoupled);
  for (const Tensor* t : {&param, &exp_avg, &exp_avg_sq, &max_exp_avg_sq}) bump(*t);
  scope.output(param);
}

void adam_list(const char* op, bool decoupled, std::span<const Tensor> params, std::span<const Tensor> grads,
               std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs,
               std::span<const Tensor> max_exp_avg_sqs, std::span<const double> steps, const AdamConfig& config) {
  const size_t n = params.size();
  check_list_size(op, n, grads.size(), "grads", false);
  check_list_size(op, n, exp_avgs.size(), "exp_avgs", false);
  check_list_size(op, n, exp_avg_sqs.size(), "exp_avg_sqs", false);
  check_list_size(op, n, max_exp_avg_sqs.size(), "max_exp_avg_sqs", !config.amsgrad);
  check_list_size(op, n, steps.size(), "steps", false);
  KILN_CHECK(config.amsgrad || max_exp_avg_sqs.empty(), "{}: amsgrad is off, so max_exp_avg_sqs must be empty", op);
  static const Tensor kNone;
  for (size_t i = 0; i < n; ++i)
    check_adam(op, params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], config.amsgrad ? max_exp_avg_sqs[i] : kNone,
               steps[i], config);
  if (n == 0) return;
  const std::vector<Tensor> list = scope_inputs({params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs});
  OpScope scope(decoupled ? op::_fused_adamw_ : op::_fused_adam_, list, KILN_ADAM_ATTRS(n, steps, config));
  if (fused_step_uses_multi_tensor({params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs})) {
    dispatch::adam_multi_step_kernels.get(op, params[0].device())(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
                                                                  steps, config, decoupled);
  } else {
    for (size_t i = 0; i < n; ++i)
      dispatch::adam_step_kernels.get(op, params[i].device())(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                                                              config.amsgrad ? max_exp_avg_sqs[i] : kNone, steps[i],
                                                              config, decoupled);
  }
  for (size_t i = 0; i < n; ++i) {
    bump(params[i]);
    bump(exp_avgs[i]);
    bump(exp_avg_sqs[i]);
    if (config.amsgrad) bump(max_exp_avg_sqs[i]);
  }
  scope.outputs(params);
}

}  // namespace

bool fused_step_uses_multi_tensor(std::initializer_list<std::span<const Tensor>> lists) {
  const Tensor* first = nullptr;
  for (const auto& list : lists)
    for (const Tensor& t : list) {
      if (!t.defined() || !t.is_cuda() || !t.is_contiguous() || !t.is_floating_point()) return false;
      if (first == nullptr)
        first = &t;
      else if (t.device() != first->device() || t.dtype() != first->dtype())
        return false;
    }
  return first != nullptr;
}

void _fused_sgd_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdConfig& config,
                 bool first_step) {
  check_sgd("_fused_sgd_", param, grad, momentum_buffer, config);
  const std::vector<Tensor> list = momentum_buffer.defined() ? std::vector<Tensor>{param, grad, momentum_buffer}
                                                             : std::vector<Tensor>{param, grad};
  OpScope scope(op::_fused_sgd_, list, KILN_SGD_ATTRS(1, Shape{first_step ? 1 : 0}, config));
  dispatch::sgd_step_kernels.get("_fused_sgd_", param.device())(param, grad, momentum_buffer, config, first_step);
  bump(param);
  bump(momentum_buffer);
  scope.output(param);
}

void _fused_sgd_(std::span<const Tensor> params, std::span<const Tensor> grads,
                 std::span<const Tensor> momentum_buffers, const SgdConfig& config, std::span<const bool> first_steps) {
  const char* op = "_fused_sgd_";
  const size_t n = params.size();
  const bool momentum = config.momentum != 0.0;
  check_list_size(op, n, grads.size(), "grads", false);
  check_list_size(op, n, momentum_buffers.size(), "momentum_buffers", !momentum);
  check_list_size(op, n, first_steps.size(), "first_steps", false);
  KILN_CHECK(momentum || momentum_buffers.empty(), "{}: momentum is 0, so momentum_buffers must be empty", op);
  static const Tensor kNone;
  for (size_t i = 0; i < n; ++i) check_sgd(op, params[i], grads[i], momentum ? momentum_buffers[i] : kNone, config);
  if (n == 0) return;
  Shape firsts;
  for (bool f : first_steps) firsts.push_back(f ? 1 : 0);
  const std::vector<Tensor> list = scope_inputs({params, grads, momentum_buffers});
  OpScope scope(op::_fused_sgd_, list, KILN_SGD_ATTRS(n, firsts, config));
  if (fused_step_uses_multi_tensor({params, grads, momentum_buffers})) {
    dispatch::sgd_multi_step_kernels.get(op, params[0].device())(params, grads, momentum_buffers, config, first_steps);
  } else {
    for (size_t i = 0; i < n; ++i)
      dispatch::sgd_step_kernels.get(op, params[i].device())(
          params[i], grads[i], momentum ? momentum_buffers[i] : kNone, config, first_steps[i]);
  }
  for (size_t i = 0; i < n; ++i) {
    bump(params[i]);
    if (momentum) bump(momentum_buffers[i]);
  }
  scope.outputs(params);
}

void _fused_adam_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& max_exp_avg_sq, double step, const AdamConfig& config) {
  adam_single("_fused_adam_", false, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, config);
}

void _fused_adamw_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const Tensor& max_exp_avg_sq, double step, const AdamConfig& config) {
  adam_single("_fused_adamw_", true, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, config);
}

void _fused_adam_(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                  std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> max_exp_avg_sqs,
                  std::span<const double> steps, const AdamConfig& config) {
  adam_list("_fused_adam_", false, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, config);
}

void _fused_adamw_(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                   std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> max_exp_avg_sqs,
                   std::span<const double> steps, const AdamConfig& config) {
  adam_list("_fused_adamw_", true, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, config);
}

}  // namespace kiln
