// The scheduler base (binding, stepping, state dict) and the closed-form schedulers.
#include "lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "../core/graph_capture.h"

namespace kiln::optim {

LRScheduler::LRScheduler(Optimizer& optimizer, std::string name) : optimizer_(optimizer), name_(std::move(name)) {
  const size_t groups = optimizer.num_param_groups();
  for (size_t g = 0; g < groups; ++g) {
    if (!optimizer.initial_lr(g)) optimizer.set_initial_lr(g, optimizer.lr(g));
    base_lrs_.push_back(*optimizer.initial_lr(g));
  }
  last_lr_ = base_lrs_;
}

void LRScheduler::set_epoch(int64_t epoch) {
  KILN_CHECK(optimizer_.num_param_groups() == base_lrs_.size(),
             "{}: the optimizer has {} parameter groups but had {} when the scheduler was made", name_,
             optimizer_.num_param_groups(), base_lrs_.size());
  std::vector<double> lrs(base_lrs_.size());
  for (size_t g = 0; g < lrs.size(); ++g) lrs[g] = lr_at(g, epoch);
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_.set_lr(g, lrs[g]);
  last_lr_ = std::move(lrs);
  last_epoch_ = epoch;
  ++step_count_;
}

// In a captured CUDA graph the step is repeated before each replay (core/graph_capture.h).
void LRScheduler::step() {
  cuda::run_updatable([this] { set_epoch(last_epoch_ + 1); });
}

void LRScheduler::check_setting(StateReader& reader, const std::string& key, double expected) const {
  const double got = reader.number(key);
  KILN_CHECK(got == expected, "{}.load_state_dict: {} is {} but this scheduler's is {}", reader.owner(), key, got,
             expected);
}

void LRScheduler::write(StateDict& dict, const std::string& prefix) const {
  dict.insert(prefix + "last_epoch", scalar_state(static_cast<double>(last_epoch_)));
  dict.insert(prefix + "_step_count", scalar_state(static_cast<double>(step_count_)));
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    dict.insert(prefix + "base_lrs." + std::to_string(g), scalar_state(base_lrs_[g]));
  for (size_t g = 0; g < last_lr_.size(); ++g)
    dict.insert(prefix + "_last_lr." + std::to_string(g), scalar_state(last_lr_[g]));
  write_settings(dict, prefix);
}

StateDict LRScheduler::state_dict() const {
  StateDict dict;
  dict.metadata()["kiln.lr_scheduler"] = name_;
  write(dict, "");
  return dict;
}

LRScheduler::Progress LRScheduler::read_progress(StateReader& reader, const std::string& prefix) const {
  Progress p;
  p.last_epoch = reader.integer(prefix + "last_epoch");
  p.step_count = reader.integer(prefix + "_step_count");
  KILN_CHECK(p.last_epoch >= -1 && p.step_count >= 0,
             "{}.load_state_dict: {}last_epoch {} and {}_step_count {} are "
             "not a scheduler's progress",
             reader.owner(), prefix, p.last_epoch, prefix, p.step_count);
  const size_t groups = base_lrs_.size();
  KILN_CHECK(!reader.has(prefix + "base_lrs." + std::to_string(groups)),
             "{}.load_state_dict: the state dict has more than the scheduler's {} parameter groups", reader.owner(),
             groups);
  for (size_t g = 0; g < groups; ++g) {
    const std::string base_key = prefix + "base_lrs." + std::to_string(g);
    KILN_CHECK(reader.has(base_key),
               "{}.load_state_dict: the state dict has {} parameter groups but the scheduler has "
               "{}",
               reader.owner(), g, groups);
    const double base = reader.number(base_key);
    const double last = reader.number(prefix + "_last_lr." + std::to_string(g));
    KILN_CHECK(0.0 <= base && 0.0 <= last,
               "{}.load_state_dict: invalid learning rates {} (base) and {} (last) for "
               "group {}",
               reader.owner(), base, last, g);
    p.base_lrs.push_back(base);
    p.last_lr.push_back(last);
  }
  check_settings(reader, prefix);
  return p;
}

void LRScheduler::restore(Progress p) {
  last_epoch_ = p.last_epoch;
  step_count_ = p.step_count;
  base_lrs_ = std::move(p.base_lrs);
  last_lr_ = std::move(p.last_lr);
}

void LRScheduler::load_state_dict(const StateDict& dict) {
  StateReader reader(dict, name_);
  reader.check_writer("kiln.lr_scheduler", name_);
  Progress p = read_progress(reader, "");
  reader.check_all_used();
  restore(std::move(p));
}

// ---- StepLR -------------------------------------------------------------------------------

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  KILN_CHECK(step_size > 0, "StepLR: step_size must be positive, got {}", step_size);
  KILN_CHECK(std::isfinite(gamma) && gamma >= 0.0, "StepLR: gamma must be a finite number >= 0, got {}", gamma);
  initial_step();
}

double StepLR::lr_at(size_t g, int64_t epoch) const {
  return base_lrs()[g] * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

void StepLR::write_settings(StateDict& dict, const std::string& prefix) const {
  dict.insert(prefix + "step_size", scalar_state(static_cast<double>(step_size_)));
  dict.insert(prefix + "gamma", scalar_state(gamma_));
}

void StepLR::check_settings(StateReader& reader, const std::string& prefix) const {
  check_setting(reader, prefix + "step_size", static_cast<double>(step_size_));
  check_setting(reader, prefix + "gamma", gamma_);
}

// ---- LinearLR -----------------------------------------------------------------------------

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer, "LinearLR"),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  KILN_CHECK(start_factor > 0.0 && start_factor <= 1.0,
             "LinearLR: starting multiplicative factor expected to be greater than 0 and less or equal to 1, got {}",
             start_factor);
  KILN_CHECK(end_factor >= 0.0 && end_factor <= 1.0,
             "LinearLR: ending multiplicative factor expected to be between 0 and 1, got {}", end_factor);
  KILN_CHECK(total_iters > 0, "LinearLR: total_iters must be positive, got {}", total_iters);
  initial_step();
}

double LinearLR::lr_at(size_t g, int64_t epoch) const {
  // PyTorch's order of operations: (end - start) * min(epoch, total) / total.
  const double done = static_cast<double>(std::min(epoch, total_iters_));
  return base_lrs()[g] * (start_factor_ + (end_factor_ - start_factor_) * done / static_cast<double>(total_iters_));
}

void LinearLR::write_settings(StateDict& dict, const std::string& prefix) const {
  dict.insert(prefix + "start_factor", scalar_state(start_factor_));
  dict.insert(prefix + "end_factor", scalar_state(end_factor_));
  dict.insert(prefix + "total_iters", scalar_state(static_cast<double>(total_iters_)));
}

void LinearLR::check_settings(StateReader& reader, const std::string& prefix) const {
  check_setting(reader, prefix + "start_factor", start_factor_);
  check_setting(reader, prefix + "end_factor", end_factor_);
  check_setting(reader, prefix + "total_iters", static_cast<double>(total_iters_));
}

// ---- CosineAnnealingLR --------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingLR"), t_max_(T_max), eta_min_(eta_min) {
  KILN_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got {}", T_max);
  KILN_CHECK(std::isfinite(eta_min) && eta_min >= 0.0,
             "CosineAnnealingLR: eta_min must be a finite number >= 0, got {}", eta_min);
  initial_step();
}

double CosineAnnealingLR::lr_at(size_t g, int64_t epoch) const {
  const double angle = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lrs()[g] - eta_min_) * (1.0 + std::cos(angle)) / 2.0;
}

void CosineAnnealingLR::write_settings(StateDict& dict, const std::string& prefix) const {
  dict.insert(prefix + "T_max", scalar_state(static_cast<double>(t_max_)));
  dict.insert(prefix + "eta_min", scalar_state(eta_min_));
}

void CosineAnnealingLR::check_settings(StateReader& reader, const std::string& prefix) const {
  check_setting(reader, prefix + "T_max", static_cast<double>(t_max_));
  check_setting(reader, prefix + "eta_min", eta_min_);
}

}  // namespace kiln::optim
