// graph::compile: a Graph made runnable. An Executable checks each call's inputs against the
// captured ones and runs the graph with the executor the options pick: the interpreter by
// default (each node replayed through its op, so the profiler, autograd and every device see
// ordinary op calls), a CUDA Graph replay with cuda_graph = true.
#pragma once

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
};

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
  /// The graph this runs (a copy taken by compile()).
  const Graph& graph() const { return graph_; }

 private:
  Graph graph_;
  std::unique_ptr<ExecutorImpl> executor_;
};

/// Verifies `graph` and builds an Executable over a copy of it (later changes to `graph` do
/// not affect it).
Executable compile(const Graph& graph, CompileOptions options = {});

}  // namespace kiln::graph
