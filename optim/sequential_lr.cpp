// SequentialLR: the schedulers' closed forms, each from its own epoch 0 at its milestone.
#include "sequential_lr.h"

#include <algorithm>

#include "../core/graph_capture.h"

namespace kiln::optim {

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer, "SequentialLR"), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  KILN_CHECK(!schedulers_.empty(), "SequentialLR: expects at least one scheduler");
  KILN_CHECK(milestones_.size() + 1 == schedulers_.size(),
             "SequentialLR: expects one more scheduler than milestones, got {} schedulers and {} milestones",
             schedulers_.size(), milestones_.size());
  for (size_t k = 0; k < schedulers_.size(); ++k) {
    KILN_CHECK(schedulers_[k] != nullptr, "SequentialLR: scheduler {} is null", k);
    KILN_CHECK(&schedulers_[k]->optimizer() == &optimizer,
               "SequentialLR: scheduler {} ({}) drives another optimizer than the sequence's", k,
               schedulers_[k]->name());
  }
  for (size_t k = 0; k < milestones_.size(); ++k)
    KILN_CHECK(milestones_[k] > 0 && (k == 0 || milestones_[k] > milestones_[k - 1]),
               "SequentialLR: milestones must be positive and increasing, got {} at position {}", milestones_[k], k);
  // Undo the epoch-0 step each scheduler took when it was made (PyTorch's "undo"), then
  // start the first one.
  for (const auto& s : schedulers_) s->last_epoch_ -= 1;
  advance_to(0);
}

std::pair<size_t, int64_t> SequentialLR::locate(int64_t epoch) const {
  const size_t k =
      static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin());
  return {k, k == 0 ? epoch : epoch - milestones_[k - 1]};
}

double SequentialLR::lr_at(size_t g, int64_t epoch) const {
  const auto [k, local] = locate(epoch);
  return schedulers_[k]->lr_at(g, local);
}

void SequentialLR::advance_to(int64_t epoch) {
  set_epoch(epoch);
  const auto [k, local] = locate(epoch);
  LRScheduler& s = *schedulers_[k];
  s.last_epoch_ = local;
  s.last_lr_ = get_last_lr();
  ++s.step_count_;
}

// In a captured CUDA graph the step is repeated before each replay (core/graph_capture.h).
void SequentialLR::step() {
  cuda::run_updatable([this] { advance_to(last_epoch() + 1); });
}

void SequentialLR::write_settings(StateDict& dict, const std::string& prefix) const {
  for (size_t k = 0; k < milestones_.size(); ++k)
    dict.insert(prefix + "_milestones." + std::to_string(k), scalar_state(static_cast<double>(milestones_[k])));
}

void SequentialLR::check_settings(StateReader& reader, const std::string& prefix) const {
  KILN_CHECK(!reader.has(prefix + "_milestones." + std::to_string(milestones_.size())),
             "{}.load_state_dict: the state dict has more than this sequence's {} milestones", name(),
             milestones_.size());
  for (size_t k = 0; k < milestones_.size(); ++k)
    check_setting(reader, prefix + "_milestones." + std::to_string(k), static_cast<double>(milestones_[k]));
}

void SequentialLR::write(StateDict& dict, const std::string& prefix) const {
  LRScheduler::write(dict, prefix);
  for (size_t k = 0; k < schedulers_.size(); ++k)
    schedulers_[k]->write(dict, prefix + "_schedulers." + std::to_string(k) + ".");
}

LRScheduler::Progress SequentialLR::read_progress(StateReader& reader, const std::string& prefix) const {
  Progress p = LRScheduler::read_progress(reader, prefix);
  for (size_t k = 0; k < schedulers_.size(); ++k)
    p.subs.push_back(schedulers_[k]->read_progress(reader, prefix + "_schedulers." + std::to_string(k) + "."));
  return p;
}

void SequentialLR::restore(Progress p) {
  std::vector<Progress> subs = std::move(p.subs);
  LRScheduler::restore(std::move(p));
  for (size_t k = 0; k < schedulers_.size(); ++k) schedulers_[k]->restore(std::move(subs[k]));
}

}  // namespace kiln::optim
