// SequentialLR: schedulers taking turns at milestones (torch.optim.lr_scheduler.SequentialLR),
// Kiln's way to chain a warm-up and a decay:
//
//   auto warmup = std::make_shared<optim::LinearLR>(opt, 0.01, 1.0, 100);
//   auto cosine = std::make_shared<optim::CosineAnnealingLR>(opt, 900);
//   optim::SequentialLR schedule(opt, {warmup, cosine}, {100});   // step() once per iteration
//
// Scheduler k runs from milestone k-1 (0 for the first) and starts over at its own epoch 0
// there, as PyTorch's does (it calls the next scheduler's step(0) at each milestone). All
// schedulers must drive `optimizer`; constructing the sequence undoes the rates the
// schedulers set when they were made and applies the first one's epoch 0. Step the
// SequentialLR only, not the schedulers in it.
#pragma once

#include <memory>
#include <vector>

#include "lr_scheduler.h"

namespace kiln::optim {

/// Runs `schedulers` one after the other, switching at `milestones`; see the file comment.
class SequentialLR final : public LRScheduler {
 public:
  /// One more scheduler than milestones; milestones positive and increasing.
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  /// Advances one epoch in the running scheduler (the next one's epoch 0 at a milestone).
  void step() override;
  /// The schedulers, in order.
  const std::vector<std::shared_ptr<LRScheduler>>& schedulers() const { return schedulers_; }

 private:
  // The scheduler that runs at `epoch` and the epoch it is at there.
  std::pair<size_t, int64_t> locate(int64_t epoch) const;
  // set_epoch(epoch), with the running scheduler's progress kept in step.
  void advance_to(int64_t epoch);
  double lr_at(size_t g, int64_t epoch) const override;
  void write_settings(StateDict& dict, const std::string& prefix) const override;
  void check_settings(StateReader& reader, const std::string& prefix) const override;
  void write(StateDict& dict, const std::string& prefix) const override;
  Progress read_progress(StateReader& reader, const std::string& prefix) const override;
  void restore(Progress p) override;

  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace kiln::optim
