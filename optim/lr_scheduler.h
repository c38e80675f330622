// Learning-rate schedulers, as torch.optim.lr_scheduler's: a scheduler is bound to an
// optimizer, sets every group's learning rate when constructed (epoch 0) and on each step(),
// and remembers the rates it set (get_last_lr()).
//
// Rates come from PyTorch's closed forms over each group's base rate (the group's
// initial_lr, recorded by the first scheduler attached to the optimizer, as PyTorch's
// group["initial_lr"]):
//   StepLR             base * gamma^floor(epoch / step_size)
//   LinearLR           base * (start + (end - start) * min(epoch, total_iters) / total_iters)
//   CosineAnnealingLR  eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
// PyTorch's step() uses recursive forms equal to these up to rounding. Because the rates are
// computed from the base rate, two schedulers do not stack on one optimizer: warm-up then
// cosine is a SequentialLR (sequential_lr.h).
//
// state_dict() holds the progress (last_epoch, _step_count, base_lrs.<g>, _last_lr.<g>) and
// the settings (step_size, gamma, ...). load_state_dict() restores the progress and checks
// that the settings are this scheduler's (a checkpoint of another recipe is refused rather
// than half-applied); it does not touch the optimizer, whose own state dict holds the rates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optimizer.h"

namespace kiln::optim {

class SequentialLR;

/// Base class of the schedulers; see the file comment. Not copyable; it refers to its
/// optimizer, which must outlive it.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// The scheduler's class name ("StepLR", ...), which starts its error messages.
  const std::string& name() const { return name_; }
  /// Advances one epoch (or iteration) and sets every group's learning rate.
  virtual void step();
  /// The learning rates the last step set, one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  /// Epochs stepped since construction (0 right after it).
  int64_t last_epoch() const { return last_epoch_; }
  /// The base learning rates the closed forms start from, one per group.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  /// The optimizer this scheduler drives.
  Optimizer& optimizer() const { return optimizer_; }

  /// Progress and settings; see the file comment for the keys.
  StateDict state_dict() const;
  /// Restores a state_dict() of a scheduler with the same settings; a bad dict throws and
  /// leaves the scheduler unchanged.
  void load_state_dict(const StateDict& dict);

 protected:
  /// Binds to `optimizer`, recording each group's initial_lr if no scheduler has yet.
  /// Derived constructors call initial_step() once their settings are set.
  LRScheduler(Optimizer& optimizer, std::string name);
  /// The closed-form learning rate of group `g` at `epoch` (>= 0).
  virtual double lr_at(size_t g, int64_t epoch) const = 0;
  /// Writes the settings under `prefix`.
  virtual void write_settings(StateDict& dict, const std::string& prefix) const = 0;
  /// Throws unless the settings under `prefix` equal this scheduler's.
  virtual void check_settings(StateReader& reader, const std::string& prefix) const = 0;
  /// Steps to epoch 0 (PyTorch's _initial_step).
  void initial_step() { set_epoch(0); }
  /// Sets last_epoch to `epoch` and every group's rate to lr_at(g, epoch).
  void set_epoch(int64_t epoch);
  /// Throws "<name>.load_state_dict: <key> is V but this scheduler's is W" unless equal.
  void check_setting(StateReader& reader, const std::string& key, double expected) const;

 private:
  friend class SequentialLR;
  struct Progress {
    int64_t last_epoch = 0;
    int64_t step_count = 0;
    std::vector<double> base_lrs, last_lr;
    std::vector<Progress> subs;  // SequentialLR's schedulers
  };
  // Writes progress and settings under `prefix`.
  virtual void write(StateDict& dict, const std::string& prefix) const;
  // Reads and checks everything under `prefix` without changing the scheduler.
  virtual Progress read_progress(StateReader& reader, const std::string& prefix) const;
  // Installs what read_progress() returned.
  virtual void restore(Progress p);

  Optimizer& optimizer_;
  std::string name_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
};

/// Multiplies the rate by gamma every step_size epochs.
class StepLR final : public LRScheduler {
 public:
  /// Decays each group's rate by `gamma` every `step_size` (> 0) epochs.
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 private:
  double lr_at(size_t g, int64_t epoch) const override;
  void write_settings(StateDict& dict, const std::string& prefix) const override;
  void check_settings(StateReader& reader, const std::string& prefix) const override;
  int64_t step_size_;
  double gamma_;
};

/// Scales the rate linearly from start_factor to end_factor over total_iters epochs
/// (linear warm-up), then holds it at base * end_factor.
class LinearLR final : public LRScheduler {
 public:
  /// PyTorch's defaults: start 1/3, end 1, 5 iterations; 0 < start_factor <= 1,
  /// 0 <= end_factor <= 1, total_iters > 0.
  explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3.0, double end_factor = 1.0,
                    int64_t total_iters = 5);

 private:
  double lr_at(size_t g, int64_t epoch) const override;
  void write_settings(StateDict& dict, const std::string& prefix) const override;
  void check_settings(StateReader& reader, const std::string& prefix) const override;
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

/// Cosine annealing from the base rate to eta_min over T_max epochs (continuing as a
/// cosine past T_max, as PyTorch's closed form does).
class CosineAnnealingLR final : public LRScheduler {
 public:
  /// Anneals over `T_max` (> 0) epochs down to `eta_min` (>= 0).
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 private:
  double lr_at(size_t g, int64_t epoch) const override;
  void write_settings(StateDict& dict, const std::string& prefix) const override;
  void check_settings(StateReader& reader, const std::string& prefix) const override;
  int64_t t_max_;
  double eta_min_;
};

}  // namespace kiln::optim
