// DataLoader: (x, y) mini-batches over a pair of tensors whose first dim is the sample, in
// the spirit of PyTorch's DataLoader(TensorDataset(x, y), batch_size, shuffle, drop_last).
//
// Order. Epoch e visits the samples in epoch_permutation(n, seed, e): a Fisher-Yates shuffle
// driven by std::mt19937_64 seeded from (seed, e) through std::seed_seq, with bounded
// integers drawn by rejection. The standard fixes both the engine's and seed_seq's output (it
// leaves std::shuffle and std::uniform_int_distribution to the implementation, so they are
// not used), so an order depends on the seed and the epoch number alone: the same on every
// platform, and epoch 7 of a resumed run is epoch 7 of the run it resumes.
//
// Placement. Placement::Device (the default) moves the data set to the device once; each
// epoch then gathers it into the epoch's order with one index_select per tensor on the
// device, and every batch is a contiguous narrow() view of that copy: no per-batch kernel,
// transfer or host synchronisation (index_select checks its indices with one small read-back
// per call, so per-batch gathers would synchronise every step). The price is a second copy of
// the data set on the device during an epoch. Placement::Host keeps the data on the CPU,
// gathers each batch there and copies it to the device with a non-blocking transfer (staged
// through pinned memory): for data sets that do not fit twice on the device.
#pragma once

#include <kiln/kiln.h>

#include <cstdint>
#include <iterator>
#include <vector>

namespace kiln::data {

/// Where the data set lives while batches are drawn.
enum class Placement {
  Device,  // all of it on options.device; batches are views of a per-epoch shuffled copy
  Host,    // on the CPU; each batch gathered there and copied to options.device
};

/// How a DataLoader batches and orders.
struct DataLoaderOptions {
  int64_t batch_size = 64;   // samples per batch, > 0
  bool shuffle = true;       // a new order every epoch; false: 0, 1, ..., n-1
  bool drop_last = false;    // drop the last batch when it is smaller than batch_size
  uint64_t seed = 0;         // with the epoch number, fixes the order
  Device device = Device::cpu();
  Placement placement = Placement::Device;
};

/// One mini-batch: rows of x and y on the loader's device.
struct Batch {
  Tensor x{};          // x's rows, [size, ...]
  Tensor y{};          // y's rows, [size, ...]
  int64_t index = 0;   // the batch's number within its epoch
  int64_t size = 0;    // samples in it
};

/// The order in which epoch `epoch` (>= 0) visits samples 0..n-1 for `seed`.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

/// Mini-batches of (x, y) pairs, one epoch at a time.
class DataLoader {
 public:
  class Epoch;

  /// x and y share their first dim (the sample); they are moved to options.device
  /// (Placement::Device) or to the CPU (Placement::Host) once, here.
  DataLoader(const Tensor& x, const Tensor& y, DataLoaderOptions options);

  /// Samples in the data set.
  int64_t num_samples() const { return x_.size(0); }
  /// Batches per epoch (the last one smaller unless drop_last or batch_size divides n).
  int64_t num_batches() const;
  /// The options the loader was made with.
  const DataLoaderOptions& options() const { return options_; }
  /// Epoch `epoch` (>= 0): its order, and with Placement::Device its shuffled copy on the
  /// device, are made here. Iterate it with a range-for.
  Epoch epoch(int64_t epoch) const;

 private:
  Tensor x_, y_;
  DataLoaderOptions options_;
};

/// One pass over the data in one order; batches are made on demand (a range of Batch).
class DataLoader::Epoch {
 public:
  /// Walks the batches in order; dereferencing makes the batch.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Batch;

    Iterator() = default;
    /// The batch at this position.
    Batch operator*() const { return epoch_->batch(index_); }
    /// Moves to the next batch.
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    /// Moves to the next batch, returning the position before.
    Iterator operator++(int) {
      Iterator old = *this;
      ++index_;
      return old;
    }
    /// Same position.
    bool operator==(const Iterator& other) const { return index_ == other.index_; }

   private:
    friend class Epoch;
    Iterator(const Epoch* epoch, int64_t index) : epoch_(epoch), index_(index) {}
    const Epoch* epoch_ = nullptr;
    int64_t index_ = 0;
  };

  /// Batches in this epoch.
  int64_t size() const { return num_batches_; }
  /// Batch `i` (0 <= i < size()).
  Batch batch(int64_t i) const;
  /// The sample order of this epoch (all n samples, also those drop_last leaves out).
  const std::vector<int64_t>& order() const { return order_; }
  /// The first batch.
  Iterator begin() const { return Iterator(this, 0); }
  /// Past the last batch.
  Iterator end() const { return Iterator(this, num_batches_); }

 private:
  friend class DataLoader;
  Epoch() = default;

  std::vector<int64_t> order_;
  Tensor x_, y_;  // Device: the epoch's gathered copy (or the data itself unshuffled); Host: the data
  DataLoaderOptions options_;
  int64_t num_batches_ = 0;
};

}  // namespace kiln::data
