// The Threads backend: ranks are threads of one process and meet in shared memory
// (rendezvous.h). It runs the whole data-parallel stack on CPU tensors where there is no GPU
// (tests, CI) and serves world size 1 anywhere. Reductions are computed by every rank from
// all ranks' inputs in rank order (0, 1, 2, ...; 16-bit floats accumulated in float), so
// every rank gets the same bits. Collectives finish before they return: the Work is done.
#pragma once

#include <memory>

#include "process_group.h"
#include "rendezvous.h"

namespace kiln::distributed::detail {

/// One rank of a Threads group.
class ThreadsGroup final : public ProcessGroup {
 public:
  /// Rank `rank` of the group that meets at `rendezvous`.
  ThreadsGroup(int rank, std::shared_ptr<Rendezvous> rendezvous);

  /// This thread's rank.
  int rank() const override { return rank_; }
  /// Number of ranks (threads).
  int size() const override { return rendezvous_->size(); }
  /// Backend::Threads.
  Backend backend() const override { return Backend::Threads; }
  /// The bound on every meeting.
  std::chrono::milliseconds timeout() const override { return rendezvous_->timeout(); }
  /// The CPU.
  Device device() const override { return Device::cpu(); }

  /// ProcessGroup::all_reduce, done on return.
  WorkHandle all_reduce(Tensor& tensor, ReduceOp op) override;
  /// ProcessGroup::broadcast, done on return.
  WorkHandle broadcast(Tensor& tensor, int src) override;
  /// ProcessGroup::all_gather, done on return.
  WorkHandle all_gather(Tensor& output, const Tensor& input) override;
  /// ProcessGroup::reduce_scatter, done on return.
  WorkHandle reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op) override;
  /// ProcessGroup::barrier.
  void barrier() override;

  /// The meeting point this rank shares with the others.
  Rendezvous& rendezvous() { return *rendezvous_; }

 private:
  int rank_;
  std::shared_ptr<Rendezvous> rendezvous_;
};

}  // namespace kiln::distributed::detail
