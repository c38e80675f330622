// Passes: fuse_linear_gelu (its three forms, and the cases it must leave alone), dead-code
// elimination, run_passes with the default pipeline and a user's own pass, and fused graphs'
// results and gradients against eager and float64 references.
#include "graph_testing.h"

using namespace kiln;
using namespace kiln::graph;
using namespace kiln::testing;

namespace {

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Captures fn on x, fuses, and checks the fused graph's result on new data against eager's.
size_t fuse_and_compare(const Fn& fn, const Shape& x_shape, DType dtype = kFloat32) {
  Graph g = capture(fn, {random(x_shape, dtype)});
  const size_t n = fuse_linear_gelu(g);
  verify(g);
  Executable run = compile(g);
  const Tensor x = random(x_shape, dtype);
  const std::vector<Tensor> got = run({x});
  const std::vector<Tensor> want = fn({x});
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) check_close(got[i], values(want[i]), want[i].sizes(), "output");
  return n;
}

}  // namespace

TEST_CASE("fuse_linear_gelu: an MLP with two hidden GELUs gets two fused nodes, either GELU mode") {
  for (nn::Activation act : {nn::Activation::GELU, nn::Activation::GELUTanh}) {
    const bool tanh_mode = act == nn::Activation::GELUTanh;
    INFO("tanh " << tanh_mode);
    manual_seed(31);
    nn::MLP mlp({.sizes = {12, 40, 24, 6}, .activation = act});
    const Graph captured = capture(mlp, {random({10, 12})});
    Graph g = captured;
    CHECK(fuse_linear_gelu(g) == 2);
    CHECK(node_ops(g) == std::vector<std::string>{"fused_linear_gelu", "fused_linear_gelu", "linear"});
    const std::vector<Node*> n = g.nodes();
    CHECK(n[0]->input(0) == g.inputs()[0]);
    CHECK(n[0]->input(1)->name() == "0.weight");
    CHECK(n[0]->input(2)->name() == "0.bias");
    CHECK(n[1]->input(0) == n[0]->output());
    CHECK(n[1]->input(1)->name() == "2.weight");
    CHECK(attr_string(n[1]->attrs(), 0) == (tanh_mode ? "tanh" : "none"));
    CHECK(n[0]->output()->meta() == TensorMeta{Shape{10, 40}, kFloat32, Device::cpu()});
    CHECK(n[2]->input(0) == n[1]->output());
    CHECK(fuse_linear_gelu(g) == 0);  // nothing left to fuse
    CHECK_NOTHROW(verify(g));
    const std::string table = g.str();
    CHECK(table.find("call_function  fused_linear_gelu    fused_linear_gelu") != std::string::npos);
    // Results: fused and unfused graphs against the float64 reference, on new data.
    Executable fused = compile(g);
    Executable plain = compile(captured);
    for (int trial = 0; trial < 2; ++trial) {
      const Tensor x = random({10, 12});
      const std::vector<double> ref = reference_mlp(mlp, x, tanh_mode);
      check_close(fused({x})[0], ref, {10, 6}, "fused");
      check_close(plain({x})[0], ref, {10, 6}, "unfused");
    }
  }
}

TEST_CASE("fuse_linear_gelu in float64 agrees with the reference to float64 precision") {
  manual_seed(32);
  nn::MLP mlp({.sizes = {9, 31, 31, 4}, .activation = nn::Activation::GELU});
  mlp.to(kFloat64);
  Graph g = capture(mlp, {random({3, 5, 9}, kFloat64)});  // 3-D input: leading dims are rows
  CHECK(fuse_linear_gelu(g) == 2);
  const Tensor x = random({3, 5, 9}, kFloat64);
  check_close(compile(g)({x})[0], reference_mlp(mlp, x.reshape({15, 9}), false), {3, 5, 4});
}

TEST_CASE("fuse_linear_gelu leaves a linear alone when something else reads it, or when it is a graph output") {
  manual_seed(33);
  const Tensor w = random({6, 4}), b = random({6});
  const Fn two_readers = [&](const std::vector<Tensor>& in) {
    const Tensor h = linear(in[0], w, b);
    return std::vector<Tensor>{gelu(h), mul(h, 2)};
  };
  CHECK(fuse_and_compare(two_readers, {3, 4}) == 0);
  const Fn gelu_twice = [&](const std::vector<Tensor>& in) {
    const Tensor h = linear(in[0], w, b);
    return std::vector<Tensor>{add(gelu(h), gelu(h, "tanh"))};
  };
  CHECK(fuse_and_compare(gelu_twice, {3, 4}) == 0);
  const Fn linear_out = [&](const std::vector<Tensor>& in) {
    const Tensor h = linear(in[0], w, b);
    return std::vector<Tensor>{gelu(h), h};
  };
  CHECK(fuse_and_compare(linear_out, {3, 4}) == 0);
  // The gelu's output being a graph output is fine; so is a missing bias.
  const Fn gelu_out = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(linear(in[0], w)), gelu(linear(in[0], w, b), "tanh")};
  };
  Graph g = capture(gelu_out, {random({3, 4})});
  CHECK(fuse_linear_gelu(g) == 2);
  CHECK(g.outputs()[0]->producer()->op().name == std::string("fused_linear_gelu"));
  CHECK(g.outputs()[0]->producer()->input(2) == nullptr);
  CHECK(fuse_and_compare(gelu_out, {3, 4}) == 2);
}

TEST_CASE("fuse_linear_gelu: addmm(bias, x, t(w)) + gelu, with t or transpose of the weight") {
  manual_seed(34);
  const Tensor w = random({7, 5}), b = random({7});
  const Fn with_t = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(addmm(b, in[0], w.t()))};
  };
  Graph g = capture(with_t, {random({3, 5})});
  CHECK(node_ops(g) == std::vector<std::string>{"t", "addmm", "gelu"});
  CHECK(fuse_linear_gelu(g) == 1);
  CHECK(node_ops(g) == std::vector<std::string>{"fused_linear_gelu"});  // the t, unread now, goes too
  CHECK(g.nodes()[0]->input(1)->constant().is_same(w));
  CHECK(g.nodes()[0]->input(2)->constant().is_same(b));
  CHECK(fuse_and_compare(with_t, {3, 5}) == 1);
  for (auto [d0, d1] : {std::pair<int64_t, int64_t>{0, 1}, {1, 0}, {-1, -2}, {-2, 1}}) {
    INFO("transpose(" << d0 << ", " << d1 << ")");
    const Fn tr = [&](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{gelu(addmm(b, in[0], w.transpose(d0, d1)), "tanh")};
    };
    CHECK(fuse_and_compare(tr, {3, 5}) == 1);
  }
  // The transposed weight read elsewhere too: fused, and the t stays for its other reader.
  const Fn shared_t = [&](const std::vector<Tensor>& in) {
    const Tensor wt = w.t();
    return std::vector<Tensor>{gelu(addmm(b, in[0], wt)), wt.sum()};
  };
  Graph s = capture(shared_t, {random({3, 5})});
  CHECK(fuse_linear_gelu(s) == 1);
  CHECK(node_ops(s) == std::vector<std::string>{"t", "fused_linear_gelu", "sum"});
  CHECK(fuse_and_compare(shared_t, {3, 5}) == 1);
}

TEST_CASE("fuse_linear_gelu leaves addmm alone where the fused op would compute something else") {
  manual_seed(35);
  const Tensor w = random({7, 5}), b = random({7}), b2 = random({1, 7}), wk = random({5, 7});
  const Fn scaled = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(addmm(b, in[0], w.t(), 0.5, 1))};
  };
  CHECK(fuse_and_compare(scaled, {3, 5}) == 0);
  const Fn alpha = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(addmm(b, in[0], w.t(), 1, 2))};
  };
  CHECK(fuse_and_compare(alpha, {3, 5}) == 0);
  const Fn bias_2d = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(addmm(b2, in[0], w.t()))}; };
  CHECK(fuse_and_compare(bias_2d, {3, 5}) == 0);
  const Fn plain_mat2 = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(addmm(b, in[0], wk))}; };
  CHECK(fuse_and_compare(plain_mat2, {3, 5}) == 0);
  const Fn computed_t = [&](const std::vector<Tensor>& in) {  // mat2 from another chain of views
    return std::vector<Tensor>{gelu(addmm(b, in[0], w.unsqueeze(0).transpose(1, 2).squeeze(0)))};
  };
  CHECK(fuse_and_compare(computed_t, {3, 5}) == 0);
}

TEST_CASE("fuse_linear_gelu: matmul(x, t(w)) + bias + gelu, either add order, mm too, batched x") {
  manual_seed(36);
  const Tensor w = random({6, 4}), b = random({6});
  const Fn product_first = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(add(matmul(in[0], w.t()), b))};
  };
  Graph g = capture(product_first, {random({2, 3, 4})});
  CHECK(node_ops(g) == std::vector<std::string>{"t", "matmul", "add", "gelu"});
  CHECK(fuse_linear_gelu(g) == 1);
  CHECK(node_ops(g) == std::vector<std::string>{"fused_linear_gelu"});
  CHECK(g.outputs()[0]->shape() == Shape{2, 3, 6});
  CHECK(fuse_and_compare(product_first, {2, 3, 4}) == 1);
  const Fn bias_first = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(add(b, matmul(in[0], w.transpose(0, 1))), "tanh")};
  };
  CHECK(fuse_and_compare(bias_first, {5, 4}) == 1);
  const Fn with_mm = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(mm(in[0], w.t()) + b)}; };
  CHECK(fuse_and_compare(with_mm, {5, 4}) == 1);
  const Fn vector_x = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(matmul(in[0], w.t()) + b)}; };
  CHECK(fuse_and_compare(vector_x, {4}) == 1);
  // A bias computed inside the graph, after the product: the fused node goes where the gelu was.
  const Fn late_bias = [&](const std::vector<Tensor>& in) {
    const Tensor p = matmul(in[0], w.t());
    return std::vector<Tensor>{gelu(p + mul(b, 2))};
  };
  CHECK(fuse_and_compare(late_bias, {5, 4}) == 1);
}

TEST_CASE("fuse_linear_gelu leaves matmul + add alone where the shapes or the arithmetic differ") {
  manual_seed(37);
  const Tensor w = random({6, 4}), b = random({6}), full_bias = random({5, 6}), wk = random({4, 6});
  const Tensor b64 = random({6}, kFloat64);
  const Fn alpha = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(add(matmul(in[0], w.t()), b, 2))}; };
  CHECK(fuse_and_compare(alpha, {5, 4}) == 0);
  const Fn matrix_bias = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(matmul(in[0], w.t()) + full_bias)};
  };
  CHECK(fuse_and_compare(matrix_bias, {5, 4}) == 0);
  const Fn no_transpose = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(matmul(in[0], wk) + b)}; };
  CHECK(fuse_and_compare(no_transpose, {5, 4}) == 0);
  const Fn promoted = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(matmul(in[0], w.t()) + b64)}; };
  CHECK(fuse_and_compare(promoted, {5, 4}) == 0);
  const Fn product_read_twice = [&](const std::vector<Tensor>& in) {
    const Tensor p = matmul(in[0], w.t());
    return std::vector<Tensor>{gelu(p + b), p};
  };
  CHECK(fuse_and_compare(product_read_twice, {5, 4}) == 0);
  const Fn number_bias = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(matmul(in[0], w.t()) + 1.5)}; };
  CHECK(fuse_and_compare(number_bias, {5, 4}) == 0);
  const Fn sub_not_add = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(matmul(in[0], w.t()) - b)}; };
  CHECK(fuse_and_compare(sub_not_add, {5, 4}) == 0);
}

TEST_CASE("fuse_linear_gelu does not move a read past an in-place write") {
  manual_seed(38);
  const Tensor w = random({6, 4});
  Tensor b = random({6});
  const Fn writes_bias = [&](const std::vector<Tensor>& in) {
    Tensor bias = mul(b, 1);
    const Tensor p = linear(in[0], w, bias);
    clamp_(bias, -0.1, 0.1);  // between the linear and the gelu: the fused node would read the clamped bias
    return std::vector<Tensor>{add(gelu(p), bias.sum())};
  };
  CHECK(fuse_and_compare(writes_bias, {3, 4}) == 0);
  const Fn writes_elsewhere = [&](const std::vector<Tensor>& in) {
    Tensor other = mul(in[0], 1);
    const Tensor p = linear(in[0], w);
    return std::vector<Tensor>{gelu(p), clamp_(other, -0.1, 0.1)};  // the write comes after the gelu
  };
  CHECK(fuse_and_compare(writes_elsewhere, {3, 4}) == 1);
}

TEST_CASE("a fused graph's gradients match eager's (the fused op's backward)") {
  manual_seed(39);
  nn::MLP mlp({.sizes = {6, 20, 20, 3}, .activation = nn::Activation::GELU});
  mlp.to(kFloat64);
  const Tensor x = random({7, 6}, kFloat64);
  Graph g = capture(mlp, {x});
  REQUIRE(fuse_linear_gelu(g) == 2);
  Executable run = compile(g);
  run({x})[0].pow(2).sum().backward();  // with grad: the fused op also returns its pre-activation
  std::vector<Tensor> fused_grads;
  for (Tensor p : mlp.parameters()) {
    fused_grads.push_back(p.grad().clone());
    p.set_grad(Tensor());
  }
  mlp(x).pow(2).sum().backward();
  const auto params = mlp.parameters();
  for (size_t i = 0; i < params.size(); ++i) check_close(fused_grads[i], values(params[i].grad()), params[i].sizes());
}

TEST_CASE("eliminate_dead_code removes unread pure nodes and constants, keeps in-place and random ones") {
  const Tensor unused_param = random({3});
  const Tensor used_param = random({3});
  const Fn fn = [&](const std::vector<Tensor>& in) {
    const Tensor dead = exp(neg(add(in[0], unused_param)));  // a dead chain reading a constant
    (void)dead;
    Tensor scratch = mul(in[0], 1);
    clamp_(scratch, 0.0, 1.0);      // in place: kept, and the mul it writes with it
    (void)rand({2});                 // random: kept (the generator advances)
    (void)dropout(in[0], 0.5, true);
    return std::vector<Tensor>{add(in[0], used_param)};
  };
  Graph g = capture(fn, {random({3})});
  CHECK(node_ops(g) ==
        std::vector<std::string>{"add", "neg", "exp", "mul", "clamp_", "rand", "dropout", "add"});
  CHECK(g.constants().size() == 2);
  CHECK(eliminate_dead_code(g) == 4);  // add, neg, exp and the constant they read
  CHECK(node_ops(g) == std::vector<std::string>{"mul", "clamp_", "rand", "dropout", "add"});
  REQUIRE(g.constants().size() == 1);
  CHECK(g.constants()[0]->constant().is_same(used_param));
  CHECK(eliminate_dead_code(g) == 0);
  CHECK_NOTHROW(verify(g));
}

TEST_CASE("run_passes: the default pipeline, a user's own pass, and a pass that breaks the graph") {
  manual_seed(40);
  nn::MLP mlp({.sizes = {8, 16, 16, 4}, .activation = nn::Activation::ReLU});
  const Graph captured = capture(mlp, {random({5, 8})});
  // A user's pass: relu -> exact gelu, so the default fusion then applies.
  const Pass relu_to_gelu{"relu_to_gelu", [](Graph& g) {
                            bool changed = false;
                            for (Node* r : g.nodes_of(op::relu)) {
                              Node* act = g.insert_node_before(r, op::gelu, {r->input(0)}, {std::string_view("none")},
                                                               {r->output()->meta()});
                              g.replace_all_uses_with(r->output(), act->output());
                              g.erase_node(r);
                              changed = true;
                            }
                            return changed;
                          }};
  std::vector<Pass> passes = {relu_to_gelu};
  for (Pass& p : default_passes()) passes.push_back(p);
  CHECK(default_passes().size() == 2);
  CHECK(default_passes()[0].name == "fuse_linear_gelu");
  CHECK(default_passes()[1].name == "eliminate_dead_code");
  Graph g = captured;
  CHECK(run_passes(g, passes));
  CHECK(node_ops(g) == std::vector<std::string>{"fused_linear_gelu", "fused_linear_gelu", "linear"});
  CHECK_FALSE(run_passes(g, passes));  // nothing left to change
  // The result is the GELU network's, on new data.
  nn::MLP gelu_mlp({.sizes = {8, 16, 16, 4}, .activation = nn::Activation::GELU});
  gelu_mlp.load_state_dict(mlp.state_dict());
  const Tensor x = random({5, 8});
  check_close(compile(g)({x})[0], reference_mlp(gelu_mlp, x, false), {5, 4});
  // A pass that leaves a node without metadata is named in the error.
  const Pass careless{"careless", [](Graph& g2) {
                        Node* n = g2.nodes()[0];
                        g2.append_node(op::relu, {n->output()}, {}, {std::nullopt});
                        return true;
                      }};
  Graph h = captured;
  const Pass list[] = {careless};
  CHECK_THROWS_WITH_AS(run_passes(h, list),
                       doctest::Contains("graph::run_passes: pass 'careless' left a broken graph: graph::verify: node "
                                         "'relu_2' (relu) output 0 ('relu_2') has no shape"),
                       Error);
  const Pass empty[] = {Pass{"nothing", nullptr}};
  CHECK_THROWS_WITH_AS(run_passes(h, empty), doctest::Contains("graph::verify"), Error);  // h is broken already
  Graph k = captured;
  CHECK_THROWS_WITH_AS(run_passes(k, empty), doctest::Contains("graph::run_passes: pass 'nothing' has no function"),
                       Error);
}
