// The backward graph: a Node per recorded op call (OpNode, made from its op record) or per
// leaf that receives gradients (AccumulateGrad), linked by edges to the nodes of the op's
// inputs. The engine (engine.h) runs them in reverse order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../ops/op_record.h"
#include "../tensor/autograd_meta.h"

namespace kiln::autograd {

class Node;

/// Where a gradient goes: input `input_nr` of `node` (null: nowhere).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  /// True when the edge leads somewhere.
  bool valid() const { return node != nullptr; }
};

/// A function of the backward graph; see the file comment.
class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// PyTorch's name: "AddmmBackward0", "AccumulateGrad".
  virtual std::string name() const = 0;
  /// Gradients of this node's outputs in, gradients for each next edge out.
  virtual std::vector<Tensor> apply(std::vector<Tensor> grads) = 0;
  /// Frees saved tensors after a backward pass that did not retain the graph.
  virtual void release_variables() {}
  /// How many gradients apply() receives (the op's outputs).
  virtual size_t num_outputs() const { return 1; }

  /// The nodes the gradients go to, one per input of the op.
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  /// Creation order: later nodes run first among those ready (PyTorch's sequence_nr).
  uint64_t sequence_nr() const { return sequence_nr_; }

  /// Adds a hook on the gradient of output `output_nr` (register_hook on a non-leaf).
  void add_pre_hook(uint32_t output_nr, TensorHook hook) { pre_hooks_.push_back({output_nr, std::move(hook)}); }
  /// Runs the pre-hooks on the incoming gradients.
  void run_pre_hooks(std::vector<Tensor>& grads) const;

 protected:
  std::vector<Edge> next_edges_;

 private:
  uint64_t sequence_nr_;
  std::vector<std::pair<uint32_t, TensorHook>> pre_hooks_;
};

/// A tensor saved for backward, with the version it had then (PyTorch's SavedVariable).
/// An op's own output is kept as an alias without autograd state (so it does not own its
/// node) and gets its history back when unpacked.
struct SavedTensor {
  Tensor data;
  uint32_t version = 0;
  bool is_output = false;
  bool saved = false;
};

/// The backward node of a recorded op call.
class OpNode final : public Node {
 public:
  /// Builds the node of `call` (its outputs given), with edges to the inputs' nodes.
  explicit OpNode(const OpCall& call);
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override;
  void release_variables() override;
  size_t num_outputs() const override { return num_outputs_; }
  /// The op this node differentiates.
  const OpDesc& op() const { return *op_; }

 private:
  Tensor unpack(const SavedTensor& s, size_t which, bool is_input);

  const OpDesc* op_;
  std::string name_;
  std::vector<AttrValue> attrs_;
  std::vector<SavedTensor> inputs_;
  std::vector<SavedTensor> outputs_;
  std::vector<Shape> input_sizes_;
  std::vector<DType> input_dtypes_;
  std::vector<Device> input_devices_;
  std::unique_ptr<bool[]> needs_grad_;  // per input slot; a plain array, as BackwardArgs reads it
  size_t num_outputs_ = 1;
  bool released_ = false;
};

/// The node that adds gradients into a leaf's .grad().
class AccumulateGrad final : public Node {
 public:
  /// The accumulator of `leaf` (holds it weakly: a graph does not keep a parameter alive).
  explicit AccumulateGrad(const Tensor& leaf);
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override;
  /// The leaf, or an undefined tensor once it is gone.
  Tensor variable() const;

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

/// The node a tensor's gradient goes to: its grad_fn, or its leaf accumulator (created on
/// first use); an invalid edge when it does not require grad.
Edge gradient_edge(const Tensor& t);

/// PyTorch's backward node name for an op: "addmm" -> "AddmmBackward0".
std::string backward_name(const OpDesc& op);

/// Sums a broadcast gradient down to `sizes` (leading dims, and dims of size 1).
Tensor sum_to(const Tensor& grad, const Shape& sizes);

}  // namespace kiln::autograd
