// DataLoader: the per-epoch order (a seeded Fisher-Yates shuffle) and the two placements
// (data_loader.h says why the device placement gathers once per epoch).
#include "data_loader.h"

#include <numeric>
#include <random>
#include <utility>

namespace kiln::data {

namespace {

// A uniform integer in [0, bound) for bound >= 1: draws below 2^64 mod bound are rejected,
// so every residue has the same number of accepted draws (no modulo bias).
uint64_t uniform_below(std::mt19937_64& engine, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t r = engine();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  KILN_CHECK(n >= 0, "epoch_permutation: n must be >= 0, got {}", n);
  KILN_CHECK(epoch >= 0, "epoch_permutation: epoch must be >= 0, got {}", epoch);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  const auto e = static_cast<uint64_t>(epoch);
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(e),
                    static_cast<uint32_t>(e >> 32)};
  std::mt19937_64 engine(seq);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(uniform_below(engine, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

DataLoader::DataLoader(const Tensor& x, const Tensor& y, DataLoaderOptions options) : options_(options) {
  KILN_CHECK(x.defined() && y.defined(), "DataLoader: x and y must be defined tensors");
  KILN_CHECK(x.dim() >= 1 && y.dim() >= 1, "DataLoader: x and y need a sample dim, got shapes {} and {}",
             shape_str(x.sizes()), shape_str(y.sizes()));
  KILN_CHECK(x.size(0) == y.size(0), "DataLoader: x has {} samples (shape {}) but y has {} (shape {})", x.size(0),
             shape_str(x.sizes()), y.size(0), shape_str(y.sizes()));
  KILN_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be positive, got {}", options_.batch_size);
  const Device home = options_.placement == Placement::Device ? options_.device : Device::cpu();
  x_ = x.to(home);
  y_ = y.to(home);
}

int64_t DataLoader::num_batches() const {
  const int64_t n = num_samples(), b = options_.batch_size;
  return options_.drop_last ? n / b : n / b + (n % b != 0);
}

DataLoader::Epoch DataLoader::epoch(int64_t epoch) const {
  KILN_CHECK(epoch >= 0, "DataLoader::epoch: epoch must be >= 0, got {}", epoch);
  Epoch out;
  out.options_ = options_;
  out.num_batches_ = num_batches();
  if (options_.shuffle) {
    out.order_ = epoch_permutation(num_samples(), options_.seed, epoch);
  } else {
    out.order_.resize(static_cast<size_t>(num_samples()));
    std::iota(out.order_.begin(), out.order_.end(), int64_t{0});
  }
  if (options_.shuffle && options_.placement == Placement::Device && num_samples() > 0) {
    const Tensor index = from_vector(out.order_, {num_samples()}).to(options_.device);
    out.x_ = index_select(x_, 0, index);
    out.y_ = index_select(y_, 0, index);
  } else {
    out.x_ = x_;
    out.y_ = y_;
  }
  return out;
}

Batch DataLoader::Epoch::batch(int64_t i) const {
  KILN_CHECK(i >= 0 && i < num_batches_, "DataLoader::Epoch::batch: batch {} out of range [0, {})", i, num_batches_);
  const int64_t n = static_cast<int64_t>(order_.size());
  const int64_t start = i * options_.batch_size;
  const int64_t size = std::min(options_.batch_size, n - start);
  Batch b{.index = i, .size = size};
  if (options_.placement == Placement::Device || !options_.shuffle) {
    b.x = x_.narrow(0, start, size);
    b.y = y_.narrow(0, start, size);
  } else {
    const std::vector<int64_t> ids(order_.begin() + start, order_.begin() + start + size);
    const Tensor index = from_vector(ids, {size});
    b.x = index_select(x_, 0, index);
    b.y = index_select(y_, 0, index);
  }
  if (options_.placement == Placement::Host) {
    b.x = b.x.to(options_.device, /*non_blocking=*/true);
    b.y = b.y.to(options_.device, /*non_blocking=*/true);
  }
  return b;
}

}  // namespace kiln::data
