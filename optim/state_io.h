// Reading and writing the flat state dicts of optimizers and LR schedulers.
//
// Key scheme (Note [Optimizer state dict keys]): the dotted flattening of PyTorch's nested
// state dicts. An optimizer writes
//   state.<i>.<name>          per-parameter state of parameter i (numbered across all
//                             groups in order, as PyTorch numbers them): tensors such as
//                             exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer (copies,
//                             on the parameter's device and dtype), and step (a number);
//   param_groups.<g>.<name>   each group's hyperparameters (lr, momentum, eps, ...; tuples
//                             indexed: betas.0, betas.1; booleans as 0 or 1), initial_lr
//                             when a scheduler has recorded it, and params (an int64 CPU
//                             tensor of the group's parameter indices);
// a scheduler writes last_epoch, _step_count, base_lrs.<g>, _last_lr.<g> and its own
// settings (step_size, gamma, T_max, ...; SequentialLR nests _schedulers.<k>.<key>).
// Every number is a 0-dim float64 CPU tensor, so a state dict saves to safetensors as it is.
// The StateDict's metadata names the writer ("kiln.optimizer": "AdamW").
//
// A reader consumes keys as it goes, so a load can refuse keys nobody asked for, and it
// throws naming the key before the caller has changed anything.
#pragma once

#include <string>
#include <unordered_set>

#include "../nn/state_dict.h"

namespace kiln::optim {

/// A 0-dim float64 CPU tensor holding `value` (how state dicts store numbers).
Tensor scalar_state(double value);

/// Reads a state dict for `owner` (the optimizer or scheduler name, for messages).
class StateReader {
 public:
  /// Reads `dict`; `owner` starts every error message.
  StateReader(const StateDict& dict, std::string owner) : dict_(dict), owner_(std::move(owner)) {}

  /// The name error messages start with.
  const std::string& owner() const { return owner_; }
  /// True when `key` is present.
  bool has(const std::string& key) const { return dict_.contains(key); }
  /// The tensor under `key` (marked as used); throws naming the key when absent.
  const Tensor& tensor(const std::string& key);
  /// The number under `key`: a tensor of one element; throws when absent or not one element.
  double number(const std::string& key);
  /// number(key) that must be 0 or 1.
  bool flag(const std::string& key);
  /// number(key) that must be an integer.
  int64_t integer(const std::string& key);
  /// Throws naming the first key of the dict that no call above has read.
  void check_all_used() const;
  /// The writer's name in the metadata must be `expected` when the metadata names one.
  void check_writer(const std::string& metadata_key, const std::string& expected) const;

 private:
  const StateDict& dict_;
  std::string owner_;
  std::unordered_set<std::string> used_;
};

}  // namespace kiln::optim
