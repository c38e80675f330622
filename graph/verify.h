// The verifier: the invariants every pass must keep and the executor relies on. run_passes()
// calls it after each pass, compile() before it builds an executor, so a broken rewrite is
// reported where it happened, naming the node, rather than as a wrong result later.
#pragma once

#include "graph.h"

namespace kiln::graph {

/// Checks `graph` and throws kiln::Error naming the first node (or input, constant, output)
/// that is wrong: every value read is defined before its use and belongs to this graph (not
/// another graph's, not an erased node's); each node has its op's number of input slots
/// (a variadic op at least one input, none absent), its attributes match the op record's
/// kinds, its op can be replayed, and its outputs carry shape, dtype and device; the graph
/// inputs have metadata and the graph outputs are live values of this graph.
void verify(const Graph& graph);

}  // namespace kiln::graph
