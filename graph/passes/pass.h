// Passes: named rewrites over a Graph, run in order with the verifier after each, so a pass
// that breaks an invariant is named in the error. A pass is a plain function; a pipeline is a
// list of them that users extend with their own:
//
//   std::vector<graph::Pass> passes = graph::default_passes();
//   passes.push_back({"relu_to_gelu", [](graph::Graph& g) { ...; return changed; }});
//   graph::run_passes(g, passes);
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "../graph.h"

namespace kiln::graph {

/// A named rewrite; `run` returns whether it changed the graph.
struct Pass {
  std::string name;
  std::function<bool(Graph&)> run;
};

/// Verifies `graph`, then runs each pass in order, verifying after each (an error names the
/// pass that broke the graph); returns whether any pass changed it.
bool run_passes(Graph& graph, std::span<const Pass> passes);

/// Kiln's pipeline: fuse_linear_gelu, then eliminate_dead_code.
std::vector<Pass> default_passes();

}  // namespace kiln::graph
