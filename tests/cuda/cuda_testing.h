// Helpers shared by the CUDA suites: a checked runtime call, a stream a test case owns, and a
// gate that holds a stream's later work back until the test opens it, so "the stream has not
// finished yet" is a fact the test controls rather than a matter of timing.
#pragma once

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <atomic>

#include "core/stream.h"

namespace kiln::testing {

/// REQUIREs that a CUDA runtime call succeeded, naming the call and the error.
#define CUDA_REQUIRE(call)                              \
  do {                                                  \
    const cudaError_t status_ = (call);                 \
    INFO(#call << ": " << cudaGetErrorString(status_)); \
    REQUIRE(status_ == cudaSuccess);                    \
  } while (0)

/// A stream of the test case's own (non-blocking: no implicit ordering with the legacy stream).
class OwnedStream {
 public:
  OwnedStream() { CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~OwnedStream() {
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  /// The runtime's handle.
  cudaStream_t get() const { return stream_; }
  /// The handle as the allocator's stream id.
  StreamId id() const { return reinterpret_cast<StreamId>(stream_); }

 private:
  cudaStream_t stream_ = nullptr;
};

/// Holds back the work queued on a stream after it until open() (or the end of the scope):
/// the stream runs a host function that waits for the gate.
class Gate {
 public:
  /// Gates `stream` (a runtime handle).
  explicit Gate(cudaStream_t stream) : stream_(stream) { CUDA_REQUIRE(cudaLaunchHostFunc(stream_, &Gate::wait, this)); }
  /// Gates a stream the case owns.
  explicit Gate(const OwnedStream& stream) : Gate(stream.get()) {}
  /// Gates a Kiln stream.
  explicit Gate(const Stream& stream) : Gate(reinterpret_cast<cudaStream_t>(stream.id())) {}
  ~Gate() {
    open();
    (void)cudaStreamSynchronize(stream_);  // the host function has returned before `this` goes
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  /// Lets the stream's later work run.
  void open() {
    open_.store(true, std::memory_order_release);
    open_.notify_all();
  }

 private:
  static void CUDART_CB wait(void* self) { static_cast<Gate*>(self)->open_.wait(false, std::memory_order_acquire); }
  cudaStream_t stream_;
  std::atomic<bool> open_{false};
};

}  // namespace kiln::testing
