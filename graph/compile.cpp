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

const std::vector<Tensor>* Executable::static_inputs() const {
  return executor_ != nullptr ? executor_->static_inputs() : nullptr;
}

const CudaGraph* Executable::cuda_graph() const { return executor_ != nullptr ? executor_->cuda_graph() : nullptr; }

namespace {

// compile(step) without a CUDA graph: the step itself.
class StepExecutor final : public ExecutorImpl {
 public:
  explicit StepExecutor(StepFunction step) : step_(std::move(step)) {}
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override { return step_(inputs); }

 private:
  StepFunction step_;
};

}  // namespace

Executable compile(StepFunction step, const std::vector<Tensor>& example_inputs, CompileOptions options) {
  KILN_CHECK(step != nullptr, "graph::compile: the step function is empty");
  // The step's signature, for the input check: a graph of inputs only.
  Graph signature;
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    const Tensor& t = example_inputs[i];
    KILN_CHECK(t.defined(), "graph::compile: example input {} is undefined", i);
    signature.add_input(fmt::format("input{}", i), TensorMeta::of(t));
  }
  std::unique_ptr<ExecutorImpl> executor = options.cuda_graph
                                               ? make_cuda_graph_step_executor(std::move(step), example_inputs, options)
                                               : std::make_unique<StepExecutor>(std::move(step));
  return Executable(std::move(signature), std::move(executor));
}

Executable compile(const Graph& graph, CompileOptions options) {
  verify(graph);
  std::unique_ptr<ExecutorImpl> executor =
      options.cuda_graph ? make_cuda_graph_executor(graph, options) : make_interpreter(graph, options);
  return Executable(graph, std::move(executor));
}

}  // namespace kiln::graph
