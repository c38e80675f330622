// The graph IR (graph/graph.h): building a graph by hand, use lists, rewriting (replacing uses,
// inserting, erasing), names, copies and moves, and the errors of each call.
#include "graph_testing.h"

using namespace kiln;
using namespace kiln::graph;
using namespace kiln::testing;

namespace {

// x -> linear(x, w, b) -> gelu -> output, built by hand.
struct Small {
  Graph g;
  Tensor w = random({4, 3}), b = random({4});
  Value* x;
  Value* wv;
  Value* bv;
  Node* lin;
  Node* act;
  Small() {
    x = g.add_input("x", {Shape{2, 3}, kFloat32, Device::cpu()});
    wv = g.add_constant(w, "fc.weight");
    bv = g.add_constant(b, "fc.bias");
    lin = g.append_node(op::linear, {x, wv, bv}, {}, {TensorMeta{Shape{2, 4}, kFloat32, Device::cpu()}});
    act = g.append_node(op::gelu, {lin->output()}, {std::string_view("none")},
                        {TensorMeta{Shape{2, 4}, kFloat32, Device::cpu()}});
    g.set_outputs({act->output()});
  }
};

}  // namespace

TEST_CASE("a graph built by hand: values, nodes, uses and names") {
  Small s;
  Graph& g = s.g;
  CHECK(g.num_nodes() == 2);
  CHECK(node_ops(g) == std::vector<std::string>{"linear", "gelu"});
  CHECK(s.x->kind() == ValueKind::Input);
  CHECK(s.x->index() == 0);
  CHECK(s.wv->kind() == ValueKind::Constant);
  CHECK(s.wv->constant().is_same(s.w));  // referenced, not copied
  CHECK(s.wv->shape() == Shape{4, 3});
  CHECK(s.lin->output()->kind() == ValueKind::NodeOutput);
  CHECK(s.lin->output()->producer() == s.lin);
  CHECK(s.lin->name() == "linear");
  CHECK(s.act->name() == "gelu");
  CHECK(s.wv->name() == "fc.weight");
  // Uses: which node reads a value, at which input position.
  REQUIRE(s.x->uses().size() == 1);
  CHECK(s.x->uses()[0].node == s.lin);
  CHECK(s.x->uses()[0].index == 0);
  CHECK(s.bv->uses()[0].index == 2);
  CHECK(s.lin->output()->users() == std::vector<Node*>{s.act});
  CHECK(s.act->output()->is_graph_output());
  CHECK_FALSE(s.lin->output()->is_graph_output());
  CHECK(s.act->output()->uses().empty());
  CHECK_FALSE(s.act->output()->unused());
  // Program order.
  CHECK(s.lin->next() == s.act);
  CHECK(s.act->next() == nullptr);
  CHECK(s.act->prev() == s.lin);
  CHECK(s.lin->prev() == nullptr);
  CHECK(g.nodes_of(op::gelu) == std::vector<Node*>{s.act});
  CHECK(g.find_value("fc.bias") == s.bv);
  CHECK(g.find_value("nothing") == nullptr);
  CHECK(g.owns(s.x));
  CHECK(g.owns(s.lin));
  // Attributes by slot and by name.
  CHECK(attr_string(s.act->attrs(), 0) == "none");
  CHECK(std::get<std::string_view>(s.act->attr("approximate")) == "none");
  CHECK_THROWS_WITH_AS(s.act->attr("alpha"), doctest::Contains("node 'gelu' (gelu) has no attribute 'alpha'"), Error);
  CHECK_THROWS_WITH_AS(s.lin->input(3), doctest::Contains("node 'linear' (linear) has 3 inputs, asked for input 3"),
                       Error);
  CHECK_THROWS_WITH_AS(s.lin->output(1), doctest::Contains("has 1 outputs, asked for output 1"), Error);
  CHECK_THROWS_WITH_AS(s.x->constant(), doctest::Contains("value 'x' is not a constant"), Error);
}

TEST_CASE("names are made unique: linear, linear_1, ...; a node with several outputs numbers them") {
  Graph g;
  Value* x = g.add_input("x", {Shape{2}, kFloat32, Device::cpu()});
  Value* x2 = g.add_input("x", {Shape{2}, kFloat32, Device::cpu()});
  CHECK(x2->name() == "x_1");
  const TensorMeta m{Shape{2}, kFloat32, Device::cpu()};
  Node* a = g.append_node(op::relu, {x}, {}, {m});
  Node* b = g.append_node(op::relu, {a->output()}, {}, {m});
  Node* c = g.append_node(op::relu, {b->output()}, {}, {m, m}, "pair");
  CHECK(a->name() == "relu");
  CHECK(b->name() == "relu_1");
  CHECK(c->output(0)->name() == "pair");
  CHECK(c->output(1)->name() == "pair_out1");
  g.rename(b->output(), "hidden");
  CHECK(b->name() == "hidden");
  g.rename(c->output(), "hidden");
  CHECK(c->name() == "hidden_1");
  // A node without outputs still has a name.
  Node* d = g.append_node(op::relu, {x}, {}, {});
  CHECK(d->name() == "relu_2");
}

TEST_CASE("replace_all_uses_with moves node inputs and graph outputs; erase_node refuses a read value") {
  Small s;
  Graph& g = s.g;
  const TensorMeta m{Shape{2, 4}, kFloat32, Device::cpu()};
  // Insert a relu before the gelu and make everything that read linear read the relu.
  Node* r = g.insert_node_before(s.act, op::relu, {s.lin->output()}, {}, {m});
  CHECK(s.lin->next() == r);
  CHECK(r->next() == s.act);
  // relu reads linear too, so after the move it would read itself: move the gelu's use only.
  g.set_input(s.act, 0, r->output());
  CHECK(s.lin->output()->users() == std::vector<Node*>{r});
  CHECK(r->output()->users() == std::vector<Node*>{s.act});
  // Replacing the graph output: the gelu's value is no longer an output.
  Node* n = g.append_node(op::neg, {s.act->output()}, {}, {m});
  CHECK(g.replace_all_uses_with(s.act->output(), n->output()) == 2);  // neg's own read and the graph output
  CHECK(g.outputs() == std::vector<Value*>{n->output()});
  CHECK(n->input(0) == n->output());  // a self-loop: verify() would refuse it; undo it
  g.set_input(n, 0, s.act->output());
  CHECK(g.replace_all_uses_with(s.x, s.x) == 0);
  CHECK_THROWS_WITH_AS(g.replace_all_uses_with(s.x, nullptr), doctest::Contains("a value is null"), Error);
  // Erasing: refused while read, or while a graph output.
  CHECK_THROWS_WITH_AS(g.erase_node(s.lin),
                       doctest::Contains("cannot erase 'linear' (linear): its output 'linear' is still read by 'relu'"),
                       Error);
  CHECK_THROWS_WITH_AS(g.erase_node(n), doctest::Contains("its output 'neg' is a graph output"), Error);
  g.set_outputs({s.act->output()});
  g.erase_node(n);
  CHECK(n->erased());
  CHECK(n->output()->erased());
  CHECK_FALSE(g.owns(n));
  CHECK(s.act->output()->uses().empty());
  CHECK(node_ops(g) == std::vector<std::string>{"linear", "relu", "gelu"});
  CHECK_THROWS_WITH_AS(g.erase_node(n), doctest::Contains("not a live node of this graph"), Error);
  CHECK_THROWS_WITH_AS(g.insert_node_before(n, op::relu, {s.x}, {}, {m}),
                       doctest::Contains("insert_node_before: the position is not a live node"), Error);
  CHECK_THROWS_WITH_AS(g.set_input(n, 0, s.x), doctest::Contains("set_input: the node is not a live node"), Error);
  CHECK_THROWS_WITH_AS(g.set_input(s.act, 1, s.x),
                       doctest::Contains("node 'gelu' (gelu) has 1 inputs, asked for input 1"), Error);
}

TEST_CASE("constants: removed only when nobody reads them, and then released") {
  Small s;
  Graph& g = s.g;
  Tensor extra = random({3});
  Value* c = g.add_constant(extra, "extra");
  CHECK(g.constants().size() == 3);
  CHECK_THROWS_WITH_AS(g.remove_constant(s.wv), doctest::Contains("constant 'fc.weight' is still read by 'linear'"),
                       Error);
  CHECK_THROWS_WITH_AS(g.remove_constant(s.x), doctest::Contains("not a live constant"), Error);
  g.set_outputs({s.act->output(), s.bv});
  CHECK_THROWS_WITH_AS(g.remove_constant(s.bv), doctest::Contains("still read by 'linear'"), Error);
  g.remove_constant(c);
  CHECK(c->erased());
  CHECK(g.constants().size() == 2);
  CHECK(extra.impl_ptr().use_count() == 1);  // the graph let go of it
  CHECK_THROWS_WITH_AS(g.add_constant(Tensor(), "none"), doctest::Contains("constant 'none' is an undefined tensor"),
                       Error);
  // A constant that is only a graph output is still read.
  Tensor only_out = random({2});
  Value* o = g.add_constant(only_out, "only_out");
  g.set_outputs({o});
  CHECK_THROWS_WITH_AS(g.remove_constant(o), doctest::Contains("still read as a graph output"), Error);
}

TEST_CASE("metadata: set, cleared, printed; a value without it throws when asked") {
  Small s;
  Graph& g = s.g;
  CHECK(s.lin->output()->meta().str() == "float32[2, 4]");
  g.set_meta(s.lin->output(), std::nullopt);
  CHECK_FALSE(s.lin->output()->has_meta());
  CHECK_THROWS_WITH_AS(s.lin->output()->shape(), doctest::Contains("value 'linear' has no shape, dtype or device"),
                       Error);
  g.set_meta(s.lin->output(), TensorMeta{Shape{2, 4}, kFloat64, Device::cpu()});
  CHECK(s.lin->output()->dtype() == kFloat64);
  CHECK(TensorMeta::of(Tensor()).str() == "undefined");
  CHECK_FALSE(TensorMeta::of(Tensor()).defined);
  CHECK(TensorMeta::of(random({1, 2}, kFloat64)) == TensorMeta{Shape{1, 2}, kFloat64, Device::cpu()});
  Graph other;
  CHECK_THROWS_WITH_AS(other.set_meta(s.x, std::nullopt), doctest::Contains("not a live value of this graph"), Error);
  CHECK_THROWS_WITH_AS(other.rename(s.x, "y"), doctest::Contains("not a live value of this graph"), Error);
}

TEST_CASE("string attributes are copied into the graph") {
  Graph g;
  Value* x = g.add_input("x", {Shape{2}, kFloat32, Device::cpu()});
  Node* n;
  {
    std::string mode = "tanh";
    n = g.append_node(op::gelu, {x}, {std::string_view(mode)}, {TensorMeta{Shape{2}, kFloat32, Device::cpu()}});
    mode = "XXXX";  // the caller's string changes (and then dies): the graph keeps its own
  }
  CHECK(attr_string(n->attrs(), 0) == "tanh");
}

TEST_CASE("a copy is independent, keeps ids and names, and shares the constants' tensors; a move empties the source") {
  Small s;
  Graph copy = s.g;
  REQUIRE(copy.num_nodes() == 2);
  Node* lin = copy.nodes()[0];
  CHECK(lin != s.lin);
  CHECK(lin->id() == s.lin->id());
  CHECK(lin->name() == "linear");
  CHECK(copy.inputs()[0]->id() == s.x->id());
  CHECK(copy.constants()[0]->constant().is_same(s.w));
  CHECK(copy.owns(lin->input(0)));
  CHECK_FALSE(copy.owns(s.x));
  CHECK(lin->output()->users() == std::vector<Node*>{copy.nodes()[1]});
  CHECK(copy.outputs()[0] == copy.nodes()[1]->output());
  CHECK(attr_string(copy.nodes()[1]->attrs(), 0) == "none");
  // Rewriting the copy leaves the original alone.
  copy.set_outputs({lin->output()});
  copy.erase_node(copy.nodes()[1]);
  CHECK(copy.num_nodes() == 1);
  CHECK(s.g.num_nodes() == 2);
  CHECK(s.g.outputs()[0] == s.act->output());
  // New names in the copy do not collide with the original's.
  Node* extra = copy.append_node(op::relu, {lin->output()}, {}, {lin->output()->meta()});
  CHECK(extra->name() == "relu");
  Node* again = copy.append_node(op::gelu, {lin->output()}, {std::string_view("none")}, {lin->output()->meta()});
  CHECK(again->name() == "gelu_1");  // the erased gelu keeps its name
  // Assignment copies too.
  Graph assigned;
  assigned = s.g;
  CHECK(node_ops(assigned) == std::vector<std::string>{"linear", "gelu"});
  // Moving keeps the nodes where they are (pointers stay valid) and leaves the source empty.
  Graph moved = std::move(s.g);
  CHECK(moved.nodes()[0] == s.lin);
  CHECK(moved.owns(s.lin));
  CHECK(s.lin->next() == s.act);
  CHECK(s.g.num_nodes() == 0);  // NOLINT(bugprone-use-after-move): a moved-from graph is empty
  CHECK(s.g.inputs().empty());
  Graph target;
  target = std::move(moved);
  CHECK(target.num_nodes() == 2);
}
