// SGD: validation of its hyperparameters, the step over each group's parameters with
// gradients (through the fused list op), and its per-parameter state in the state dict.
#include "sgd.h"

#include <memory>

#include "../ops/factory.h"
#include "../ops/optimizer_step.h"
#include "../ops/grad_mode.h"

namespace kiln::optim {

void validate_options(const std::string& name, const SGDOptions& o) {
  KILN_CHECK(0.0 <= o.lr, "{}: invalid learning rate: {}", name, o.lr);
  KILN_CHECK(0.0 <= o.momentum, "{}: invalid momentum value: {}", name, o.momentum);
  KILN_CHECK(0.0 <= o.weight_decay, "{}: invalid weight_decay value: {}", name, o.weight_decay);
  KILN_CHECK(std::isfinite(o.dampening), "{}: invalid dampening value: {}", name, o.dampening);
  KILN_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
             "{}: Nesterov momentum requires a momentum and zero dampening (momentum {}, dampening {})", name,
             o.momentum, o.dampening);
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options) : OptimizerBase("SGD", std::move(params), options) {}

const SGDState& SGD::state(size_t index) const {
  KILN_CHECK(index < state_.size(), "SGD: parameter {} does not exist (the optimizer has {})", index, state_.size());
  return state_[index];
}

void SGD::step_impl() {
  NoGradGuard no_grad;  // parameters are leaves that require grad: updated in place outside autograd
  // Every gradient is checked before any parameter changes.
  std::vector<std::vector<size_t>> with_grad(num_param_groups());
  for (size_t g = 0; g < num_param_groups(); ++g)
    for (size_t j = 0; j < params(g).size(); ++j) {
      const Tensor& p = params(g)[j];
      if (!p.grad().defined()) continue;
      check_grad(first_index(g) + j, p, p.grad());
      with_grad[g].push_back(first_index(g) + j);
    }
  for (size_t g = 0; g < num_param_groups(); ++g) {
    const SGDOptions& o = options_[g];
    const SgdConfig config{o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, o.maximize};
    const bool momentum = o.momentum != 0.0;
    std::vector<Tensor> ps, grads;
    for (size_t i : with_grad[g]) {
      ps.push_back(params(g)[i - first_index(g)]);
      grads.push_back(ps.back().grad());
    }
    for (const std::vector<size_t>& bucket : fused_buckets(ps, grads)) {
      std::vector<Tensor> bp, bg, bufs;
      std::unique_ptr<bool[]> first(new bool[bucket.size()]);
      for (size_t k = 0; k < bucket.size(); ++k) {
        const size_t index = with_grad[g][bucket[k]];
        bp.push_back(ps[bucket[k]]);
        bg.push_back(grads[bucket[k]]);
        first[k] = momentum && !state_[index].momentum_buffer.defined();
        // A new buffer: the kernel sets it to the gradient (zeroed first, so no kernel ever
        // loads uninitialised memory).
        if (momentum) bufs.push_back(first[k] ? zeros_like(bp.back()) : state_[index].momentum_buffer);
      }
      _fused_sgd_(bp, bg, bufs, config, std::span<const bool>(first.get(), bucket.size()));
      // Kept only once the step has run (a refused step leaves the state as it was).
      for (size_t k = 0; k < bucket.size(); ++k)
        if (first[k]) state_[with_grad[g][bucket[k]]].momentum_buffer = bufs[k];
    }
  }
}

void SGD::write_state(StateDict& dict, const std::string& prefix, const SGDState& state,
                      const SGDOptions& /*options*/) const {
  if (state.momentum_buffer.defined()) dict.insert(prefix + "momentum_buffer", state.momentum_buffer.clone());
}

SGDState SGD::read_state(StateReader& reader, const std::string& prefix, const Tensor& param, size_t index,
                         const SGDOptions& /*options*/) const {
  SGDState state;
  const std::string key = prefix + "momentum_buffer";
  if (reader.has(key)) state.momentum_buffer = load_state_tensor(name(), key, reader.tensor(key), param, index);
  return state;
}

}  // namespace kiln::optim
