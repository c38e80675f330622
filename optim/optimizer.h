// Optimizer: the base of SGD, Adam and AdamW, as torch.optim.Optimizer is. It owns the
// parameter groups (each a list of parameters with its own hyperparameters, the learning
// rate being the one schedulers change), zero_grad(), and the state_dict plumbing; each
// optimizer adds its update and its per-parameter state.
//
// OptimizerBase<Options, State> holds what is typed: one Options per group and one State
// per parameter (numbered across groups in order, PyTorch's state_dict numbering). It
// writes and reads the param_groups part of a state dict through visit_options() (each
// Options type lists its fields there) and asks the optimizer for each parameter's state.
// load_state_dict() reads and checks everything into new values first and swaps them in
// only when the whole dict is good: a bad dict throws and leaves the optimizer unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../nn/state_dict.h"
#include "state_io.h"

namespace kiln::optim {

/// Base class of the optimizers; see the file comment. Not copyable: it holds parameter
/// handles and state.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// The optimizer's class name ("SGD", "Adam", "AdamW"), which starts its error messages.
  const std::string& name() const { return name_; }
  /// Updates every parameter that has a gradient (parameters without one are skipped).
  /// Inside a CUDA graph capture, each replay redoes the host part (step counts, the current
  /// learning rate) and gives the captured kernels the arguments an eager step would have
  /// (core/graph_capture.h): the step must see the same parameters with gradients each time.
  void step();
  /// Clears the gradients of every parameter: set_to_none drops them (grad() becomes
  /// undefined, as PyTorch's default), otherwise they are zeroed in place.
  void zero_grad(bool set_to_none = true);

  /// Number of parameter groups.
  size_t num_param_groups() const { return groups_.size(); }
  /// The parameters of group `g`.
  const std::vector<Tensor>& params(size_t g) const;
  /// Every parameter, group by group: a parameter's position here is its index in state_dict().
  std::vector<Tensor> parameters() const;
  /// Learning rate of group `g`.
  virtual double lr(size_t g) const = 0;
  /// Sets the learning rate of group `g` (what the schedulers do); it must be >= 0.
  virtual void set_lr(size_t g, double lr) = 0;
  /// The learning rate group `g` had when the first scheduler attached to it (PyTorch's
  /// group["initial_lr"]), if one has.
  std::optional<double> initial_lr(size_t g) const;
  /// Records group `g`'s initial learning rate (schedulers call this).
  void set_initial_lr(size_t g, double lr);

  /// The optimizer's state: hyperparameters of every group and each parameter's state, as
  /// copies (later steps do not change a returned dict); see state_io.h for the keys.
  virtual StateDict state_dict() const = 0;
  /// Restores a state_dict() of an optimizer of this kind over parameters of the same
  /// groups and shapes; state tensors are copied to each parameter's device and dtype. A bad
  /// dict throws and leaves this optimizer unchanged.
  virtual void load_state_dict(const StateDict& dict) = 0;

 protected:
  /// The optimizer's update (what step() runs).
  virtual void step_impl() = 0;
  explicit Optimizer(std::string name) : name_(std::move(name)) {}
  /// Checks and appends a group's parameters: not empty, defined, floating point, leaves,
  /// in no other group.
  void add_group_params(std::vector<Tensor> params);
  /// Index of group `g`'s first parameter in the numbering across groups.
  size_t first_index(size_t g) const { return groups_[g].first; }
  /// Total number of parameters.
  size_t num_params() const { return num_params_; }
  /// Throws "<name>: param group g does not exist" for g out of range.
  void check_group(size_t g) const;
  /// Checks parameter `index`'s gradient against the parameter: shape, dtype and device.
  void check_grad(size_t index, const Tensor& param, const Tensor& grad) const;
  /// Writes param_groups.<g>.params and (when set) .initial_lr for every group.
  void write_group_keys(StateDict& dict) const;
  /// Reads and checks what write_group_keys() wrote; returns the initial_lrs found.
  std::vector<std::optional<double>> read_group_keys(StateReader& reader) const;
  /// Replaces the recorded initial_lrs (after a successful load).
  void set_initial_lrs(std::vector<std::optional<double>> lrs);

 private:
  struct Group {
    std::vector<Tensor> params;
    size_t first = 0;                  // index of params[0] across groups
    std::optional<double> initial_lr;  // set by the first scheduler
  };
  std::string name_;
  std::vector<Group> groups_;
  size_t num_params_ = 0;
};

/// A state tensor from a loaded dict, as a fresh contiguous tensor on `param`'s device and
/// dtype; throws naming `key` when its shape differs from the parameter's.
Tensor load_state_tensor(const std::string& owner, const std::string& key, const Tensor& value, const Tensor& param,
                         size_t index);

/// Positions of the parameters to update (params[k] with gradient grads[k]) split into
/// buckets that one fused list op runs as one multi-tensor launch: same device and dtype,
/// and parameter and gradient both contiguous or not. Buckets keep first-seen order.
std::vector<std::vector<size_t>> fused_buckets(const std::vector<Tensor>& params, const std::vector<Tensor>& grads);

/// The typed half of an optimizer: Options per group, State per parameter (see the file
/// comment). Options types provide visit_options(options, visitor) and
/// validate_options(name, options) found by argument-dependent lookup.
template <typename Options, typename State>
class OptimizerBase : public Optimizer {
 public:
  /// The hyperparameters of group `g`; they may be changed between steps.
  Options& options(size_t g) {
    check_group(g);
    return options_[g];
  }
  /// The hyperparameters of group `g`.
  const Options& options(size_t g) const {
    check_group(g);
    return options_[g];
  }
  /// Adds a group of parameters with its own hyperparameters.
  void add_param_group(std::vector<Tensor> params, const Options& options) {
    validate_options(name(), options);
    add_group_params(std::move(params));
    options_.push_back(options);
    state_.resize(num_params());
  }
  /// Adds a group of parameters with the optimizer's default hyperparameters (those given
  /// to its constructor).
  void add_param_group(std::vector<Tensor> params) { add_param_group(std::move(params), defaults_); }

  /// Learning rate of group `g`.
  double lr(size_t g) const override { return options(g).lr; }
  /// Sets the learning rate of group `g` (>= 0).
  void set_lr(size_t g, double lr) override {
    KILN_CHECK(0.0 <= lr, "{}: invalid learning rate: {}", name(), lr);
    options(g).lr = lr;
  }

  /// Hyperparameters and per-parameter state as copies (keys: state_io.h).
  StateDict state_dict() const override {
    StateDict dict;
    dict.metadata()["kiln.optimizer"] = name();
    for (size_t g = 0; g < num_param_groups(); ++g)
      for (size_t i = first_index(g); i < first_index(g) + params(g).size(); ++i)
        write_state(dict, "state." + std::to_string(i) + ".", state_[i], options_[g]);
    write_group_keys(dict);
    for (size_t g = 0; g < num_param_groups(); ++g) {
      const std::string prefix = "param_groups." + std::to_string(g) + ".";
      Options o = options_[g];
      visit_options(o, [&](const char* field, auto& value) {
        dict.insert(prefix + field, scalar_state(static_cast<double>(value)));
      });
    }
    return dict;
  }

  /// Restores a state_dict(); a bad dict throws and changes nothing.
  void load_state_dict(const StateDict& dict) override {
    StateReader reader(dict, name());
    reader.check_writer("kiln.optimizer", name());
    std::vector<std::optional<double>> initial_lrs = read_group_keys(reader);
    std::vector<Options> options(num_param_groups());
    for (size_t g = 0; g < num_param_groups(); ++g) {
      const std::string prefix = "param_groups." + std::to_string(g) + ".";
      visit_options(options[g], [&](const char* field, auto& value) {
        using V = std::remove_reference_t<decltype(value)>;
        if constexpr (std::is_same_v<V, bool>)
          value = reader.flag(prefix + field);
        else
          value = reader.number(prefix + field);
      });
      validate_options(name(), options[g]);
    }
    std::vector<State> state(num_params());
    for (size_t g = 0; g < num_param_groups(); ++g)
      for (size_t i = first_index(g); i < first_index(g) + params(g).size(); ++i)
        state[i] = read_state(reader, "state." + std::to_string(i) + ".", params(g)[i - first_index(g)], i, options[g]);
    reader.check_all_used();
    options_ = std::move(options);
    state_ = std::move(state);
    set_initial_lrs(std::move(initial_lrs));
  }

 protected:
  /// Starts with one group of `params` with `defaults` (also the defaults of later groups).
  OptimizerBase(std::string name, std::vector<Tensor> params, const Options& defaults)
      : Optimizer(std::move(name)), defaults_(defaults) {
    add_param_group(std::move(params), defaults);
  }
  /// Writes one parameter's state under `prefix` ("state.<i>."); nothing if it has none yet.
  virtual void write_state(StateDict& dict, const std::string& prefix, const State& state,
                           const Options& options) const = 0;
  /// Reads one parameter's state under `prefix` (absent keys: no state yet), checked against
  /// `param` (parameter number `index`) and its group's options as loaded.
  virtual State read_state(StateReader& reader, const std::string& prefix, const Tensor& param, size_t index,
                           const Options& options) const = 0;

  std::vector<Options> options_;  ///< per group
  std::vector<State> state_;      ///< per parameter, numbered across groups

 private:
  Options defaults_;
};

}  // namespace kiln::optim
