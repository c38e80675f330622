// CudaGraph: one CUDA graph captured from Kiln ops and replayed, like torch.cuda.CUDAGraph.
// Capture records the kernels the calling thread launches between capture_begin() and
// capture_end() instead of running them; replay() launches them all with one
// cudaGraphLaunch, so a step of many small kernels costs one launch on the host.
//
// What capture does (graph/cuda_graph.cpp):
// - a side stream of the graph's own becomes the thread's current stream (the legacy default
//   stream cannot be captured); it first waits for the caller's stream;
// - the device's caching allocator routes that stream's allocations to a private pool, so
//   the addresses baked into the graph stay reserved for it: tensors created during capture
//   and kept (the graph's outputs, gradients) live there, and memory freed during capture is
//   reused within the capture only. memory_summary() lists the pool;
// - the default generator hands out graph-relative Philox offsets (tensor/generator.h), and
//   each replay reserves fresh blocks, so dropout draws new numbers on every replay;
// - the capture runs in cudaStreamCaptureModeRelaxed, so the allocator may still look at its
//   events; anything that would wait for the GPU (item(), a blocking copy) fails the capture
//   with a kiln::Error, after which the graph is empty and everything else is as before;
// - host code that computes kernel arguments per step (an optimizer's step()) runs inside
//   cuda::run_updatable (core/graph_capture.h): before each replay after the first, it runs
//   again and rewrites its kernels' arguments in the instantiated graph.
// Run the work once eagerly on capture_stream() before capturing (a warm-up), so that
// one-time set-up (cuBLASLt workspaces and plans, device-error records) is not captured.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../allocator/caching_allocator.h"
#include "../core/device.h"
#include "../core/graph_capture.h"
#include "../core/stream.h"

namespace kiln::graph {

/// A captured CUDA graph and the private memory pool behind it; see the file comment.
class CudaGraph {
 public:
  /// An empty graph for `device` (a CUDA device; throws in a CPU-only build or without a GPU).
  explicit CudaGraph(Device device = Device::cuda(0));
  /// Destroys the graph and gives its pool back (tensors still alive in it keep their memory).
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  /// Starts capturing the calling thread's work on the device (see the file comment).
  void capture_begin();
  /// Ends the capture and instantiates the graph.
  void capture_end();
  /// Abandons a capture under way (after an error): nothing is instantiated, the stream,
  /// the allocator and the generator are restored. Never throws.
  void capture_abort() noexcept;
  /// Launches the graph on the calling thread's current stream (one cudaGraphLaunch, shown
  /// by the profiler as a "cudaGraphLaunch" row with the graph's kernels under it).
  void replay();

  /// Captures everything `fn` launches: capture_begin, fn(), capture_end, with capture_abort
  /// and a rethrow if fn or the capture fails.
  template <typename Fn>
  void capture(Fn&& fn) {
    capture_begin();
    try {
      fn();
    } catch (...) {
      capture_abort();
      throw;
    }
    capture_end();
  }

  /// The stream captures run on (use it for the warm-up run).
  Stream capture_stream() const { return stream_; }
  /// The private pool holding the graph's memory.
  MemPoolId pool() const { return pool_; }
  /// True once capture_end() has instantiated a graph.
  bool captured() const { return exec_ != nullptr; }
  /// True between capture_begin() and capture_end()/capture_abort().
  bool capturing() const { return capturing_; }
  /// Kernel and memory nodes in the captured graph.
  size_t num_nodes() const { return num_nodes_; }
  /// Philox blocks each replay reserves from the default generator.
  uint64_t random_blocks() const { return random_blocks_; }
  /// The device.
  Device device() const { return device_; }

 private:
  void restore_after_capture() noexcept;

  Device device_;
  Stream stream_;
  Stream previous_stream_;
  MemPoolId pool_ = 0;
  DataPtr philox_state_;      // device memory: {seed, base offset} for random kernels
  void* graph_ = nullptr;     // cudaGraph_t
  void* exec_ = nullptr;      // cudaGraphExec_t
  size_t num_nodes_ = 0;
  uint64_t random_blocks_ = 0;
  bool capturing_ = false;
  std::vector<cuda::detail::ReplayUpdate> updates_;  // run before each replay but the first
  uint64_t replays_ = 0;
};

}  // namespace kiln::graph
