// What code below graph/ needs to know about a CUDA graph being captured on its thread, so that
// host-computed kernel arguments stay right across replays.
//
// A captured kernel's arguments are frozen, but some host code computes new ones every step:
// an optimizer's step counts, bias corrections and learning rate. Such code runs inside
// `run_updatable(fn)`. During the capture, fn runs as usual and its kernels that go through
// ops/cuda/updatable_launch.cuh are remembered as graph nodes. Before every later replay the
// graph runs fn again in "update" mode: the host part (counters, schedulers' learning rates)
// runs as it would eagerly, and each such launch, instead of running, rewrites the arguments of
// its node in the instantiated graph (cudaGraphExecKernelNodeSetParams). A replay therefore
// computes exactly what the eager call would have computed, bit for bit, with no extra copy.
// fn must launch the same kernels, in the same order, every time (checked), and nothing else
// that would run eagerly. Host-only work that must happen every step (an LR scheduler's step)
// runs inside run_updatable too, and is then simply repeated before each replay.
#pragma once

#include <functional>
#include <memory>
#include <vector>

namespace kiln::cuda {

/// True while the calling thread captures a CUDA graph (graph::CudaGraph).
bool graph_capture_active();

/// Runs fn; under a capture, also registers it to run in update mode before each later replay
/// (see the file comment). Outside a capture it is just fn().
void run_updatable(const std::function<void()>& fn);

namespace detail {

/// How an updatable launch behaves on the calling thread now.
enum class LaunchMode { Eager, Capture, Update };
/// The calling thread's mode.
LaunchMode updatable_launch_mode();
/// Capture mode: the node (cudaGraphNode_t) the launch of `func` just added.
void record_updatable_node(void* node, const void* func);
/// Update mode: the node of the next launch, which must be of `func`, and the instantiated
/// graph (cudaGraphExec_t) to update it in.
void* next_updatable_node(const void* func, void** exec);

/// Updates registered by one capture: each rewrites its nodes in the instantiated graph given.
using ReplayUpdate = std::function<void(void* graph_exec)>;
/// CudaGraph: the calling thread starts capturing (throws when it already is).
void begin_capture_updates();
/// CudaGraph: the capture ended (or was abandoned); returns what it registered.
std::vector<ReplayUpdate> end_capture_updates() noexcept;

}  // namespace detail
}  // namespace kiln::cuda
