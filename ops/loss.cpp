// Loss ops. cross_entropy moves the class dim last and flattens, so one nll kernel serves
// every input rank. mse_loss insists on equal shapes: PyTorch only warns when they differ,
// and silently broadcasting [N] against [N, 1] is a classic bug.
#include "loss.h"

#include "../tensor/make.h"
#include "binary.h"
#include "kernels.h"
#include "op_scope.h"
#include "reduce.h"
#include "softmax.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<NllLossKernel> nll_loss_kernels;
}

namespace {
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
}

// [C] or [N, C, d...] -> [rows, C] with targets [rows].
std::pair<Tensor, Tensor> flatten_classes(const Tensor& input, const Tensor& target) {
  if (input.dim() == 1) return {input.unsqueeze(0), target.reshape({1})};
  const int64_t classes = input.sizes()[1];
  const Tensor moved = input.dim() == 2 ? input : input.movedim(1, -1);
  return {moved.reshape({-1, classes}), target.reshape({-1})};
}
}  // namespace

Tensor nll_loss(const Tensor& logp, const Tensor& target, int64_t ignore_index) {
  check_target("nll_loss", logp, target);
  OpScope scope(op::nll_loss, {&logp, &target}, ignore_index);
  auto [rows, flat_target] = flatten_classes(logp, target);
  Tensor out = new_contiguous({}, logp.dtype(), logp.device(), "nll_loss");
  dispatch::nll_loss_kernels.get("nll_loss", logp.device())(out, rows.contiguous(),
                                                            flat_target.to(DType::Int64).contiguous(), ignore_index);
  return scope.output(out);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index) {
  check_target("cross_entropy", logits, target);
  OpScope scope(op::cross_entropy, {&logits, &target}, ignore_index);
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  try {
    return scope.output(nll_loss(log_softmax(logits, class_dim), target, ignore_index));
  } catch (const Error& e) {
    // A bad class index is found inside nll_loss; say which call the user made.
    throw Error(fmt::format("cross_entropy: {}", e.what()), __FILE__, __LINE__);
  }
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
