// DistributedSampler (distributed_sampler.h): the per-rank share of an epoch's order.
#include "distributed_sampler.h"

#include <limits>
#include <numeric>

#include "data_loader.h"

namespace kiln::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank,
                                       DistributedSamplerOptions options)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
  KILN_CHECK(dataset_size >= 0, "DistributedSampler: dataset_size must be >= 0, got {}", dataset_size);
  KILN_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be >= 1, got {}", num_replicas);
  KILN_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: invalid rank {}, rank should be in the interval "
             "[0, {}]", rank, num_replicas - 1);
  KILN_CHECK(dataset_size <= std::numeric_limits<int64_t>::max() - (num_replicas - 1),
             "DistributedSampler: dataset_size {} padded to a multiple of num_replicas {} overflows int64",
             dataset_size, num_replicas);
  // drop_last: the largest multiple of num_replicas not above n; otherwise the smallest not
  // below it (ceil without the overflow of n + num_replicas - 1).
  const int64_t whole = dataset_size / num_replicas;
  num_samples_ = options_.drop_last || dataset_size % num_replicas == 0 ? whole : whole + 1;
}

void DistributedSampler::set_epoch(int64_t epoch) {
  KILN_CHECK(epoch >= 0, "DistributedSampler::set_epoch: epoch must be >= 0, got {}", epoch);
  epoch_ = epoch;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order;
  if (options_.shuffle) {
    order = epoch_permutation(dataset_size_, options_.seed, epoch_);
  } else {
    order.resize(static_cast<size_t>(dataset_size_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  // Position k of the padded order is order[k mod n] (wrapping around, as often as needed
  // when the padding is longer than the data set); with drop_last, k never reaches n.
  for (int64_t j = 0; j < num_samples_; ++j) {
    const int64_t k = rank_ + j * num_replicas_;
    mine.push_back(order[static_cast<size_t>(k % dataset_size_)]);
  }
  return mine;
}

}  // namespace kiln::data
