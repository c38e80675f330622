// compile() and Executable: verification once, the input check on every call, and the
// executor CompileOptions picks (executor.h).
#include "compile.h"

#include "executor.h"
#include "verify.h"

namespace kiln::graph {

Executable::Executable(Graph graph, std::unique_ptr<ExecutorImpl> executor)
    : graph_(std::move(graph)), executor_(std::move(executor)) {
  KILN_CHECK(executor_ != nullptr, "graph::Executable: no executor");
}
Executable::~Executable() = default;
Executable::Executable(Executable&&) = default;
Executable& Executable::operator=(Executable&&) = default;

std::vector<Tensor> Executable::operator()(const std::vector<Tensor>& inputs) {
  KILN_CHECK(executor_ != nullptr, "graph::Executable: this executable was moved from");
  check_inputs(graph_, inputs, "graph::Executable");
  return executor_->run(inputs);
}

Executable compile(const Graph& graph, CompileOptions options) {
  verify(graph);
  std::unique_ptr<ExecutorImpl> executor =
      options.cuda_graph ? make_cuda_graph_executor(graph, options) : make_interpreter(graph, options);
  return Executable(graph, std::move(executor));
}

}  // namespace kiln::graph
