// eliminate_dead_code(): one walk from the last node to the first, so a chain of dead nodes
// goes in one sweep (erasing a node drops its reads of the nodes before it).
#include "dead_code.h"

#include <algorithm>

namespace kiln::graph {

size_t eliminate_dead_code(Graph& graph) {
  size_t removed = 0;
  const std::vector<Node*> nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (n->has_side_effects()) continue;
    const auto outs = n->outputs();
    if (!std::all_of(outs.begin(), outs.end(), [](const Value* v) { return v->unused(); })) continue;
    graph.erase_node(n);
    ++removed;
  }
  const std::vector<Value*> constants = graph.constants();
  for (Value* c : constants) {
    if (!c->unused()) continue;
    graph.remove_constant(c);
    ++removed;
  }
  return removed;
}

}  // namespace kiln::graph
