// The backward engine: runs the graph from some roots to the leaves (backward()) or to
// given inputs (grad()), one thread, nodes in dependency order (a node runs once every
// gradient for it has arrived; among ready nodes the latest-created first, as PyTorch), then
// the callbacks hooks queued during the pass (queue_callback: DDP's end-of-backward wait).
#pragma once

#include <functional>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln::autograd {

/// Backpropagates from `outputs` (scalars, or with one gradient each in `grad_outputs`)
/// into the .grad() of every leaf that requires grad.
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              bool retain_graph = false, bool create_graph = false);

/// The gradients of `outputs` with respect to `inputs`, returned rather than accumulated
/// (torch.autograd.grad). An input the outputs do not depend on is an error unless
/// allow_unused (then its gradient is undefined).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

/// Queues `callback` to run on this thread once the backward pass now running on it has
/// finished its graph (PyTorch's Variable._execution_engine.queue_callback); callbacks run in
/// the order queued and may queue more. Throws when no backward pass is running on the thread.
void queue_callback(std::function<void()> callback);

}  // namespace kiln::autograd
