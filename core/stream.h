// Streams and events: the order in which work runs on a GPU. Each thread has a current
// stream per device (the default stream until set_current_stream or a StreamGuard changes
// it); ops launch their kernels on it and the caching allocator ties blocks to it, as in
// PyTorch. In a CPU-only build the types exist, and using them on a GPU is an error.
#pragma once

#include <cstdint>
#include <string>

#include "device.h"

namespace kiln {

/// An opaque stream handle (a cudaStream_t on CUDA devices; 0 is the default stream).
using StreamId = uintptr_t;

/// A CUDA stream of one device (the default stream unless created).
class Stream {
 public:
  /// The default stream of cuda:0.
  Stream() = default;
  /// Wraps an existing stream handle of `device`.
  Stream(Device device, StreamId id) : device_(device), id_(id) {}
  /// A new stream on `device` that does not synchronise with the default stream. Streams
  /// are never destroyed (like PyTorch's stream pool), so handles stay valid everywhere.
  static Stream create(Device device);

  Device device() const { return device_; }
  /// The cudaStream_t, as an integer (0: the default stream).
  StreamId id() const { return id_; }
  /// Blocks until all work queued on the stream has run, then raises an error a kernel on
  /// the device recorded since the last synchronisation (core/device_error.h).
  void synchronize() const;
  /// True when all work queued on the stream has run.
  bool query() const;
  bool operator==(const Stream&) const = default;

 private:
  Device device_ = Device::cuda(0);
  StreamId id_ = 0;
};

/// A CUDA event: a marker in a stream that other streams or the host can wait for.
class Event {
 public:
  /// An event on `device`, with timing enabled when `timing` is true.
  explicit Event(Device device, bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;

  /// Marks the current end of `stream`'s queue.
  void record(const Stream& stream);
  /// Makes `stream` wait (on the device) until this event has completed.
  void block(const Stream& stream) const;
  /// Blocks the host until the event has completed, then raises a recorded device-side
  /// error as Stream::synchronize does.
  void synchronize() const;
  /// True once the event has completed.
  bool query() const;
  /// Milliseconds between this event and a later one (both recorded, timing enabled).
  float elapsed_ms(const Event& later) const;

 private:
  Device device_;
  void* event_ = nullptr;  // cudaEvent_t
};

namespace cuda {

/// The calling thread's current stream on `device` (a CUDA device).
Stream current_stream(Device device = Device::cuda(0));
/// Makes `stream` the calling thread's current stream on its device.
void set_current_stream(const Stream& stream);
/// Blocks until all work on `device` has run, then raises an error a kernel recorded since
/// the last synchronisation (core/device_error.h).
void synchronize(Device device = Device::cuda(0));

/// Sets `stream` as current for the scope and restores the previous one after.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

/// What a program usually wants to know about a GPU.
struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;            ///< compute capability
  int multiprocessors = 0;
  size_t total_memory = 0;             ///< bytes
  size_t l2_cache_bytes = 0;
  size_t shared_memory_per_block = 0;  ///< opt-in maximum, bytes
  int memory_bus_width = 0;            ///< bits
  int max_clock_khz = 0;               ///< the SMs' maximum (boost) clock
  int memory_clock_khz = 0;            ///< the memory's maximum clock
};

/// The properties of `device` (throws for a device index out of range).
DeviceProperties device_properties(Device device = Device::cuda(0));

}  // namespace cuda
}  // namespace kiln
