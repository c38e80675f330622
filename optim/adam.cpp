// Adam and AdamW: hyperparameter checks, the step over each group's parameters with
// gradients (state created on a parameter's first step, step counts incremented on the
// host, then one fused list op per bucket), and the per-parameter state in the state dict.
#include "adam.h"

#include <cmath>

#include "../ops/factory.h"
#include "../ops/optimizer_step.h"
#include "../ops/grad_mode.h"

namespace kiln::optim {

namespace {

template <typename Options>
void validate_adam(const std::string& name, const Options& o) {
  KILN_CHECK(0.0 <= o.lr, "{}: invalid learning rate: {}", name, o.lr);
  KILN_CHECK(0.0 <= o.eps, "{}: invalid epsilon value: {}", name, o.eps);
  KILN_CHECK(0.0 <= o.betas.first && o.betas.first < 1.0, "{}: invalid beta parameter at index 0: {}", name,
             o.betas.first);
  KILN_CHECK(0.0 <= o.betas.second && o.betas.second < 1.0, "{}: invalid beta parameter at index 1: {}", name,
             o.betas.second);
  KILN_CHECK(0.0 <= o.weight_decay, "{}: invalid weight_decay value: {}", name, o.weight_decay);
}

template <typename Options>
AdamConfig config_of(const Options& o) {
  return {o.lr, o.betas.first, o.betas.second, o.eps, o.weight_decay, o.amsgrad, o.maximize};
}

}  // namespace

void validate_options(const std::string& name, const AdamOptions& o) { validate_adam(name, o); }
void validate_options(const std::string& name, const AdamWOptions& o) { validate_adam(name, o); }

namespace detail {

template <typename Options, bool kDecoupled>
const AdamState& AdamFamily<Options, kDecoupled>::state(size_t index) const {
  KILN_CHECK(index < this->state_.size(), "{}: parameter {} does not exist (the optimizer has {})", this->name(), index,
             this->state_.size());
  return this->state_[index];
}

template <typename Options, bool kDecoupled>
void AdamFamily<Options, kDecoupled>::step_impl() {
  NoGradGuard no_grad;  // parameters are leaves that require grad: updated in place outside autograd
  // Every gradient is checked before any parameter or state changes.
  std::vector<std::vector<size_t>> with_grad(this->num_param_groups());
  for (size_t g = 0; g < this->num_param_groups(); ++g)
    for (size_t j = 0; j < this->params(g).size(); ++j) {
      const Tensor& p = this->params(g)[j];
      if (!p.grad().defined()) continue;
      this->check_grad(this->first_index(g) + j, p, p.grad());
      with_grad[g].push_back(this->first_index(g) + j);
    }
  for (size_t g = 0; g < this->num_param_groups(); ++g) {
    const AdamConfig config = config_of(this->options_[g]);
    std::vector<Tensor> ps, grads;
    for (size_t i : with_grad[g]) {
      ps.push_back(this->params(g)[i - this->first_index(g)]);
      grads.push_back(ps.back().grad());
    }
    for (const std::vector<size_t>& bucket : fused_buckets(ps, grads)) {
      std::vector<Tensor> bp, bg, m, v, vmax;
      std::vector<double> steps;
      for (size_t k : bucket) {
        AdamState& s = this->state_[with_grad[g][k]];
        bp.push_back(ps[k]);
        bg.push_back(grads[k]);
        if (s.step == 0) {
          s.exp_avg = zeros_like(ps[k]);
          s.exp_avg_sq = zeros_like(ps[k]);
        }
        // amsgrad may be switched on between steps (PyTorch creates the buffer then too).
        if (config.amsgrad && !s.max_exp_avg_sq.defined()) s.max_exp_avg_sq = zeros_like(ps[k]);
        m.push_back(s.exp_avg);
        v.push_back(s.exp_avg_sq);
        if (config.amsgrad) vmax.push_back(s.max_exp_avg_sq);
        steps.push_back(s.step + 1);
      }
      if (kDecoupled)
        _fused_adamw_(bp, bg, m, v, vmax, steps, config);
      else
        _fused_adam_(bp, bg, m, v, vmax, steps, config);
      for (size_t k : bucket) this->state_[with_grad[g][k]].step += 1;
    }
  }
}

template <typename Options, bool kDecoupled>
void AdamFamily<Options, kDecoupled>::write_state(StateDict& dict, const std::string& prefix, const AdamState& state,
                                                  const Options& options) const {
  if (state.step == 0) return;
  dict.insert(prefix + "step", scalar_state(state.step));
  dict.insert(prefix + "exp_avg", state.exp_avg.clone());
  dict.insert(prefix + "exp_avg_sq", state.exp_avg_sq.clone());
  // (amsgrad switched on since the last step: the zeros the next step would start from.)
  if (options.amsgrad)
    dict.insert(prefix + "max_exp_avg_sq",
                state.max_exp_avg_sq.defined() ? state.max_exp_avg_sq.clone() : zeros_like(state.exp_avg));
}

template <typename Options, bool kDecoupled>
AdamState AdamFamily<Options, kDecoupled>::read_state(StateReader& reader, const std::string& prefix,
                                                      const Tensor& param, size_t index, const Options& options) const {
  AdamState state;
  if (!reader.has(prefix + "step")) {
    for (const char* key : {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"})
      KILN_CHECK(!reader.has(prefix + key), "{}.load_state_dict: {}{} is present without {}step", this->name(), prefix,
                 key, prefix);
    return state;
  }
  state.step = reader.number(prefix + "step");
  KILN_CHECK(std::isfinite(state.step) && state.step >= 1 && state.step == std::floor(state.step),
             "{}.load_state_dict: {}step must be a whole number of steps >= 1, got {}", this->name(), prefix,
             state.step);
  auto load = [&](const char* key) {
    const std::string k = prefix + key;
    return load_state_tensor(this->name(), k, reader.tensor(k), param, index);
  };
  state.exp_avg = load("exp_avg");
  state.exp_avg_sq = load("exp_avg_sq");
  if (options.amsgrad) state.max_exp_avg_sq = load("max_exp_avg_sq");
  return state;
}

template class AdamFamily<AdamOptions, false>;
template class AdamFamily<AdamWOptions, true>;

}  // namespace detail

}  // namespace kiln::optim
