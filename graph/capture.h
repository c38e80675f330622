// graph::capture: turns an eager module or function into a Graph by running it once on
// example inputs and recording the ops the user's code called (the ops at depth 0 of the op
// scope; linear's nested addmm belongs to linear), each from its op record with its inputs by
// slot, attributes and output metadata. graph/README.md lists what cannot be captured.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "../nn/module.h"
#include "graph.h"

namespace kiln::graph {

/// A function capture() can trace: tensors in, tensors out.
using CaptureFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// How capture() names what it records.
struct CaptureOptions {
  /// Names of the graph inputs; default "x" for one input, "x0", "x1", ... for several.
  std::vector<std::string> input_names;
  /// Constants that are this module's parameters or buffers take their dotted names
  /// ("0.weight"); capture(module, ...) uses that module when this is null.
  const nn::Module* module = nullptr;
};

/// Runs `module`'s forward once on `example_inputs` (exactly one tensor) and returns the graph
/// of the ops it called; parameters and buffers become named constants (referenced, not copied).
Graph capture(nn::Module& module, std::vector<Tensor> example_inputs, CaptureOptions options = {});

/// Runs `fn` once on `example_inputs` and returns the graph of the ops it called; tensors it
/// reads that no recorded op produced (parameters, captured tensors) become constants.
Graph capture(const CaptureFn& fn, std::vector<Tensor> example_inputs, CaptureOptions options = {});

}  // namespace kiln::graph
