// CudaGraph over the CUDA runtime's stream capture (see cuda_graph.h). In a CPU-only build
// the constructor says that CUDA graphs need a CUDA build, and nothing else can be reached.
#include "cuda_graph.h"

#include "../allocator/memory.h"
#include "../core/error.h"
#include "../profiler/record_function.h"
#include "../tensor/generator.h"

#ifdef KILN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "../core/cuda_guard.h"
#endif

namespace kiln::graph {

#ifdef KILN_WITH_CUDA

namespace detail {
/// Writes {seed, first_block} to `state` on `stream` (graph/cuda_graph_state.cu).
void write_philox_state(uint64_t* state, uint64_t seed, uint64_t first_block, cudaStream_t stream);
}  // namespace detail

namespace {
cudaStream_t as_stream(const Stream& s) { return reinterpret_cast<cudaStream_t>(s.id()); }
}  // namespace

CudaGraph::CudaGraph(Device device) : device_(device) {
  KILN_CHECK(device.is_cuda(), "CudaGraph: expected a CUDA device, got {}", device.str());
  stream_ = Stream::create(device);  // checks that the device exists
  CachingAllocator& alloc = caching_allocator(device, "CudaGraph");
  philox_state_ = alloc.allocate_data(2 * sizeof(uint64_t), stream_.id(), "CudaGraph");
}

CudaGraph::~CudaGraph() {
  capture_abort();
  cuda::DeviceGuard guard(device_.index());
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  // Replays may still be running: the pool's segments and the state block are released only
  // after the device is done with them.
  (void)cudaDeviceSynchronize();
  philox_state_ = DataPtr();
  if (pool_ != 0) {
    try {
      caching_allocator(device_).release_pool(pool_);
    } catch (...) {  // destructors never throw; the pool then lives on with the allocator
    }
  }
}

void CudaGraph::capture_begin() {
  KILN_CHECK(!capturing_, "CudaGraph::capture_begin: a capture is already under way");
  KILN_CHECK(exec_ == nullptr, "CudaGraph::capture_begin: this graph was already captured; make a new CudaGraph");
  cuda::DeviceGuard guard(device_.index());
  CachingAllocator& alloc = caching_allocator(device_);
  if (pool_ == 0) pool_ = alloc.create_pool();
  previous_stream_ = cuda::current_stream(device_);
  // The capture stream starts after everything the caller queued so far.
  cudaEvent_t ready = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(ready, as_stream(previous_stream_)));
  CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream_), ready, 0));
  CUDA_CHECK(cudaEventDestroy(ready));

  // Each step undone if a later one throws (another capture already under way on this thread
  // or drawing from the generator), so a refused capture_begin changes nothing.
  alloc.begin_allocate_to_pool(pool_, stream_.id());
  try {
    default_generator().begin_graph_capture(static_cast<const uint64_t*>(philox_state_.get()));
  } catch (...) {
    alloc.end_allocate_to_pool(pool_);
    throw;
  }
  try {
    cuda::detail::begin_capture_updates();
  } catch (...) {
    (void)default_generator().end_graph_capture();
    alloc.end_allocate_to_pool(pool_);
    throw;
  }
  cuda::set_current_stream(stream_);
  capturing_ = true;
  const cudaError_t status = cudaStreamBeginCapture(as_stream(stream_), cudaStreamCaptureModeRelaxed);
  if (status != cudaSuccess) {
    restore_after_capture();
    ::kiln::detail::throw_cuda_error("cudaStreamBeginCapture", status, __FILE__, __LINE__);
  }
}

void CudaGraph::restore_after_capture() noexcept {
  if (!capturing_) return;
  capturing_ = false;
  random_blocks_ = default_generator().end_graph_capture();
  updates_ = cuda::detail::end_capture_updates();
  try {
    caching_allocator(device_).end_allocate_to_pool(pool_);
    cuda::set_current_stream(previous_stream_);
  } catch (...) {  // both only fail for a device that does not exist, which the constructor ruled out
  }
}

void CudaGraph::capture_end() {
  KILN_CHECK(capturing_, "CudaGraph::capture_end: no capture is under way");
  cuda::DeviceGuard guard(device_.index());
  cudaGraph_t graph = nullptr;
  const cudaError_t status = cudaStreamEndCapture(as_stream(stream_), &graph);
  restore_after_capture();
  if (status != cudaSuccess || graph == nullptr) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    random_blocks_ = 0;
    updates_.clear();
    KILN_FAIL("CudaGraph::capture_end: the capture failed ({}: {}); the work between capture_begin and "
              "capture_end must not wait for the GPU (item(), blocking copies, synchronize)",
              cudaGetErrorName(status), cudaGetErrorString(status));
  }
  graph_ = graph;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &num_nodes_));
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0));
  exec_ = exec;
}

void CudaGraph::capture_abort() noexcept {
  if (!capturing_) return;
  cuda::DeviceGuard guard(device_.index());
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(as_stream(stream_), &graph);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // the failed capture's status is not the next call's
  restore_after_capture();
  random_blocks_ = 0;
  updates_.clear();
}

void CudaGraph::replay() {
  KILN_CHECK(exec_ != nullptr, "CudaGraph::replay: nothing was captured (call capture_begin/capture_end first)");
  cuda::DeviceGuard guard(device_.index());
  const Stream stream = cuda::current_stream(device_);
  profiler::RecordFunction scope("cudaGraphLaunch");
  // The first replay runs the captured step itself; later ones first redo its host part.
  if (replays_ > 0)
    for (const cuda::detail::ReplayUpdate& update : updates_) update(exec_);
  ++replays_;
  if (random_blocks_ > 0) {
    const PhiloxState s = default_generator().reserve(random_blocks_);
    detail::write_philox_state(static_cast<uint64_t*>(philox_state_.get()), s.seed, s.first_block, as_stream(stream));
  }
  CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), as_stream(stream)));
}

#else  // CPU-only build

CudaGraph::CudaGraph(Device device) : device_(device) {
  KILN_FAIL("CudaGraph: this build of Kiln has no CUDA support (device {})", device.str());
}
CudaGraph::~CudaGraph() = default;
void CudaGraph::capture_begin() {}
void CudaGraph::capture_end() {}
void CudaGraph::capture_abort() noexcept {}
void CudaGraph::replay() {}
void CudaGraph::restore_after_capture() noexcept {}

#endif

}  // namespace kiln::graph
