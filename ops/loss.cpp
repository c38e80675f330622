// Loss ops. The class dim is moved last and the rest flattened, so one [rows, C] kernel of
// each family serves every input rank. cross_entropy runs its own fused kernel (one pass
// over the logits for log-sum-exp, gather and mean) instead of log_softmax + nll_loss, which
// would write and read back a [rows, C] tensor of log-probabilities. cross_entropy and
// nll_loss call their _forward ops, which also return what the backward needs. mse_loss
// insists on equal shapes: PyTorch only warns when they differ, and silently broadcasting
// [N] against [N, 1] is a classic bug.
#include "loss.h"

#include "../tensor/make.h"
#include "binary.h"
#include "kernels.h"
#include "op_scope.h"
#include "reduce.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<NllLossKernel> nll_loss_kernels;
KernelTable<NllLossBackwardKernel> nll_loss_backward_kernels;
KernelTable<CrossEntropyKernel> cross_entropy_kernels;
KernelTable<CrossEntropyBackwardKernel> cross_entropy_backward_kernels;
}  // namespace dispatch

namespace {

void check_same_device(const char* op, const Tensor& input, const Tensor& t, const char* what) {
  // Strictly one device (not common_device's CPU-number rule): the kernel reads t where it
  // reads the input.
  KILN_CHECK(t.device() == input.device(), "{}: expected {} on {} (the input's device), got {}", op, what,
             input.device().str(), t.device().str());
}

void check_target(const char* op, const Tensor& input, const Tensor& target) {
  check_defined(op, input, "input");
  check_defined(op, target, "target");
  common_device(op, {&input, &target});
  KILN_CHECK(is_floating(input.dtype()), "{}: unsupported input dtype {} (supported: float16, bfloat16, float32, "
                                         "float64)", op, input.dtype());
  KILN_CHECK(is_integral(target.dtype()), "{}: expected target of integer dtype (class indices), got {}", op,
             target.dtype());
  KILN_CHECK(input.dim() >= 1, "{}: input must have at least 1 dimension (classes), got a 0-dim tensor", op);
  // Expected target shape: input's shape without the class dim (dim 1, or dim 0 for 1-D input).
  Shape expected = input.sizes();
  expected.erase(expected.begin() + (input.dim() == 1 ? 0 : 1));
  KILN_CHECK(target.sizes() == expected, "{}: expected target of shape {} for input of shape {}, got {}", op,
             shape_str(expected), shape_str(input.sizes()), shape_str(target.sizes()));
  check_same_device(op, input, target, "target");
}

// The arguments a backward takes besides input and target: a 0-dim grad_output of the
// input's dtype and a 0-dim int64 count, on the input's device.
void check_backward_scalars(const char* op, const Tensor& input, const Tensor& grad_output, const Tensor& count) {
  check_defined(op, grad_output, "grad_output");
  check_defined(op, count, "count");
  KILN_CHECK(grad_output.dim() == 0, "{}: expected a 0-dim grad_output (the loss is a scalar), got shape {}", op,
             shape_str(grad_output.sizes()));
  KILN_CHECK(grad_output.dtype() == input.dtype(), "{}: expected grad_output of dtype {} (the input's), got {}", op,
             input.dtype(), grad_output.dtype());
  KILN_CHECK(count.dim() == 0 && count.dtype() == DType::Int64,
             "{}: expected count as a 0-dim int64 tensor (from the forward), got {} of shape {}", op, count.dtype(),
             shape_str(count.sizes()));
  check_same_device(op, input, grad_output, "grad_output");
  check_same_device(op, input, count, "count");
}

// The dtype of logsumexp: float32, float64 for float64 logits (its backward needs it exact).
DType lse_dtype(DType logits) { return logits == DType::Float64 ? DType::Float64 : DType::Float32; }

// The number of rows the kernels see: positions other than the class dim.
int64_t row_count(const Tensor& target) { return target.numel(); }

// The targets as contiguous int64 [rows] (the common case as it is: no view to make).
Tensor flatten_target(const Tensor& target) {
  if (target.dim() == 1 && target.dtype() == DType::Int64 && target.is_contiguous()) return target;
  return target.to(DType::Int64).reshape({row_count(target)}).contiguous();
}

// [C] or [N, C, d...] -> contiguous [rows, C] (the class dim last, in the targets' order).
Tensor flatten_classes(const Tensor& input) {
  if (input.dim() == 2 && input.is_contiguous()) return input;
  if (input.dim() == 1) return input.unsqueeze(0).contiguous();
  const int64_t classes = input.sizes()[1];
  const Tensor moved = input.dim() == 2 ? input : input.movedim(1, -1);
  return moved.reshape({-1, classes}).contiguous();
}

// The inverse for a gradient: [rows, C] back to the input's shape (contiguous).
Tensor unflatten_classes(const Tensor& rows, const Tensor& input) {
  if (input.dim() == 1) return rows.view(input.sizes());
  if (input.dim() == 2) return rows;
  Shape moved = input.sizes();  // [N, d..., C]
  moved.erase(moved.begin() + 1);
  moved.push_back(input.sizes()[1]);
  return rows.view(moved).movedim(-1, 1).contiguous();
}

CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index) {
  const Device device = logits.device();
  // logsumexp has the target's shape; the kernel sees its elements in row order.
  CrossEntropyForward f{new_contiguous({}, logits.dtype(), device, "cross_entropy"),
                        new_contiguous(target.sizes(), lse_dtype(logits.dtype()), device, "cross_entropy"),
                        new_contiguous({}, DType::Int64, device, "cross_entropy")};
  dispatch::cross_entropy_kernels.get("cross_entropy", device)(f.loss, f.logsumexp, f.count, flatten_classes(logits),
                                                               flatten_target(target), ignore_index);
  return f;
}

NllLossForward nll_loss_forward(const Tensor& logp, const Tensor& target, int64_t ignore_index) {
  NllLossForward f{new_contiguous({}, logp.dtype(), logp.device(), "nll_loss"),
                   new_contiguous({}, DType::Int64, logp.device(), "nll_loss")};
  dispatch::nll_loss_kernels.get("nll_loss", logp.device())(f.loss, f.count, flatten_classes(logp),
                                                            flatten_target(target), ignore_index);
  return f;
}

}  // namespace

// cross_entropy and nll_loss are composites of their _forward ops (as linear is of addmm): the
// nested op is the one that saves what its backward needs (logsumexp, count), which the
// public ops do not return.

Tensor nll_loss(const Tensor& logp, const Tensor& target, int64_t ignore_index) {
  check_target("nll_loss", logp, target);
  OpScope scope(op::nll_loss, {&logp, &target}, ignore_index);
  return scope.output(_nll_loss_forward(logp, target, ignore_index).loss);
}

NllLossForward _nll_loss_forward(const Tensor& logp, const Tensor& target, int64_t ignore_index) {
  check_target("nll_loss", logp, target);
  OpScope scope(op::_nll_loss_forward, {&logp, &target}, ignore_index);
  NllLossForward f = nll_loss_forward(logp, target, ignore_index);
  const Tensor outs[] = {f.loss, f.count};
  scope.outputs(outs);
  return f;
}

Tensor _nll_loss_backward(const Tensor& grad_output, const Tensor& logp, const Tensor& target, const Tensor& count,
                          int64_t ignore_index) {
  const char* op = "nll_loss_backward";
  check_target(op, logp, target);
  check_backward_scalars(op, logp, grad_output, count);
  OpScope scope(op::_nll_loss_backward, {&grad_output, &logp, &target, &count}, ignore_index);
  const int64_t classes = logp.dim() == 1 ? logp.sizes()[0] : logp.sizes()[1];
  const Tensor grad = new_contiguous({row_count(target), classes}, logp.dtype(), logp.device(), op);
  dispatch::nll_loss_backward_kernels.get(op, logp.device())(grad, grad_output, flatten_target(target), count,
                                                             ignore_index);
  return scope.output(unflatten_classes(grad, logp));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index) {
  check_target("cross_entropy", logits, target);
  OpScope scope(op::cross_entropy, {&logits, &target}, ignore_index);
  return scope.output(_cross_entropy_forward(logits, target, ignore_index).loss);
}

CrossEntropyForward _cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index) {
  check_target("cross_entropy", logits, target);
  OpScope scope(op::_cross_entropy_forward, {&logits, &target}, ignore_index);
  CrossEntropyForward f = cross_entropy_forward(logits, target, ignore_index);
  const Tensor outs[] = {f.loss, f.logsumexp, f.count};
  scope.outputs(outs);
  return f;
}

Tensor _cross_entropy_backward(const Tensor& grad_output, const Tensor& logits, const Tensor& target,
                               const Tensor& logsumexp, const Tensor& count, int64_t ignore_index) {
  const char* op = "cross_entropy_backward";
  check_target(op, logits, target);
  check_backward_scalars(op, logits, grad_output, count);
  check_defined(op, logsumexp, "logsumexp");
  KILN_CHECK(logsumexp.sizes() == target.sizes() && logsumexp.dtype() == lse_dtype(logits.dtype()),
             "{}: expected logsumexp of shape {} and dtype {} (from the forward), got shape {} and dtype {}", op,
             shape_str(target.sizes()), lse_dtype(logits.dtype()), shape_str(logsumexp.sizes()), logsumexp.dtype());
  check_same_device(op, logits, logsumexp, "logsumexp");
  OpScope scope(op::_cross_entropy_backward, {&grad_output, &logits, &target, &logsumexp, &count}, ignore_index);
  const Tensor rows = flatten_classes(logits);
  const Tensor grad = new_contiguous(rows.sizes(), logits.dtype(), logits.device(), op);
  dispatch::cross_entropy_backward_kernels.get(op, logits.device())(
      grad, grad_output, rows, flatten_target(target), logsumexp.contiguous(), count, ignore_index);
  return scope.output(unflatten_classes(grad, logits));
}

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  check_defined("mse_loss", input, "input");
  check_defined("mse_loss", target, "target");
  KILN_CHECK(input.sizes() == target.sizes(),
             "mse_loss: input shape {} and target shape {} differ; reshape one of them (broadcasting here is almost "
             "always a bug)",
             shape_str(input.sizes()), shape_str(target.sizes()));
  KILN_CHECK(is_floating(input.dtype()) && is_floating(target.dtype()),
             "mse_loss: unsupported dtypes {} and {} (supported: float16, bfloat16, float32, float64)", input.dtype(),
             target.dtype());
  OpScope scope(op::mse_loss, {&input, &target});
  const Tensor diff = sub(input, target);
  return scope.output(mean(mul(diff, diff)));
}

}  // namespace kiln
