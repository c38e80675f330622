// optim::SGD: stochastic gradient descent with momentum, dampening, Nesterov momentum, L2
// weight decay and maximize, with torch.optim.SGD's update rule and defaults. The first step
// a parameter takes with momentum sets its buffer to the gradient (after weight decay), as
// PyTorch does; later steps fold the gradient in with 1 - dampening.
//
//   optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
//
// Each step runs _fused_sgd_ (ops/optimizer_step.h) once per group and (device, dtype): on
// CUDA one multi-tensor launch for the group's contiguous parameters.
#pragma once

#include <vector>

#include "optimizer.h"

namespace kiln::optim {

/// SGD's hyperparameters (torch.optim.SGD's names and defaults).
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

/// Lists SGDOptions' fields for the state dict (visitor(name, field&)).
template <typename V>
void visit_options(SGDOptions& o, V&& v) {
  v("lr", o.lr);
  v("momentum", o.momentum);
  v("dampening", o.dampening);
  v("weight_decay", o.weight_decay);
  v("nesterov", o.nesterov);
  v("maximize", o.maximize);
}
/// Throws PyTorch's errors for invalid SGD hyperparameters, prefixed with `name`.
void validate_options(const std::string& name, const SGDOptions& o);

/// One parameter's SGD state: its momentum buffer, once a step with momentum has run.
struct SGDState {
  Tensor momentum_buffer;
};

/// Stochastic gradient descent; see the file comment.
class SGD final : public OptimizerBase<SGDOptions, SGDState> {
 public:
  /// An SGD over `params` (one group) with `options` (also the default of later groups).
  explicit SGD(std::vector<Tensor> params, const SGDOptions& options = {});
  /// Parameter `index`'s state (across groups, as in state_dict()).
  const SGDState& state(size_t index) const;

 private:
  /// One SGD step of every parameter with a gradient.
  void step_impl() override;
  void write_state(StateDict& dict, const std::string& prefix, const SGDState& state,
                   const SGDOptions& options) const override;
  SGDState read_state(StateReader& reader, const std::string& prefix, const Tensor& param, size_t index,
                      const SGDOptions& options) const override;
};

}  // namespace kiln::optim
