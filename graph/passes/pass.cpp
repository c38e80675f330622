// run_passes() and the default pipeline.
#include "pass.h"

#include "../verify.h"
#include "dead_code.h"
#include "fuse_linear_gelu.h"

namespace kiln::graph {

bool run_passes(Graph& graph, std::span<const Pass> passes) {
  verify(graph);
  bool changed = false;
  for (const Pass& pass : passes) {
    KILN_CHECK(static_cast<bool>(pass.run), "graph::run_passes: pass '{}' has no function", pass.name);
    changed = pass.run(graph) || changed;
    try {
      verify(graph);
    } catch (const Error& e) {
      KILN_FAIL("graph::run_passes: pass '{}' left a broken graph: {}", pass.name, e.what());
    }
  }
  return changed;
}

std::vector<Pass> default_passes() {
  return {{"fuse_linear_gelu", [](Graph& g) { return fuse_linear_gelu(g) > 0; }},
          {"eliminate_dead_code", [](Graph& g) { return eliminate_dead_code(g) > 0; }}};
}

}  // namespace kiln::graph
