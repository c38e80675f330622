// The graph IR's bookkeeping: ownership of nodes and values, the program order, use lists,
// unique names and interned string attributes (graph.h says why each exists).
#include "graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "../tensor/shape.h"
#include "print.h"

namespace kiln::graph {

// Everything a Graph owns, behind one pointer so that moving a Graph keeps the owner pointer
// its nodes and values hold.
struct GraphState {
  std::vector<std::unique_ptr<Value>> values;  // every value ever made (erased ones too)
  std::vector<std::unique_ptr<Node>> nodes;    // every node ever made (erased ones too)
  std::list<Node*> order;                      // the live nodes, program order
  std::vector<Value*> inputs, constants, outputs;
  std::unordered_set<std::string> names;       // every name handed out (never reused)
  std::deque<std::string> strings;             // string attributes, interned
  int64_t next_value_id = 0;
  int64_t next_node_id = 0;

  std::string unique_name(std::string_view base) {
    std::string name(base.empty() ? std::string_view("v") : base);
    if (names.insert(name).second) return name;
    for (size_t k = 1;; ++k) {
      std::string candidate = fmt::format("{}_{}", name, k);
      if (names.insert(candidate).second) return candidate;
    }
  }

  // A string attribute points into `strings` (the caller's string may not outlive the graph).
  AttrValue intern(AttrValue a) {
    if (const auto* s = std::get_if<std::string_view>(&a)) {
      strings.emplace_back(*s);
      return std::string_view(strings.back());
    }
    return a;
  }

  Value* new_value(ValueKind kind, std::string_view name, std::optional<TensorMeta> meta) {
    auto v = std::make_unique<Value>();
    v->id_ = next_value_id++;
    v->kind_ = kind;
    v->name_ = unique_name(name);
    v->meta_ = std::move(meta);
    v->owner_ = this;
    values.push_back(std::move(v));
    return values.back().get();
  }

  // Forgets that `node` reads `v` at `index` (values of other graphs keep their lists).
  void drop_use(Value* v, Node* node, size_t index) const {
    if (v == nullptr || v->owner_ != this) return;
    auto it = std::find_if(v->uses_.begin(), v->uses_.end(),
                           [&](const Use& u) { return u.node == node && u.index == index; });
    if (it != v->uses_.end()) v->uses_.erase(it);
  }
};

// ---- TensorMeta, Value, Node ----------------------------------------------------------------

TensorMeta TensorMeta::of(const Tensor& t) {
  if (!t.defined()) return TensorMeta{.shape = {}, .dtype = kFloat32, .device = Device::cpu(), .defined = false};
  return TensorMeta{t.sizes(), t.dtype(), t.device()};
}

std::string TensorMeta::str() const {
  if (!defined) return "undefined";
  std::string s = fmt::format("{}{}", dtype, shape_str(shape));
  if (!device.is_cpu()) s += fmt::format("@{}", device);
  return s;
}

const TensorMeta& Value::meta() const {
  KILN_CHECK(meta_.has_value(), "graph::Value::meta: value '{}' has no shape, dtype or device recorded", name_);
  return *meta_;
}

const Tensor& Value::constant() const {
  KILN_CHECK(kind_ == ValueKind::Constant, "graph::Value::constant: value '{}' is not a constant", name_);
  return constant_;
}

std::vector<Node*> Value::users() const {
  std::vector<Node*> out;
  for (const Use& u : uses_)
    if (std::find(out.begin(), out.end(), u.node) == out.end()) out.push_back(u.node);
  return out;
}

Value* Node::input(size_t i) const {
  KILN_CHECK(i < inputs_.size(), "graph::Node::input: node '{}' ({}) has {} inputs, asked for input {}", name_,
             op_->name, inputs_.size(), i);
  return inputs_[i];
}

const AttrValue& Node::attr(std::string_view name) const {
  for (size_t i = 0; i < op_->attrs.size() && i < attrs_.size(); ++i)
    if (name == op_->attrs[i].name) return attrs_[i];
  KILN_FAIL("graph::Node::attr: node '{}' ({}) has no attribute '{}'", name_, op_->name, name);
}

Value* Node::output(size_t i) const {
  KILN_CHECK(i < outputs_.size(), "graph::Node::output: node '{}' ({}) has {} outputs, asked for output {}", name_,
             op_->name, outputs_.size(), i);
  return outputs_[i];
}

bool Node::has_side_effects() const {
  return op_->has(kOpInPlace) || op_->has(kOpRandom) || op_->has(kOpHostRead) || outputs_.empty();
}

Node* Node::next() const {
  if (erased_) return nullptr;
  auto it = std::next(position_);
  return it == owner_->order.end() ? nullptr : *it;
}

Node* Node::prev() const {
  if (erased_ || position_ == owner_->order.begin()) return nullptr;
  return *std::prev(position_);
}

// ---- Graph ------------------------------------------------------------------------------------

Graph::Graph() : state_(std::make_unique<GraphState>()) {}
Graph::~Graph() = default;
Graph::Graph(Graph&& other) : state_(std::exchange(other.state_, std::make_unique<GraphState>())) {}
Graph& Graph::operator=(Graph&& other) {
  if (this != &other) state_ = std::exchange(other.state_, std::make_unique<GraphState>());
  return *this;
}

Graph::Graph(const Graph& other) : state_(std::make_unique<GraphState>()) {
  GraphState& s = *state_;
  const GraphState& o = *other.state_;
  s.names = o.names;
  s.next_value_id = o.next_value_id;
  s.next_node_id = o.next_node_id;
  std::unordered_map<const Value*, Value*> vmap;
  auto copy_value = [&](const Value* v) {
    auto c = std::make_unique<Value>();
    c->id_ = v->id_;
    c->kind_ = v->kind_;
    c->name_ = v->name_;
    c->meta_ = v->meta_;
    c->constant_ = v->constant_;
    c->index_ = v->index_;
    c->owner_ = &s;
    vmap[v] = c.get();
    s.values.push_back(std::move(c));
    return s.values.back().get();
  };
  // A value the copied graph reads but does not own (an erased one, another graph's) becomes a
  // placeholder the copy owns, erased or foreign like the original's, so verify() on the copy
  // reports what it reports on the original and the copy never points into another graph.
  auto mapped = [&](Value* v) -> Value* {
    if (v == nullptr) return nullptr;
    auto it = vmap.find(v);
    if (it != vmap.end()) return it->second;
    Value* c = copy_value(v);
    c->erased_ = v->erased_;
    if (v->owner_ != &o) c->owner_ = nullptr;  // another graph's: in the copy, owned by no graph
    return c;
  };
  for (const Value* v : o.inputs) s.inputs.push_back(copy_value(v));
  for (const Value* v : o.constants) s.constants.push_back(copy_value(v));
  for (const Node* n : o.order) {
    auto c = std::make_unique<Node>();
    c->id_ = n->id_;
    c->op_ = n->op_;
    c->name_ = n->name_;
    c->owner_ = &s;
    for (const AttrValue& a : n->attrs_) c->attrs_.push_back(s.intern(a));
    for (const Value* out : n->outputs_) {
      Value* v = copy_value(out);
      v->producer_ = c.get();
      c->outputs_.push_back(v);
    }
    s.nodes.push_back(std::move(c));
  }
  // Inputs after all outputs exist (a broken graph may read a value before its producer).
  size_t k = 0;
  for (const Node* n : o.order) {
    Node* c = s.nodes[k++].get();
    for (size_t i = 0; i < n->inputs_.size(); ++i) {
      Value* v = mapped(n->inputs_[i]);
      c->inputs_.push_back(v);
      if (v != nullptr && v->owner_ == &s) v->uses_.push_back(Use{c, i});
    }
    c->position_ = s.order.insert(s.order.end(), c);
  }
  for (Value* v : o.outputs) {
    Value* m = mapped(v);
    s.outputs.push_back(m);
    if (m != nullptr && m->owner_ == &s) ++m->output_uses_;
  }
}

Graph& Graph::operator=(const Graph& other) {
  if (this != &other) *this = Graph(other);
  return *this;
}

Value* Graph::add_input(std::string_view name, TensorMeta meta) {
  Value* v = state_->new_value(ValueKind::Input, name, std::move(meta));
  v->index_ = state_->inputs.size();
  state_->inputs.push_back(v);
  return v;
}

Value* Graph::add_constant(const Tensor& tensor, std::string_view name) {
  KILN_CHECK(tensor.defined(), "graph::Graph::add_constant: constant '{}' is an undefined tensor", name);
  Value* v = state_->new_value(ValueKind::Constant, name, TensorMeta::of(tensor));
  v->constant_ = tensor;
  state_->constants.push_back(v);
  return v;
}

Node* Graph::append_node(const OpDesc& op, std::vector<Value*> inputs, std::vector<AttrValue> attrs,
                         std::vector<std::optional<TensorMeta>> outputs, std::string_view name) {
  return insert_node(nullptr, op, std::move(inputs), std::move(attrs), std::move(outputs), name);
}

Node* Graph::insert_node_before(Node* before, const OpDesc& op, std::vector<Value*> inputs,
                                std::vector<AttrValue> attrs, std::vector<std::optional<TensorMeta>> outputs,
                                std::string_view name) {
  KILN_CHECK(before != nullptr && owns(before),
             "graph::Graph::insert_node_before: the position is not a live node of this graph");
  return insert_node(before, op, std::move(inputs), std::move(attrs), std::move(outputs), name);
}

Node* Graph::insert_node(Node* before, const OpDesc& op, std::vector<Value*> inputs, std::vector<AttrValue> attrs,
                         std::vector<std::optional<TensorMeta>> outputs, std::string_view name) {
  GraphState& s = *state_;
  auto n = std::make_unique<Node>();
  Node* node = n.get();
  node->id_ = s.next_node_id++;
  node->op_ = &op;
  node->owner_ = &s;
  for (AttrValue& a : attrs) node->attrs_.push_back(s.intern(std::move(a)));
  const std::string_view base = name.empty() ? std::string_view(op.name) : name;
  for (size_t i = 0; i < outputs.size(); ++i) {
    // Output i > 0 is named after output 0: "linear_1", "linear_1_out1".
    Value* v = s.new_value(ValueKind::NodeOutput,
                           i == 0 ? std::string(base) : fmt::format("{}_out{}", node->outputs_[0]->name_, i),
                           std::move(outputs[i]));
    v->producer_ = node;
    v->index_ = i;
    node->outputs_.push_back(v);
  }
  node->name_ = node->outputs_.empty() ? s.unique_name(base) : node->outputs_[0]->name_;
  node->inputs_ = std::move(inputs);
  for (size_t i = 0; i < node->inputs_.size(); ++i)
    if (Value* v = node->inputs_[i]; v != nullptr && v->owner_ == &s) v->uses_.push_back(Use{node, i});
  node->position_ = s.order.insert(before == nullptr ? s.order.end() : before->position_, node);
  s.nodes.push_back(std::move(n));
  return node;
}

void Graph::set_outputs(std::vector<Value*> outputs) {
  for (Value* v : state_->outputs)
    if (v != nullptr && v->owner_ == state_.get() && v->output_uses_ > 0) --v->output_uses_;
  state_->outputs = std::move(outputs);
  for (Value* v : state_->outputs)
    if (v != nullptr && v->owner_ == state_.get()) ++v->output_uses_;
}

void Graph::set_input(Node* node, size_t index, Value* value) {
  KILN_CHECK(node != nullptr && owns(node), "graph::Graph::set_input: the node is not a live node of this graph");
  KILN_CHECK(index < node->inputs_.size(), "graph::Graph::set_input: node '{}' ({}) has {} inputs, asked for input {}",
             node->name_, node->op_->name, node->inputs_.size(), index);
  state_->drop_use(node->inputs_[index], node, index);
  node->inputs_[index] = value;
  if (value != nullptr && value->owner_ == state_.get()) value->uses_.push_back(Use{node, index});
}

size_t Graph::replace_all_uses_with(Value* from, Value* to) {
  KILN_CHECK(from != nullptr && to != nullptr, "graph::Graph::replace_all_uses_with: a value is null");
  if (from == to) return 0;
  size_t moved = 0;
  const std::vector<Use> uses = from->uses_;
  for (const Use& u : uses) {
    set_input(u.node, u.index, to);
    ++moved;
  }
  for (Value*& v : state_->outputs) {
    if (v != from) continue;
    v = to;
    if (from->output_uses_ > 0) --from->output_uses_;
    if (to->owner_ == state_.get()) ++to->output_uses_;
    ++moved;
  }
  return moved;
}

void Graph::erase_node(Node* node) {
  KILN_CHECK(node != nullptr && owns(node), "graph::Graph::erase_node: the node is not a live node of this graph");
  for (const Value* v : node->outputs_) {
    KILN_CHECK(v->uses_.empty(),
               "graph::Graph::erase_node: cannot erase '{}' ({}): its output '{}' is still read by '{}'", node->name_,
               node->op_->name, v->name_, v->uses_.front().node->name_);
    KILN_CHECK(v->output_uses_ == 0,
               "graph::Graph::erase_node: cannot erase '{}' ({}): its output '{}' is a graph output", node->name_,
               node->op_->name, v->name_);
  }
  for (size_t i = 0; i < node->inputs_.size(); ++i) state_->drop_use(node->inputs_[i], node, i);
  state_->order.erase(node->position_);
  node->erased_ = true;
  for (Value* v : node->outputs_) v->erased_ = true;
}

void Graph::remove_constant(Value* constant) {
  KILN_CHECK(constant != nullptr && owns(constant) && constant->kind_ == ValueKind::Constant,
             "graph::Graph::remove_constant: the value is not a live constant of this graph");
  KILN_CHECK(constant->unused(), "graph::Graph::remove_constant: constant '{}' is still read{}", constant->name_,
             constant->uses_.empty() ? std::string(" as a graph output")
                                     : fmt::format(" by '{}'", constant->uses_.front().node->name_));
  std::erase(state_->constants, constant);
  constant->erased_ = true;
  constant->constant_ = Tensor();  // the graph no longer keeps the tensor alive
}

void Graph::set_meta(Value* value, std::optional<TensorMeta> meta) {
  KILN_CHECK(value != nullptr && owns(value), "graph::Graph::set_meta: the value is not a live value of this graph");
  value->meta_ = std::move(meta);
}

void Graph::rename(Value* value, std::string_view name) {
  KILN_CHECK(value != nullptr && owns(value), "graph::Graph::rename: the value is not a live value of this graph");
  if (name == value->name_) return;
  value->name_ = state_->unique_name(name);
  if (value->producer_ != nullptr && value->index_ == 0) value->producer_->name_ = value->name_;
}

const std::vector<Value*>& Graph::inputs() const { return state_->inputs; }
const std::vector<Value*>& Graph::constants() const { return state_->constants; }
const std::vector<Value*>& Graph::outputs() const { return state_->outputs; }

std::vector<Node*> Graph::nodes() const { return {state_->order.begin(), state_->order.end()}; }

size_t Graph::num_nodes() const { return state_->order.size(); }

std::vector<Node*> Graph::nodes_of(const OpDesc& op) const {
  std::vector<Node*> out;
  for (Node* n : state_->order)
    if (n->op_ == &op) out.push_back(n);
  return out;
}

Value* Graph::find_value(std::string_view name) const {
  for (const auto& v : state_->values)
    if (owns(v.get()) && v->name_ == name) return v.get();
  return nullptr;
}

bool Graph::owns(const Value* value) const {
  return value != nullptr && value->owner_ == state_.get() && !value->erased_;
}

bool Graph::owns(const Node* node) const { return node != nullptr && node->owner_ == state_.get() && !node->erased_; }

std::string Graph::str() const { return format_tabular(*this); }

}  // namespace kiln::graph
