// Printing a graph: the tabular form (torch.fx's print_tabular layout) and Graphviz DOT.
#include "graph_testing.h"

using namespace kiln;
using namespace kiln::graph;
using namespace kiln::testing;

TEST_CASE("format_tabular: one row per input, constant, node and the outputs, in fx's columns") {
  Graph g;
  Value* x = g.add_input("x", {Shape{2, 3}, kFloat32, Device::cpu()});
  Value* w = g.add_constant(random({4, 3}), "fc.weight");
  Value* b = g.add_constant(random({4}), "fc.bias");
  Node* lin = g.append_node(op::linear, {x, w, b}, {}, {TensorMeta{Shape{2, 4}, kFloat32, Device::cpu()}});
  Node* act = g.append_node(op::gelu, {lin->output()}, {std::string_view("tanh")},
                            {TensorMeta{Shape{2, 4}, kFloat32, Device::cpu()}});
  g.set_outputs({act->output()});
  const std::string expected =
      "opcode         name       target     args                     kwargs                   shape\n"
      "-------------  ---------  ---------  -----------------------  -----------------------  -------------\n"
      "placeholder    x          x          ()                       {}                       float32[2, 3]\n"
      "get_attr       fc.weight  fc.weight  ()                       {}                       float32[4, 3]\n"
      "get_attr       fc.bias    fc.bias    ()                       {}                       float32[4]\n"
      "call_function  linear     linear     (x, fc.weight, fc.bias)  {}                       float32[2, 4]\n"
      "call_function  gelu       gelu       (linear,)                {'approximate': 'tanh'}  float32[2, 4]\n"
      "output         output     output     ((gelu,),)               {}                       float32[2, 4]\n";
  CHECK(format_tabular(g) == expected);
  CHECK(g.str() == expected);
}

TEST_CASE("format_tabular of a captured function: variadic lists, absent inputs, attributes, several outputs") {
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor j = cat({in[0], in[1].t()}, 0);
    return std::vector<Tensor>{add(j, 2.0), j.sum(1, true)};
  };
  const Graph g = capture(fn, {random({2, 3}), random({3, 4}, kFloat64)});
  const std::string s = format_tabular(g);
  INFO(s);
  CHECK(s.find("placeholder    x0") != std::string::npos);
  CHECK(s.find("float64[3, 4]") != std::string::npos);
  CHECK(s.find("call_function  t ") != std::string::npos);
  CHECK(s.find("([x0, t],)") != std::string::npos);        // cat's list
  CHECK(s.find("{'dim': 0}") != std::string::npos);
  CHECK(s.find("(cat, None)") != std::string::npos);       // add(tensor, number): the tensor slot absent
  CHECK(s.find("'alpha': 1") != std::string::npos);
  CHECK(s.find("'other_number': 2") != std::string::npos);
  CHECK(s.find("{'dim': [1], 'keepdim': True") != std::string::npos);
  CHECK(s.find("((add, sum),)") != std::string::npos);
  CHECK(s.find("float64[6, 3]") != std::string::npos);     // promoted by cat
}

TEST_CASE("format_tabular prints what a broken graph holds: missing metadata as ?") {
  Graph g;
  Value* x = g.add_input("x", {Shape{2}, kFloat32, Device::cpu()});
  Node* n = g.append_node(op::relu, {x}, {}, {std::nullopt});
  g.set_outputs({n->output()});
  CHECK(format_tabular(g).find("call_function  relu    relu    (x,)        {}      ?\n") != std::string::npos);
}

TEST_CASE("to_dot: inputs, constants and nodes labelled with op and output shape, edges by slot") {
  manual_seed(3);
  nn::MLP mlp({.sizes = {4, 8, 2}, .activation = nn::Activation::GELU});
  const Graph g = capture(mlp, {random({3, 4})});
  const std::string dot = to_dot(g);
  INFO(dot);
  CHECK(dot.rfind("digraph kiln_graph {\n", 0) == 0);
  CHECK(dot.find("label=\"x\\ninput\\nfloat32[3, 4]\"") != std::string::npos);
  CHECK(dot.find("label=\"0.weight\\nconstant\\nfloat32[8, 4]\"") != std::string::npos);
  CHECK(dot.find("label=\"linear\\nfloat32[3, 8]\"") != std::string::npos);
  CHECK(dot.find("label=\"gelu\\nfloat32[3, 8]\"") != std::string::npos);
  CHECK(dot.find("label=\"linear_1 = linear\\nfloat32[3, 2]\"") != std::string::npos);
  const std::vector<Node*> n = g.nodes();
  const int64_t x_id = g.inputs()[0]->id();
  CHECK(dot.find(fmt::format("v{} -> n{} [label=\"input\"];", x_id, n[0]->id())) != std::string::npos);
  CHECK(dot.find(fmt::format("v{} -> n{} [label=\"weight\"];", g.constants()[0]->id(), n[0]->id())) !=
        std::string::npos);
  CHECK(dot.find(fmt::format("n{} -> n{};", n[0]->id(), n[1]->id())) != std::string::npos);  // one slot: no label
  CHECK(dot.find(fmt::format("n{} -> output [label=\"0\"];", n[2]->id())) != std::string::npos);
  CHECK(dot.substr(dot.size() - 2) == "}\n");
}

TEST_CASE("to_dot escapes quotes and backslashes in names") {
  Graph g;
  Value* x = g.add_input("a\"b\\c", {Shape{1}, kFloat32, Device::cpu()});
  g.set_outputs({x});
  CHECK(to_dot(g).find("label=\"a\\\"b\\\\c\\ninput\\nfloat32[1]\"") != std::string::npos);
}
