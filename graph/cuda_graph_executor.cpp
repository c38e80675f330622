// The CUDA Graph executor (CompileOptions::cuda_graph): not implemented yet.
#include "executor.h"

namespace kiln::graph {

std::unique_ptr<ExecutorImpl> make_cuda_graph_executor(const Graph&, const CompileOptions&) {
  KILN_FAIL("graph::compile: cuda_graph = true is not implemented yet");
}

}  // namespace kiln::graph
