// fuse_linear_gelu(): for each gelu node, match one of the three producer shapes (header),
// then replace. Matching reads only the graph (ops, attributes, captured shapes and dtypes),
// never tensor values.
#include "fuse_linear_gelu.h"

#include <optional>

#include "../../ops/op_list.h"

namespace kiln::graph {

namespace {

// What the fused node takes, and the nodes it replaces (first = the earliest in program order).
struct Match {
  Value* input = nullptr;
  Value* weight = nullptr;
  Value* bias = nullptr;
  std::vector<Node*> replaced;  // producer chain, latest first, gelu excluded
  Node* transpose = nullptr;    // the t(w) node, erased when nothing else reads it
};

bool is_op(const Node* n, const OpDesc& op) { return n != nullptr && &n->op() == &op; }

// The node reading `v`, when it is the only reader (one use, not a graph output).
Node* sole_reader(const Value* v) {
  if (v == nullptr || v->is_graph_output() || v->uses().size() != 1) return nullptr;
  return v->uses()[0].node;
}

bool known(const Value* v) { return v != nullptr && v->has_meta() && v->meta().defined; }

bool is_one(const AttrValue& a) {
  if (const auto* s = std::get_if<Scalar>(&a)) return s->to_double() == 1.0;
  if (const auto* i = std::get_if<int64_t>(&a)) return *i == 1;
  if (const auto* d = std::get_if<double>(&a)) return *d == 1.0;
  return false;
}

// w when `v` is t(w) or w.transpose(0, 1) (any spelling of the two dims) of a 2-D w.
Value* transposed_weight(const Value* v, Node** node) {
  Node* n = v != nullptr ? v->producer() : nullptr;
  if (n == nullptr || !known(n->input(0)) || n->input(0)->shape().size() != 2) return nullptr;
  if (is_op(n, op::transpose)) {
    auto dim = [&](const char* name) -> std::optional<int64_t> {
      const auto* d = std::get_if<int64_t>(&n->attr(name));
      if (d == nullptr || *d < -2 || *d > 1) return std::nullopt;
      return *d < 0 ? *d + 2 : *d;
    };
    const auto d0 = dim("dim0"), d1 = dim("dim1");
    if (!d0 || !d1 || *d0 == *d1) return nullptr;
  } else if (!is_op(n, op::t)) {
    return nullptr;
  }
  *node = n;
  return n->input(0);
}

// b is a bias for an [..., N] product: shape [N], the product's dtype.
bool is_bias(const Value* b, int64_t n, DType dtype) {
  return known(b) && b->shape().size() == 1 && b->shape()[0] == n && b->dtype() == dtype;
}

std::optional<Match> match_linear(Node* lin) {
  Match m{lin->input(0), lin->input(1), lin->input(2), {lin}, nullptr};
  if (!known(m.input) || !known(m.weight) || (m.bias != nullptr && !known(m.bias))) return std::nullopt;
  return m;
}

std::optional<Match> match_addmm(Node* mm) {
  if (!is_one(mm->attr("beta")) || !is_one(mm->attr("alpha"))) return std::nullopt;
  Match m;
  m.bias = mm->input(0);
  m.input = mm->input(1);
  m.weight = transposed_weight(mm->input(2), &m.transpose);
  if (m.weight == nullptr || !known(m.input) || m.input->shape().size() != 2) return std::nullopt;
  const DType dtype = m.input->dtype();
  if (m.weight->dtype() != dtype || !is_bias(m.bias, m.weight->shape()[0], dtype)) return std::nullopt;
  m.replaced = {mm};
  return m;
}

std::optional<Match> match_add_of_matmul(Node* add) {
  if (!is_one(add->attr("alpha")) || add->input(0) == nullptr || add->input(1) == nullptr) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    Value* product = add->input(side);
    Value* bias = add->input(1 - side);
    Node* mm = product->producer();
    if (!(is_op(mm, op::matmul) || is_op(mm, op::mm)) || sole_reader(product) != add) continue;
    Match m;
    m.input = mm->input(0);
    m.weight = transposed_weight(mm->input(1), &m.transpose);
    m.bias = bias;
    if (m.weight == nullptr || !known(m.input) || m.input->shape().empty() || !known(product)) continue;
    const DType dtype = m.input->dtype();
    if (m.weight->dtype() != dtype || !is_bias(bias, m.weight->shape()[0], dtype)) continue;
    // The bias must not broadcast the product to a larger shape (it cannot, being [N], but
    // the add's captured result says so for certain).
    if (!known(add->output(0)) || add->output(0)->meta() != product->meta()) continue;
    m.replaced = {add, mm};
    return m;
  }
  return std::nullopt;
}

// No node between `first` and `last` (exclusive) writes a tensor in place: the fused node reads
// its operands at `last`'s position, so they must hold what they held at `first`.
bool no_writes_between(const Node* first, const Node* last) {
  for (const Node* n = first->next(); n != nullptr && n != last; n = n->next())
    if (n->op().has(kOpInPlace)) return false;
  return true;
}

}  // namespace

size_t fuse_linear_gelu(Graph& graph) {
  size_t rewrites = 0;
  for (Node* gelu : graph.nodes_of(op::gelu)) {
    Value* pre = gelu->input(0);
    Node* producer = pre != nullptr ? pre->producer() : nullptr;
    if (producer == nullptr || sole_reader(pre) != gelu || !known(gelu->output(0))) continue;
    std::optional<Match> m;
    if (is_op(producer, op::linear)) m = match_linear(producer);
    else if (is_op(producer, op::addmm)) m = match_addmm(producer);
    else if (is_op(producer, op::add)) m = match_add_of_matmul(producer);
    if (!m || !no_writes_between(m->replaced.back(), gelu)) continue;
    if (m->input->dtype() != m->weight->dtype() || m->weight->shape().size() != 2) continue;

    Value* out = gelu->output(0);
    Node* fused = graph.insert_node_before(gelu, op::fused_linear_gelu, {m->input, m->weight, m->bias},
                                           {gelu->attr("approximate")}, {out->meta()}, "fused_linear_gelu");
    graph.replace_all_uses_with(out, fused->output(0));
    graph.erase_node(gelu);
    for (Node* n : m->replaced) graph.erase_node(n);
    if (m->transpose != nullptr && m->transpose->output(0)->unused()) graph.erase_node(m->transpose);
    ++rewrites;
  }
  return rewrites;
}

}  // namespace kiln::graph
