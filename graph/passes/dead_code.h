// Dead-code elimination: drops nodes whose results nobody reads and whose running has no
// other effect, and constants nobody reads.
#pragma once

#include <cstddef>

#include "../graph.h"

namespace kiln::graph {

/// Removes every node none of whose outputs is read (by a node or as a graph output) unless
/// it has side effects (Node::has_side_effects: in place, random, host read, no outputs),
/// then every constant nobody reads. Returns the number of nodes and constants removed.
///
/// Random nodes are kept even when unused, as PyTorch's DCE keeps impure nodes: a draw
/// advances the generator, so removing it would change the numbers every later random op
/// draws, and a graph run after manual_seed would no longer match the eager run.
size_t eliminate_dead_code(Graph& graph);

}  // namespace kiln::graph
