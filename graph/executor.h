// How a compiled graph runs: Executable (compile.h) holds one ExecutorImpl. The interpreter
// (interpreter.h) runs the nodes one by one; the CUDA Graph executor, chosen by
// CompileOptions::cuda_graph, replays a captured CUDA graph. Internal to graph/: the pieces
// an executor is built from (the input check, running one node) are declared here so every
// executor applies the same rules.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "compile.h"
#include "graph.h"

namespace kiln::graph {

/// One way of running a graph.
class ExecutorImpl {
 public:
  virtual ~ExecutorImpl() = default;
  /// Runs the graph on `inputs` (already checked against the graph's inputs) and returns its outputs.
  virtual std::vector<Tensor> run(const std::vector<Tensor>& inputs) = 0;
  /// The static input buffers of a captured CUDA graph, else null.
  virtual const std::vector<Tensor>* static_inputs() const { return nullptr; }
  /// The CUDA graph this executor replays, else null.
  virtual const CudaGraph* cuda_graph() const { return nullptr; }
};

/// The interpreter over `graph` (a verified graph; the executor keeps its own copy).
std::unique_ptr<ExecutorImpl> make_interpreter(const Graph& graph, const CompileOptions& options);

/// The CUDA Graph executor over `graph` (graph/cuda_graph_executor.cpp).
std::unique_ptr<ExecutorImpl> make_cuda_graph_executor(const Graph& graph, const CompileOptions& options);
/// The CUDA Graph executor over a whole step (graph/cuda_graph_executor.cpp).
std::unique_ptr<ExecutorImpl> make_cuda_graph_step_executor(StepFunction step,
                                                            const std::vector<Tensor>& example_inputs,
                                                            const CompileOptions& options);

/// Throws kiln::Error unless `inputs` match the graph's inputs in number, shape, dtype and
/// device; the message starts with `who` and names the input (index and name) and both values.
void check_inputs(const Graph& graph, std::span<const Tensor> inputs, std::string_view who);

/// Runs one node on `inputs` (one per input slot, undefined where absent) and returns its
/// outputs. Random ops draw new numbers: dropout's record carries the generator state of the
/// captured call (replay() reuses it to reproduce that call), so the node calls dropout()
/// itself; the random factories and fills draw afresh when replayed.
std::vector<Tensor> run_node(const Node& node, std::span<const Tensor> inputs);

}  // namespace kiln::graph
