// graph::verify: captured graphs pass; each kind of broken graph is refused with a message
// naming the node (or input, constant, output) and what is wrong.
#include "graph_testing.h"

using namespace kiln;
using namespace kiln::graph;
using namespace kiln::testing;

namespace {

const TensorMeta kMeta{Shape{2, 3}, kFloat32, Device::cpu()};

// x -> relu -> neg -> output
struct Chain {
  Graph g;
  Value* x;
  Node* relu_node;
  Node* neg_node;
  Chain() {
    x = g.add_input("x", kMeta);
    relu_node = g.append_node(op::relu, {x}, {}, {kMeta});
    neg_node = g.append_node(op::neg, {relu_node->output()}, {}, {kMeta});
    g.set_outputs({neg_node->output()});
  }
};

}  // namespace

TEST_CASE("verify accepts good graphs: a captured MLP with dropout, a chain built by hand, the empty graph") {
  nn::MLP mlp({.sizes = {4, 8, 8, 2}, .activation = nn::Activation::GELUTanh, .dropout = 0.1});
  CHECK_NOTHROW(verify(capture(mlp, {random({3, 4})})));
  Chain c;
  CHECK_NOTHROW(verify(c.g));
  CHECK_NOTHROW(verify(Graph()));  // empty: no inputs, no nodes, no outputs
}

TEST_CASE("verify: a value read before its node runs") {
  Chain c;
  // A node reading neg's output, placed before relu.
  c.g.insert_node_before(c.relu_node, op::abs, {c.neg_node->output()}, {}, {kMeta});
  CHECK_THROWS_WITH_AS(verify(c.g),
                       doctest::Contains("graph::verify: node 'abs' (abs) input 0 (self) reads 'neg' before it is "
                                         "defined (its producer 'neg' comes later)"),
                       Error);
}

TEST_CASE("verify: a node reading its own output") {
  Chain c;
  c.g.set_input(c.neg_node, 0, c.neg_node->output());
  CHECK_THROWS_WITH_AS(verify(c.g), doctest::Contains("node 'neg' (neg) input 0 (self) reads 'neg' before it is defined"),
                       Error);
}

TEST_CASE("verify: a value of another graph, or of an erased node (dangling uses)") {
  Chain c;
  Chain other;
  c.g.set_input(c.neg_node, 0, other.relu_node->output());
  CHECK_THROWS_WITH_AS(verify(c.g), doctest::Contains("node 'neg' (neg) input 0 (self) reads 'relu', a value of another graph"),
                       Error);
  // A pass that erased a node and kept using its value.
  Chain d;
  Value* stale = d.relu_node->output();
  d.g.set_input(d.neg_node, 0, d.x);
  d.g.erase_node(d.relu_node);
  d.g.append_node(op::abs, {stale}, {}, {kMeta});
  CHECK_THROWS_WITH_AS(verify(d.g),
                       doctest::Contains("node 'abs' (abs) input 0 (self) reads 'relu', which was erased from the graph"),
                       Error);
  // Copies keep the dangling reference (and so the error), with no pointer into the original.
  Graph copy_d = d.g;
  Graph copy_c = c.g;
  d = Chain();
  c = Chain();
  other = Chain();
  CHECK_THROWS_WITH_AS(verify(copy_d), doctest::Contains("reads 'relu', which was erased"), Error);
  CHECK_THROWS_WITH_AS(verify(copy_c), doctest::Contains("reads 'relu', a value of another graph"), Error);
  CHECK(copy_c.find_value("relu") != copy_c.nodes()[1]->input(0));  // the placeholder is not the copy's
}

TEST_CASE("verify: slot counts against the op record") {
  Chain c;
  c.g.append_node(op::linear, {c.x, c.x}, {}, {kMeta});
  CHECK_THROWS_WITH_AS(verify(c.g),
                       doctest::Contains("node 'linear' (linear) has 2 input slots, but linear takes 3 (input, weight, bias)"),
                       Error);
  Chain v;
  v.g.append_node(op::cat, {}, {int64_t{0}}, {kMeta});
  CHECK_THROWS_WITH_AS(verify(v.g),
                       doctest::Contains("node 'cat' (cat) has no inputs, but cat takes a list of at least one tensor"),
                       Error);
  Chain n;
  n.g.append_node(op::cat, {n.x, nullptr}, {int64_t{0}}, {kMeta});
  CHECK_THROWS_WITH_AS(verify(n.g), doctest::Contains("node 'cat' (cat) input 1 is absent (a list entry must be a tensor)"),
                       Error);
  // An absent optional slot is fine.
  Chain ok;
  Value* w = ok.g.add_constant(random({3, 3}), "w");
  ok.g.append_node(op::linear, {ok.x, w, nullptr}, {}, {kMeta});
  CHECK_NOTHROW(verify(ok.g));
}

TEST_CASE("verify: attribute counts and kinds against the op record") {
  Chain c;
  c.g.append_node(op::gelu, {c.x}, {}, {kMeta});
  CHECK_THROWS_WITH_AS(verify(c.g), doctest::Contains("node 'gelu' (gelu) has 0 attributes, but gelu takes 1"), Error);
  Chain k;
  k.g.append_node(op::gelu, {k.x}, {int64_t{1}}, {kMeta});
  CHECK_THROWS_WITH_AS(verify(k.g),
                       doctest::Contains("node 'gelu' (gelu) attribute 0 (approximate) should be str, got int 1"), Error);
  Chain s;
  s.g.append_node(op::sum, {s.x}, {Scalar(1), true}, {kMeta});
  CHECK_THROWS_WITH_AS(verify(s.g), doctest::Contains("attribute 0 (dim) should be int[], got Scalar 1"), Error);
  // What the record's readers accept passes: an int where a float belongs, a float where a Scalar does.
  Chain w;
  w.g.append_node(op::add, {w.x, nullptr}, {1.0, std::monostate{}, Scalar(2)}, {kMeta});
  w.g.append_node(op::dropout, {w.x}, {int64_t{0}, false, int64_t{0}, int64_t{0}}, {kMeta});
  CHECK_NOTHROW(verify(w.g));
}

TEST_CASE("verify: an op without a replay cannot be run") {
  Chain c;
  c.g.append_node(op::from_vector, {}, {Shape{2, 3}, kFloat32, Device::cpu()}, {kMeta});
  CHECK_THROWS_WITH_AS(verify(c.g),
                       doctest::Contains("node 'from_vector' (from_vector) cannot run: op from_vector has no replay"),
                       Error);
}

TEST_CASE("verify: metadata of outputs, inputs and constants") {
  Chain c;
  c.g.append_node(op::relu, {c.x}, {}, {std::nullopt});
  CHECK_THROWS_WITH_AS(verify(c.g),
                       doctest::Contains("node 'relu_1' (relu) output 0 ('relu_1') has no shape, dtype or device"), Error);
  Chain i;
  i.g.set_meta(i.x, std::nullopt);
  CHECK_THROWS_WITH_AS(verify(i.g), doctest::Contains("graph::verify: input 0 ('x') has no shape, dtype or device"),
                       Error);
  Chain u;
  u.g.set_meta(u.x, TensorMeta::of(Tensor()));
  CHECK_THROWS_WITH_AS(verify(u.g), doctest::Contains("graph::verify: input 0 ('x') is marked as an undefined tensor"),
                       Error);
  Chain k;
  Value* w = k.g.add_constant(random({2}), "w");
  k.g.set_meta(w, std::nullopt);
  CHECK_THROWS_WITH_AS(verify(k.g), doctest::Contains("graph::verify: constant 'w' has no shape, dtype or device"),
                       Error);
}

TEST_CASE("verify: reading an undefined output (an optional result the op did not produce)") {
  Chain c;
  Node* two = c.g.append_node(op::relu, {c.x}, {}, {kMeta, TensorMeta::of(Tensor())});
  CHECK_NOTHROW(verify(c.g));  // unread: fine
  c.g.append_node(op::neg, {two->output(1)}, {}, {kMeta});
  CHECK_THROWS_WITH_AS(verify(c.g),
                       doctest::Contains("node 'neg_1' (neg) input 0 (self) reads 'relu_1_out1', an undefined tensor"),
                       Error);
  Chain o;
  Node* t = o.g.append_node(op::relu, {o.x}, {}, {kMeta, TensorMeta::of(Tensor())});
  o.g.set_outputs({t->output(1)});
  CHECK_THROWS_WITH_AS(verify(o.g), doctest::Contains("graph::verify: graph output 0 is 'relu_1_out1', an undefined tensor"),
                       Error);
}

TEST_CASE("verify: graph outputs must be live values of this graph") {
  Chain c;
  c.g.set_outputs({nullptr});
  CHECK_THROWS_WITH_AS(verify(c.g), doctest::Contains("graph::verify: graph output 0 is null"), Error);
  Chain other;
  Chain f;
  f.g.set_outputs({f.neg_node->output(), other.x});
  CHECK_THROWS_WITH_AS(verify(f.g), doctest::Contains("graph::verify: graph output 1 reads 'x', a value of another graph"),
                       Error);
  Chain e;
  Value* gone = e.neg_node->output();
  e.g.set_outputs({e.relu_node->output()});
  e.g.erase_node(e.neg_node);
  e.g.set_outputs({gone});
  CHECK_THROWS_WITH_AS(verify(e.g), doctest::Contains("graph output 0 reads 'neg', which was erased from the graph"),
                       Error);
}
