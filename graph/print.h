// Readable forms of a graph: a table with one row per input, constant, node and the outputs
// (the layout of torch.fx's Graph.print_tabular, so PyTorch users read it at a glance), and
// Graphviz DOT for a picture (`dot -Tsvg graph.dot -o graph.svg`).
#pragma once

#include <string>

#include "graph.h"

namespace kiln::graph {

/// The graph as a table: opcode | name | target | args | kwargs | shape, one row per graph
/// input (placeholder), constant (get_attr), node (call_function) and the outputs (output).
std::string format_tabular(const Graph& graph);

/// The graph in Graphviz DOT: inputs, constants and nodes (labelled with their op and output
/// shape) joined by edges labelled with the input slot they feed.
std::string to_dot(const Graph& graph);

}  // namespace kiln::graph
