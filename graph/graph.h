// The graph IR: what graph::capture() records and what passes rewrite and the executor runs.
// A Graph holds Values (graph inputs, constants and node outputs, each with the shape, dtype
// and device it had when captured) and Nodes (one op call each, described by its op record:
// `const OpDesc*`, inputs by slot, attribute values), kept in program order, plus the graph's
// outputs. It is the op record's OpCall made persistent, so anything the op table can replay
// the graph can run, and a pass matches on the same records autograd and the profiler read.
//
// Nodes and values live on the heap and never move: a pass holds Node* and Value* while it
// rewrites. Erasing a node keeps its object (marked erased) until the graph dies, so a stale
// pointer is a detectable mistake (verify() names it) rather than a dangling one. Every
// change to a node's inputs goes through the Graph, which keeps each value's list of uses.
// A constant holds a Tensor handle to the tensor the graph references (a parameter is not
// copied: Module::to() or an optimizer step moves or changes what the graph reads).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../ops/op_record.h"
#include "../tensor/tensor.h"

namespace kiln::graph {

class Graph;
class Node;
struct GraphState;

/// What a value is: a graph input, a constant the graph references, or a node's output.
enum class ValueKind : uint8_t { Input, Constant, NodeOutput };

/// The shape, dtype and device of a tensor in the graph (as captured). `defined` is false
/// for an op's optional result it did not produce (an undefined Tensor, e.g. a gradient
/// nobody asked for); nothing may read such a value.
struct TensorMeta {
  Shape shape;
  DType dtype = kFloat32;
  Device device = Device::cpu();
  bool defined = true;

  /// The metadata of `t` (of an undefined tensor: defined = false).
  static TensorMeta of(const Tensor& t);
  /// "float32[64, 1024]", with "@cuda:0" appended off the CPU; "undefined" for an undefined tensor.
  std::string str() const;
  /// Same shape, dtype, device and definedness.
  bool operator==(const TensorMeta& other) const = default;
};

/// One reading of a value: `node` takes it at input position `index`.
struct Use {
  Node* node;
  size_t index;
};

/// A tensor-valued name in the graph; see the file comment.
class Value {
 public:
  /// Unique within its graph, never reused; kept by copies of the graph.
  int64_t id() const { return id_; }
  /// Input, constant or node output.
  ValueKind kind() const { return kind_; }
  /// Readable name, unique within the graph ("x", "linear_1", "0.weight").
  const std::string& name() const { return name_; }
  /// True when the shape, dtype and device are known (a pass may leave them unset; verify() refuses that).
  bool has_meta() const { return meta_.has_value(); }
  /// Shape, dtype and device; throws when unknown.
  const TensorMeta& meta() const;
  /// The captured shape (meta().shape).
  const Shape& shape() const { return meta().shape; }
  /// The captured dtype.
  DType dtype() const { return meta().dtype; }
  /// The captured device.
  Device device() const { return meta().device; }
  /// A constant's tensor (the handle the graph holds); throws for other kinds.
  const Tensor& constant() const;
  /// The node producing a node output, else null.
  Node* producer() const { return producer_; }
  /// A node output's position among its node's outputs; a graph input's position among the inputs.
  size_t index() const { return index_; }
  /// The nodes reading this value, one entry per input position (a node reading it twice appears twice).
  const std::vector<Use>& uses() const { return uses_; }
  /// The distinct nodes reading this value, in first-use order.
  std::vector<Node*> users() const;
  /// True when the value is one of the graph's outputs.
  bool is_graph_output() const { return output_uses_ > 0; }
  /// True when nothing reads the value (no node and no graph output).
  bool unused() const { return uses_.empty() && output_uses_ == 0; }
  /// True once its node was erased (or, for a constant, once it was removed).
  bool erased() const { return erased_; }

 private:
  friend class Graph;
  friend struct GraphState;
  int64_t id_ = 0;
  ValueKind kind_ = ValueKind::NodeOutput;
  std::string name_;
  std::optional<TensorMeta> meta_;
  Tensor constant_;
  Node* producer_ = nullptr;
  size_t index_ = 0;
  std::vector<Use> uses_;
  size_t output_uses_ = 0;
  bool erased_ = false;
  const GraphState* owner_ = nullptr;
};

/// One op call in the graph; see the file comment.
class Node {
 public:
  /// Unique within its graph, never reused; kept by copies of the graph.
  int64_t id() const { return id_; }
  /// The op's record.
  const OpDesc& op() const { return *op_; }
  /// Readable name: its first output's name (or its own, for a node without outputs).
  const std::string& name() const { return name_; }
  /// One value per input slot (null where an optional input is absent), or a variadic op's list.
  std::span<Value* const> inputs() const { return inputs_; }
  /// The input at position `i` (null when absent); throws when out of range.
  Value* input(size_t i) const;
  /// Attribute values, one per attribute slot of the op's record.
  std::span<const AttrValue> attrs() const { return attrs_; }
  /// The attribute named `name` in the op's record; throws when the op has none by that name.
  const AttrValue& attr(std::string_view name) const;
  /// The values this node produces.
  std::span<Value* const> outputs() const { return outputs_; }
  /// Output `i`; throws when out of range.
  Value* output(size_t i = 0) const;
  /// True once erased from its graph.
  bool erased() const { return erased_; }
  /// True when running the node does more than produce its outputs: it writes an input in
  /// place, draws random numbers (the generator advances), reads values on the host, or
  /// produces no tensor. Dead-code elimination keeps such nodes.
  bool has_side_effects() const;
  /// The next live node in program order, or null at the end.
  Node* next() const;
  /// The previous live node in program order, or null at the start.
  Node* prev() const;

 private:
  friend class Graph;
  friend struct GraphState;
  int64_t id_ = 0;
  const OpDesc* op_ = nullptr;
  std::string name_;
  std::vector<Value*> inputs_;
  std::vector<AttrValue> attrs_;
  std::vector<Value*> outputs_;
  bool erased_ = false;
  const GraphState* owner_ = nullptr;
  std::list<Node*>::iterator position_;  // where it stands in the program order (live nodes)
};

/// Inputs, constants, nodes in program order, outputs; see the file comment. Copying makes
/// an independent graph with the same ids and names that shares the constants' tensors.
class Graph {
 public:
  /// An empty graph: no inputs, constants, nodes or outputs.
  Graph();
  ~Graph();
  /// An independent copy (same ids and names; the constants' tensors are shared, not copied).
  Graph(const Graph& other);
  /// Replaces this graph with a copy of `other`.
  Graph& operator=(const Graph& other);
  /// Moves; nodes and values stay where they are, `other` is left an empty graph.
  Graph(Graph&& other);
  /// Move assignment; `other` is left an empty graph.
  Graph& operator=(Graph&& other);

  // ---- building ---------------------------------------------------------------------------
  /// Adds a graph input (its position is the next index) named `name` (made unique).
  Value* add_input(std::string_view name, TensorMeta meta);
  /// Adds a constant referencing `tensor` (not copied) named `name` (made unique).
  Value* add_constant(const Tensor& tensor, std::string_view name);
  /// Appends a node for `op` at the end. `inputs` by slot (null where absent), `attrs` by
  /// slot, one metadata per output (nullopt where unknown); nothing is checked here
  /// (verify() does). String attributes are copied into the graph. The outputs are named
  /// after `name` (the op's name when empty), made unique.
  Node* append_node(const OpDesc& op, std::vector<Value*> inputs, std::vector<AttrValue> attrs,
                    std::vector<std::optional<TensorMeta>> outputs, std::string_view name = {});
  /// As append_node(), but inserted right before `before` (a live node of this graph).
  Node* insert_node_before(Node* before, const OpDesc& op, std::vector<Value*> inputs, std::vector<AttrValue> attrs,
                           std::vector<std::optional<TensorMeta>> outputs, std::string_view name = {});
  /// Sets the graph's outputs.
  void set_outputs(std::vector<Value*> outputs);

  // ---- rewriting --------------------------------------------------------------------------
  /// Makes `node` read `value` at input position `index` (null makes the slot absent).
  void set_input(Node* node, size_t index, Value* value);
  /// Makes every reader of `from` (nodes and graph outputs) read `to` instead; returns how many uses moved.
  size_t replace_all_uses_with(Value* from, Value* to);
  /// Removes `node`; throws when one of its outputs is still read (by a node or as a graph output).
  void erase_node(Node* node);
  /// Removes a constant nobody reads; throws when it is still read.
  void remove_constant(Value* constant);
  /// Sets a value's metadata.
  void set_meta(Value* value, std::optional<TensorMeta> meta);
  /// Renames a value (made unique); a node's name follows its first output.
  void rename(Value* value, std::string_view name);

  // ---- reading ----------------------------------------------------------------------------
  /// The graph inputs, in call order.
  const std::vector<Value*>& inputs() const;
  /// The live constants, in the order they were added.
  const std::vector<Value*>& constants() const;
  /// The graph outputs.
  const std::vector<Value*>& outputs() const;
  /// The live nodes in program order.
  std::vector<Node*> nodes() const;
  /// Number of live nodes.
  size_t num_nodes() const;
  /// The live nodes running `op`, in program order.
  std::vector<Node*> nodes_of(const OpDesc& op) const;
  /// The live value named `name`, or null.
  Value* find_value(std::string_view name) const;
  /// True when `value` is a live value of this graph (not erased, not another graph's).
  bool owns(const Value* value) const;
  /// True when `node` is a live node of this graph.
  bool owns(const Node* node) const;
  /// The tabular form (format_tabular, graph/print.h).
  std::string str() const;

 private:
  Node* insert_node(Node* before, const OpDesc& op, std::vector<Value*> inputs, std::vector<AttrValue> attrs,
                    std::vector<std::optional<TensorMeta>> outputs, std::string_view name);
  std::unique_ptr<GraphState> state_;
};

}  // namespace kiln::graph
