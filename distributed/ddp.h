// DistributedDataParallel: PyTorch's torch.nn.parallel.DistributedDataParallel for C++ — a
// Module that wraps a model, one replica per rank, and keeps the replicas identical:
//   - at construction, every parameter and buffer is broadcast from rank 0 (after checking
//     that every rank wraps a model with the same parameter shapes);
//   - forward() runs the wrapped module (broadcasting buffers from rank 0 first, with
//     broadcast_buffers) and prepares the Reducer (reducer.h) for the backward pass;
//   - during backward, gradients are averaged across ranks bucket by bucket while the
//     earlier layers are still being differentiated; when backward returns, every rank's
//     .grad() holds the average of the ranks' gradients, so the same optimizer step keeps
//     the replicas equal.
// no_sync() returns a guard under which forwards prepare nothing: gradients accumulate
// locally, and the next synced backward reduces the accumulated sums.
//
// The wrapped module is registered as the child "module" (state_dict keys "module.fc.weight",
// as in PyTorch). The layer sits above nn/ (distributed/ is the top layer), so the alias
// nn::DistributedDataParallel is declared here, not in nn/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "../nn/module.h"
#include "process_group.h"
#include "reducer.h"

namespace kiln::distributed {

/// How DistributedDataParallel buckets and synchronises (PyTorch's constructor arguments).
struct DDPOptions {
  double bucket_cap_mb = 25.0;        ///< buckets after the first close at this many MiB
  double first_bucket_cap_mb = 1.0;   ///< the first bucket closes at this many MiB (starts communication early)
  bool find_unused_parameters = false;  ///< reduce zeros for parameters a forward does not use, instead of an error
  bool broadcast_buffers = true;        ///< copy rank 0's buffers to every rank at each forward
  ProcessGroup* process_group = nullptr;  ///< default: default_group()
};

class DistributedDataParallel;

/// Gradients accumulate locally while it lives (DistributedDataParallel::no_sync()).
class [[nodiscard]] NoSyncGuard {
 public:
  /// Turns synchronisation off on `ddp` until the guard ends.
  explicit NoSyncGuard(DistributedDataParallel& ddp);
  /// Restores the synchronisation setting the guard found.
  ~NoSyncGuard();
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;

 private:
  DistributedDataParallel& ddp_;
  bool previous_;
};

/// See the file comment.
class DistributedDataParallel : public nn::Module {
 public:
  /// Wraps `module` (already on its device) for data-parallel training over the group.
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options = {});
  /// Removes the gradient hooks from the wrapped module's parameters (the module lives on).
  ~DistributedDataParallel() override;
  DistributedDataParallel(DistributedDataParallel&&) = default;
  DistributedDataParallel& operator=(DistributedDataParallel&&) = delete;

  /// Runs the wrapped module and prepares the gradient reduction of its backward pass.
  Tensor forward(const Tensor& x) override;
  /// The wrapped module.
  nn::Module& module() const { return *module_; }
  /// The wrapped module, shared.
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  /// The group gradients are reduced over.
  ProcessGroup& process_group() const { return *group_; }

  /// A guard under which forwards and backwards only accumulate gradients locally.
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }
  /// False inside no_sync() (PyTorch's require_backward_grad_sync).
  bool require_backward_grad_sync() const { return sync_; }

  /// The buckets, in launch order: the dotted names of their parameters, in slot order.
  std::vector<std::vector<std::string>> bucket_parameter_names() const;
  /// The options, in PyTorch's repr style.
  std::string extra_repr() const override;

 private:
  friend class NoSyncGuard;
  void check_replicas_match() const;
  void broadcast_from_rank0(const std::vector<std::pair<std::string, Tensor>>& tensors) const;

  std::shared_ptr<nn::Module> module_;
  DDPOptions options_;
  ProcessGroup* group_;
  std::shared_ptr<Reducer> reducer_;
  bool sync_ = true;
};

}  // namespace kiln::distributed

namespace kiln::nn {
/// torch.nn.parallel.DistributedDataParallel's spelling (declared here: distributed/ is above nn/).
using DistributedDataParallel = distributed::DistributedDataParallel;
}  // namespace kiln::nn
