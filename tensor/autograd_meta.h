// AutogradMeta: the autograd state a tensor carries (PyTorch's AutogradMeta). tensor/ only
// stores it; autograd/ fills it in (grad_fn, hooks) and the engine reads it. The node type
// is forward-declared, so tensor/ does not include autograd/.
//
// The version counter is not here but on the storage (StorageImpl::version()): views and
// detach() share their base's counter, so an in-place write through any of them is seen by
// every saved tensor over that memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "tensor.h"

namespace kiln {

namespace autograd {
class Node;
}

/// A hook on a tensor's gradient: returns a replacement, or an undefined tensor to keep it.
using TensorHook = std::function<Tensor(const Tensor& grad)>;

/// A hook run on a leaf after its .grad() was accumulated; it receives the leaf itself.
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

/// Per-tensor autograd state; see the file comment.
struct AutogradMeta {
  Tensor grad;                               ///< accumulated gradient (leaves, or retain_grad())
  std::shared_ptr<autograd::Node> grad_fn;   ///< the backward node of the op that made this tensor
  uint32_t output_nr = 0;                    ///< which output of grad_fn this tensor is
  bool requires_grad = false;                ///< the leaf flag set by requires_grad_()
  bool retains_grad = false;                 ///< a non-leaf whose .grad() is kept (retain_grad())
  std::vector<TensorHook> hooks;             ///< register_hook(), run in order on the gradient
  /// register_post_accumulate_grad_hook(), by key, run in registration order after accumulation
  std::vector<std::pair<uint64_t, PostAccumulateGradHook>> post_accumulate_grad_hooks;
  std::weak_ptr<autograd::Node> grad_accumulator;  ///< a leaf's accumulation node, while a graph uses it
  bool is_view = false;                      ///< made by a view op from a tensor that requires grad
  uint32_t view_version = 0;                 ///< its storage's version when the view was made
};

}  // namespace kiln
