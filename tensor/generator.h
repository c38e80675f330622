// Generator: the seed and the position in the Philox stream. Each random op reserves a
// range of counter blocks and computes its numbers from (seed, block), so results depend
// only on the seed and the sequence of random calls, never on threads or devices.
//
// CUDA Graphs (Note [Random numbers in a CUDA graph]): a captured kernel's arguments are
// frozen, yet each replay must draw new numbers. While a graph is captured, reserve() hands
// out offsets relative to the capture's start, and for_kernel() — which every random op
// applies to the state it launches with — tags them with a device pointer to {seed, base
// offset}; the kernels add the base they read there. Before each replay the graph
// reserves as many blocks as the capture consumed and writes {seed, first block} to that
// pointer, so a replay draws exactly what the same ops would have drawn eagerly (PyTorch's
// graph-safe generator does the same with its seed/offset tensors).
#pragma once

#include <cstdint>
#include <mutex>

namespace kiln {

/// Where one random op starts in the Philox stream.
struct PhiloxState {
  uint64_t seed;
  uint64_t first_block;
  /// Inside a CUDA graph: device memory holding {seed, base offset}; the kernel uses that
  /// seed and adds the base to first_block. Null for eager calls (and always on the CPU).
  const uint64_t* graph_state = nullptr;
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

  /// Starts a CUDA graph capture: until end_graph_capture(), reserve() returns offsets
  /// counted from 0 and for_kernel() tags states with `device_state` (see the file
  /// comment). Throws when a capture is already under way.
  void begin_graph_capture(const uint64_t* device_state);
  /// Ends the capture; returns the blocks it consumed (each replay reserves that many).
  uint64_t end_graph_capture();
  /// `state` as a kernel launched now must see it: tagged with the capture's device state
  /// while a capture is under way (replays and backward passes re-launch recorded states).
  PhiloxState for_kernel(PhiloxState state) const;

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
  const uint64_t* capture_state_ = nullptr;  // non-null while a CUDA graph is captured
  uint64_t capture_offset_ = 0;              // blocks consumed by the capture so far
};

/// The process-wide generator that factories and dropout use.
Generator& default_generator();

/// Seeds the default generator: manual_seed(s); randn(...) is then reproducible.
void manual_seed(uint64_t seed);

}  // namespace kiln
