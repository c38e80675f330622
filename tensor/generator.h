// Generator: the seed and the position in the Philox stream. Each random op reserves a
// range of counter blocks and computes its numbers from (seed, block), so results depend
// only on the seed and the sequence of random calls, never on threads or devices.
#pragma once

#include <cstdint>
#include <mutex>

namespace kiln {

/// Where one random op starts in the Philox stream.
struct PhiloxState {
  uint64_t seed;
  uint64_t first_block;
};

/// A seeded source of random numbers (thread-safe).
class Generator {
 public:
  /// PyTorch's default seed, so an unseeded program is still reproducible.
  static constexpr uint64_t kDefaultSeed = 67280421310721ull;

  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}

  /// Restarts the stream from `seed`.
  void manual_seed(uint64_t seed);
  /// The current seed.
  uint64_t seed() const;
  /// Blocks consumed since the last seeding.
  uint64_t offset() const;
  /// Reserves `blocks` consecutive Philox blocks for one op and returns where they start.
  PhiloxState reserve(uint64_t blocks);

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

/// The process-wide generator that factories and dropout use.
Generator& default_generator();

/// Seeds the default generator: manual_seed(s); randn(...) is then reproducible.
void manual_seed(uint64_t seed);

}  // namespace kiln
