// graph::capture: modules and functions become graphs of the ops the user's code called, with
// parameters as named constants, views, in-place ops and joins as nodes, and host reads refused.
#include "graph_testing.h"

using namespace kiln;
using namespace kiln::graph;
using namespace kiln::testing;

TEST_CASE("capture(MLP with GELU) records linear, gelu, linear with the parameters as named constants") {
  for (nn::Activation act : {nn::Activation::GELU, nn::Activation::GELUTanh}) {
    const bool tanh_mode = act == nn::Activation::GELUTanh;
    INFO("tanh " << tanh_mode);
    manual_seed(1);
    nn::MLP mlp({.sizes = {6, 10, 3}, .activation = act});
    const Tensor x = random({5, 6});
    const Graph g = capture(mlp, {x});
    // linear's nested addmm and t are linear's own business: not recorded.
    CHECK(node_ops(g) == std::vector<std::string>{"linear", "gelu", "linear"});
    REQUIRE(g.inputs().size() == 1);
    CHECK(g.inputs()[0]->name() == "x");
    CHECK(g.inputs()[0]->meta() == TensorMeta::of(x));
    REQUIRE(g.constants().size() == 4);
    const auto params = mlp.named_parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      CHECK(g.constants()[i]->name() == params[i].first);       // "0.weight", "0.bias", "2.weight", "2.bias"
      CHECK(g.constants()[i]->constant().is_same(params[i].second));  // referenced, not copied
    }
    const std::vector<Node*> nodes = g.nodes();
    CHECK(nodes[0]->input(0) == g.inputs()[0]);
    CHECK(nodes[0]->input(1)->name() == "0.weight");
    CHECK(nodes[0]->input(2)->name() == "0.bias");
    CHECK(nodes[0]->output()->shape() == Shape{5, 10});
    CHECK(nodes[1]->input(0) == nodes[0]->output());
    CHECK(attr_string(nodes[1]->attrs(), 0) == (tanh_mode ? "tanh" : "none"));
    CHECK(nodes[2]->input(0) == nodes[1]->output());
    CHECK(nodes[2]->name() == "linear_1");
    CHECK(nodes[2]->output()->meta() == TensorMeta{Shape{5, 3}, kFloat32, Device::cpu()});
    CHECK(g.outputs() == std::vector<Value*>{nodes[2]->output()});
  }
}

TEST_CASE("capture of a function: views, cat, add, a closed-over tensor and an absent bias") {
  manual_seed(2);
  const Tensor c = random({3});
  const Tensor w = random({4, 2});
  auto fn = [&](const std::vector<Tensor>& in) {
    const Tensor a = in[0].t();                // [3, 2] view
    const Tensor b = a.narrow(0, 1, 2);        // [2, 2]
    const Tensor j = cat({b, in[1]}, 1);       // [2, 5]
    const Tensor s = add(j.sum(1, true), 1.5); // [2, 1]
    const Tensor l = linear(in[0].t(), w);     // no bias: [3, 4]
    return std::vector<Tensor>{s, mul(l, c.unsqueeze(1))};
  };
  const Tensor x = random({2, 3}), y = random({2, 3});
  const Graph g = capture(fn, {x, y});
  CHECK(node_ops(g) ==
        std::vector<std::string>{"t", "narrow", "cat", "sum", "add", "t", "linear", "unsqueeze", "mul"});
  CHECK(g.inputs()[0]->name() == "x0");
  CHECK(g.inputs()[1]->name() == "x1");
  const std::vector<Node*> n = g.nodes();
  CHECK(attr_int(n[1]->attrs(), 0) == 0);  // narrow(dim 0, start 1, length 2)
  CHECK(attr_int(n[1]->attrs(), 1) == 1);
  CHECK(attr_int(n[1]->attrs(), 2) == 2);
  // cat is variadic: its inputs are the list.
  REQUIRE(n[2]->inputs().size() == 2);
  CHECK(n[2]->input(0) == n[1]->output());
  CHECK(n[2]->input(1) == g.inputs()[1]);
  CHECK(attr_int(n[2]->attrs(), 0) == 1);
  // add(tensor, 1.5): the number is an attribute, its tensor slot absent.
  CHECK(n[4]->input(1) == nullptr);
  // linear without a bias: the slot is there, absent.
  REQUIRE(n[6]->inputs().size() == 3);
  CHECK(n[6]->input(2) == nullptr);
  CHECK(n[6]->input(1)->kind() == ValueKind::Constant);
  CHECK(n[6]->input(1)->name() == "_tensor_constant0");
  CHECK(n[7]->input(0)->name() == "_tensor_constant1");
  CHECK(n[7]->input(0)->constant().is_same(c));
  CHECK(g.outputs() == std::vector<Value*>{n[4]->output(), n[8]->output()});
}

TEST_CASE("in place: later readers of the written tensor read the in-place node's output") {
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor h = mul(in[0], 2);
    const Tensor before = neg(h);
    clamp_(h, -1.0, 1.0);  // writes h
    return std::vector<Tensor>{add(h, before), h};
  };
  const Tensor x = random({4});
  const Graph g = capture(fn, {x});
  CHECK(node_ops(g) == std::vector<std::string>{"mul", "neg", "clamp_", "add"});
  const std::vector<Node*> n = g.nodes();
  CHECK(n[1]->input(0) == n[0]->output());  // neg read h before the write
  CHECK(n[2]->input(0) == n[0]->output());  // clamp_ writes it
  CHECK(n[3]->input(0) == n[2]->output());  // add reads the written h
  CHECK(n[3]->input(1) == n[1]->output());
  CHECK(g.outputs()[1] == n[2]->output());
}

TEST_CASE("outputs that no node produced: an input returned as is, a parameter, a from_vector result") {
  nn::Linear lin(3, 2);
  auto fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0], lin.weight, from_vector(std::vector<float>{1, 2})};
  };
  CaptureOptions options{.input_names = {"tokens"}, .module = &lin};
  const Graph g = capture(fn, {random({2})}, options);
  CHECK(g.num_nodes() == 0);  // from_vector keeps the caller's host data: its result is a constant
  CHECK(g.inputs()[0]->name() == "tokens");
  REQUIRE(g.outputs().size() == 3);
  CHECK(g.outputs()[0] == g.inputs()[0]);
  CHECK(g.outputs()[1]->name() == "weight");
  CHECK(g.outputs()[2]->kind() == ValueKind::Constant);
  CHECK(g.outputs()[2]->constant().to_vector<float>() == std::vector<float>{1, 2});
}

TEST_CASE("dropout in a module in training mode is recorded as a node") {
  nn::MLP mlp({.sizes = {4, 8, 2}, .activation = nn::Activation::GELU, .dropout = 0.25});
  const Graph g = capture(mlp, {random({3, 4})});
  CHECK(node_ops(g) == std::vector<std::string>{"linear", "gelu", "dropout", "linear"});
  CHECK(attr_double(g.nodes()[2]->attrs(), 0) == 0.25);
  CHECK(attr_bool(g.nodes()[2]->attrs(), 1));
}

TEST_CASE("a host read during capture is refused with a clear error, and the observer is gone afterwards") {
  const Tensor x = random({3});
  auto item_branch = [](const std::vector<Tensor>& in) {
    const Tensor s = in[0].sum();
    if (s.item<double>() > 0) return std::vector<Tensor>{mul(in[0], 2)};  // data-dependent control flow
    return std::vector<Tensor>{neg(in[0])};
  };
  CHECK_THROWS_WITH_AS(capture(item_branch, {x}),
                       doctest::Contains("graph::capture: item reads a tensor's value on the host (op 2 of the forward); "
                                         "data-dependent control flow cannot be captured"),
                       Error);
  CHECK_FALSE(kiln::detail::observed());
  auto to_vec = [](const std::vector<Tensor>& in) {
    (void)in[0].to_vector<float>();
    return std::vector<Tensor>{in[0]};
  };
  CHECK_THROWS_WITH_AS(capture(to_vec, {x}), doctest::Contains("graph::capture: to_vector reads a tensor's value"),
                       Error);
  auto eq_fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{equal(in[0], in[1]) ? in[0] : in[1]};
  };
  CHECK_THROWS_WITH_AS(capture(eq_fn, {x, random({3})}), doctest::Contains("graph::capture: equal reads"), Error);
  CHECK_FALSE(kiln::detail::observed());
  // A forward that throws: the error passes through, the observer is removed.
  auto throws = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{add(in[0], random({4}))}; };
  CHECK_THROWS_WITH_AS(capture(throws, {x}), doctest::Contains("add"), Error);
  CHECK_FALSE(kiln::detail::observed());
  // Capture still works afterwards (no stale recorder on this thread).
  const Graph g = capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(in[0])}; }, {x});
  CHECK(node_ops(g) == std::vector<std::string>{"relu"});
  TopLevelOps seen;
  add_thread_op_observer(&seen);
  (void)relu(x);
  remove_thread_op_observer(&seen);
  CHECK(seen.names == std::vector<std::string>{"relu"});
}

TEST_CASE("capture's argument errors") {
  const Tensor x = random({2});
  auto id = [](const std::vector<Tensor>& in) { return in; };
  CHECK_THROWS_WITH_AS(capture(CaptureFn(), {x}), doctest::Contains("graph::capture: the function is empty"), Error);
  CHECK_THROWS_WITH_AS(capture(id, {x, x}),
                       doctest::Contains("graph::capture: example inputs 0 and 1 are the same tensor"), Error);
  CHECK_THROWS_WITH_AS(capture(id, {x, Tensor()}), doctest::Contains("graph::capture: example input 1 is undefined"),
                       Error);
  CHECK_THROWS_WITH_AS(capture(id, {x}, {.input_names = {"a", "b"}}),
                       doctest::Contains("graph::capture: 2 input names for 1 example inputs"), Error);
  auto undefined_out = [](const std::vector<Tensor>&) { return std::vector<Tensor>{Tensor()}; };
  CHECK_THROWS_WITH_AS(capture(undefined_out, {x}),
                       doctest::Contains("graph::capture: output 0 of the function is undefined"), Error);
  nn::Linear lin(2, 2);
  CHECK_THROWS_WITH_AS(capture(lin, {x, random({2})}),
                       doctest::Contains("graph::capture: a module's forward takes one tensor, got 2 example inputs"),
                       Error);
  CHECK_FALSE(kiln::detail::observed());
}
