// optim::Adam and optim::AdamW with torch.optim.Adam's and AdamW's update rules and
// defaults: bias-corrected first and second moments, optional AMSGrad and maximize. Adam
// adds weight_decay * param to the gradient (L2); AdamW decays the parameter itself by
// 1 - lr * weight_decay before the update (decoupled weight decay, default 1e-2).
//
//   optim::AdamW opt(model.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
//
// The step count is kept on the host, a double per parameter (PyTorch's capturable=False):
// the bias corrections are computed on the host for each parameter, and a step reads no
// device memory for them. Each step runs _fused_adam_ / _fused_adamw_ (ops/optimizer_step.h)
// once per group and (device, dtype): on CUDA, one multi-tensor launch for all of a group's
// contiguous parameters. State tensors have the parameter's dtype, as in PyTorch.
#pragma once

#include <utility>
#include <vector>

#include "optimizer.h"

namespace kiln::optim {

/// Adam's hyperparameters (torch.optim.Adam's names and defaults).
struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
};

/// AdamW's hyperparameters (torch.optim.AdamW's: as Adam's, with weight_decay 1e-2).
struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

/// Lists the fields of AdamOptions or AdamWOptions for the state dict.
template <typename Options, typename V>
requires(std::is_same_v<Options, AdamOptions> || std::is_same_v<Options, AdamWOptions>) void visit_options(Options& o,
                                                                                                           V&& v) {
  v("lr", o.lr);
  v("betas.0", o.betas.first);
  v("betas.1", o.betas.second);
  v("eps", o.eps);
  v("weight_decay", o.weight_decay);
  v("amsgrad", o.amsgrad);
  v("maximize", o.maximize);
}
/// Throws PyTorch's errors for invalid Adam hyperparameters, prefixed with `name`.
void validate_options(const std::string& name, const AdamOptions& o);
/// Throws PyTorch's errors for invalid AdamW hyperparameters, prefixed with `name`.
void validate_options(const std::string& name, const AdamWOptions& o);

/// One parameter's Adam state, created by its first step.
struct AdamState {
  double step = 0;        ///< steps taken (0: no state yet)
  Tensor exp_avg;         ///< first moment
  Tensor exp_avg_sq;      ///< second moment
  Tensor max_exp_avg_sq;  ///< amsgrad's running maximum of exp_avg_sq (amsgrad only)
};

namespace detail {

/// What Adam and AdamW share; `kDecoupled` selects AdamW's weight decay.
template <typename Options, bool kDecoupled>
class AdamFamily : public OptimizerBase<Options, AdamState> {
 public:
  /// Parameter `index`'s state (across groups, as in state_dict()).
  const AdamState& state(size_t index) const;

 protected:
  /// One Adam (or AdamW) step of every parameter with a gradient.
  void step_impl() override;
  AdamFamily(std::string name, std::vector<Tensor> params, const Options& options)
      : OptimizerBase<Options, AdamState>(std::move(name), std::move(params), options) {}

 private:
  void write_state(StateDict& dict, const std::string& prefix, const AdamState& state,
                   const Options& options) const override;
  AdamState read_state(StateReader& reader, const std::string& prefix, const Tensor& param, size_t index,
                       const Options& options) const override;
};

extern template class AdamFamily<AdamOptions, false>;
extern template class AdamFamily<AdamWOptions, true>;

}  // namespace detail

/// Adam (L2 weight decay); see the file comment.
class Adam final : public detail::AdamFamily<AdamOptions, false> {
 public:
  /// An Adam over `params` (one group) with `options` (also the default of later groups).
  explicit Adam(std::vector<Tensor> params, const AdamOptions& options = {})
      : AdamFamily("Adam", std::move(params), options) {}
};

/// AdamW (decoupled weight decay); see the file comment.
class AdamW final : public detail::AdamFamily<AdamWOptions, true> {
 public:
  /// An AdamW over `params` (one group) with `options` (also the default of later groups).
  explicit AdamW(std::vector<Tensor> params, const AdamWOptions& options = {})
      : AdamFamily("AdamW", std::move(params), options) {}
};

}  // namespace kiln::optim
