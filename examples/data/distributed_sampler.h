// DistributedSampler: which samples each rank of a data-parallel job trains on in an epoch
// (PyTorch's torch.utils.data.DistributedSampler). Every rank draws the same order of all n
// samples — epoch_permutation(n, seed, epoch), so the order depends on the seed and the
// epoch alone, as PyTorch's seed + epoch — then:
//   - without drop_last, the order is padded by wrapping around to total_size(), a multiple
//     of the number of replicas (a few samples are seen twice in an epoch);
//   - with drop_last, it is cut to the largest multiple of the number of replicas;
// and rank r takes every num_replicas-th index starting at r. The shards are disjoint
// (apart from the padding) and together cover the data set.
//
// It is index math only: it knows nothing of process groups, so the caller passes the world
// size and rank (distributed::get_world_size() / get_rank()).
#pragma once

#include <kiln/kiln.h>

#include <cstdint>
#include <vector>

namespace kiln::data {

/// How a DistributedSampler shards and orders.
struct DistributedSamplerOptions {
  bool shuffle = true;     // a new order every epoch (set_epoch); false: 0, 1, ..., n-1
  uint64_t seed = 0;       // with the epoch number, fixes the order; must match across ranks
  bool drop_last = false;  // cut the tail instead of padding to a multiple of num_replicas
};

/// The samples of one rank; see the file comment.
class DistributedSampler {
 public:
  /// A sampler over `dataset_size` samples for `rank` of `num_replicas`.
  DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, DistributedSamplerOptions options = {});

  /// Selects the epoch whose order indices() returns (call it before each epoch, as in PyTorch).
  void set_epoch(int64_t epoch);
  /// The epoch set last (0 at first).
  int64_t epoch() const { return epoch_; }
  /// Samples this rank gets per epoch (the same on every rank).
  int64_t num_samples() const { return num_samples_; }
  /// num_samples() * num_replicas: the padded (or cut) length of the epoch's order.
  int64_t total_size() const { return num_samples_ * num_replicas_; }
  /// This rank's sample indices for the current epoch, in the order to visit them.
  std::vector<int64_t> indices() const;
  /// This rank.
  int64_t rank() const { return rank_; }
  /// The number of ranks.
  int64_t num_replicas() const { return num_replicas_; }

 private:
  int64_t dataset_size_, num_replicas_, rank_;
  DistributedSamplerOptions options_;
  int64_t num_samples_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace kiln::data
