// graph::compile: a Graph made runnable. An Executable checks each call's inputs against the
// captured ones and runs the graph with the executor the options pick: the interpreter by
// default (each node replayed through its op, so the profiler, autograd and every device see
// ordinary op calls), a CUDA Graph replay with cuda_graph = true.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "graph.h"

namespace kiln::graph {

class ExecutorImpl;

/// How compile() runs a graph.
struct CompileOptions {
  /// Replay the graph as one CUDA Graph (static input and output buffers, the caching
  /// allocator's private pool) instead of interpreting it node by node.
  bool cuda_graph = false;
  /// With cuda_graph: calls run eagerly (on the graph's stream) before the one that captures,
  /// so that one-time set-up (cuBLASLt plans, an optimizer's state) is not captured.
  int warmup_calls = 1;
};

/// A function of tensors to compile whole (a training step: forward, loss, backward,
/// optimizer step), for the compile(step, ...) form.
using StepFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

class CudaGraph;  // graph/cuda_graph.h

/// A compiled graph: call it like a function. Movable, not copyable.
class Executable {
 public:
  /// Wraps an executor over `graph` (compile() builds these; a null executor throws).
  Executable(Graph graph, std::unique_ptr<ExecutorImpl> executor);
  ~Executable();
  /// Moves; calling the moved-from executable throws.
  Executable(Executable&&);
  /// Move assignment; calling the moved-from executable throws.
  Executable& operator=(Executable&&);
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  /// Runs the graph on `inputs` (the number, shapes, dtypes and devices it was captured
  /// with; anything else throws, naming the input) and returns its outputs.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  /// The graph this runs (a copy taken by compile()); for a compiled step, a graph of its
  /// inputs only.
  const Graph& graph() const { return graph_; }
  /// With cuda_graph: the static input buffers once captured (a caller may fill them and
  /// pass them back, which saves the copy), else null.
  const std::vector<Tensor>* static_inputs() const;
  /// With cuda_graph: the CUDA graph (captured from the second call on), else null.
  const CudaGraph* cuda_graph() const;

 private:
  Graph graph_;
  std::unique_ptr<ExecutorImpl> executor_;
};

/// Verifies `graph` and builds an Executable over a copy of it (later changes to `graph` do
/// not affect it).
Executable compile(const Graph& graph, CompileOptions options = {});

/// Compiles a whole step: `step` runs eagerly by default; with cuda_graph it runs
/// options.warmup_calls times eagerly, is captured on the next call's inputs (static copies)
/// and replayed from then on, each replay redoing the optimizer's host part
/// (core/graph_capture.h), so replays compute what eager steps would. Later calls must match
/// `example_inputs` in number, shape, dtype and device. The returned tensors are static: the
/// next call overwrites them.
Executable compile(StepFunction step, const std::vector<Tensor>& example_inputs, CompileOptions options = {});

}  // namespace kiln::graph
