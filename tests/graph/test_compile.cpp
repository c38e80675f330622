// graph::compile and the interpreter: results against eager and float64 references, every op's
// sample run through a captured graph, the input checks, the op scopes a run opens, freeing of
// intermediates, random ops, autograd through a run, and the errors of each step.
#include <memory>

#include "autograd/op_samples.h"
#include "graph/executor.h"  // ExecutorImpl, for an Executable built by hand
#include "graph_testing.h"

using namespace kiln;
using namespace kiln::graph;
using namespace kiln::testing;

TEST_CASE("the interpreter gives eager's result exactly (the same kernels) and matches a float64 reference") {
  for (nn::Activation act : {nn::Activation::GELU, nn::Activation::GELUTanh}) {
    for (DType dtype : {kFloat32, kFloat64}) {
      INFO("tanh " << (act == nn::Activation::GELUTanh) << " dtype " << dtype);
      manual_seed(11);
      nn::MLP mlp({.sizes = {7, 33, 17, 5}, .activation = act});
      mlp.to(dtype);
      Executable run = compile(capture(mlp, {random({9, 7}, dtype)}));
      for (int trial = 0; trial < 3; ++trial) {
        const Tensor x = random({9, 7}, dtype);  // new data each call, never the example's
        const std::vector<Tensor> out = run({x});
        REQUIRE(out.size() == 1);
        CHECK(equal(out[0], mlp(x)));
        check_close(out[0], reference_mlp(mlp, x, act == nn::Activation::GELUTanh), {9, 5});
      }
    }
  }
}

TEST_CASE("every op's sample call, captured and run by the interpreter, gives the eager result") {
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const OpSample& s : op_samples(Device::cpu(), dtype)) {
      INFO("op " << s.op << " dtype " << dtype);
      const OpDesc* op = find_op(s.op);
      REQUIRE(op != nullptr);
      auto fn = [&s](const std::vector<Tensor>& in) { return std::vector<Tensor>{s.fn(in)}; };
      if (op->has(kOpHostRead)) {
        CHECK_THROWS_WITH_AS(capture(fn, s.inputs), doctest::Contains("reads a tensor's value on the host"), Error);
        continue;
      }
      const Graph g = capture(fn, s.inputs);
      CHECK_NOTHROW(verify(g));
      Executable run = compile(g);
      const Tensor expected = s.fn(s.inputs);
      const Tensor got = run(s.inputs)[0];
      REQUIRE(got.sizes() == expected.sizes());
      CHECK(got.dtype() == expected.dtype());
      if (op->has(kOpRandom)) continue;  // new numbers by design (tested below)
      CHECK(equal(got, expected));
    }
  }
}

TEST_CASE("inputs that differ from the captured ones are refused, naming the input and both values") {
  nn::Linear lin(3, 2);
  Executable run = compile(capture(lin, {random({4, 3})}));
  CHECK_THROWS_WITH_AS(run({}), doctest::Contains("graph::Executable: expected 1 input (x), got 0"), Error);
  CHECK_THROWS_WITH_AS(run({random({4, 3}), random({4, 3})}),
                       doctest::Contains("graph::Executable: expected 1 input (x), got 2"), Error);
  CHECK_THROWS_WITH_AS(run({random({5, 3})}),
                       doctest::Contains("graph::Executable: input 0 ('x') has shape [5, 3], but the graph was captured "
                                         "with shape [4, 3]"),
                       Error);
  CHECK_THROWS_WITH_AS(run({random({4, 3}, kFloat64)}),
                       doctest::Contains("graph::Executable: input 0 ('x') has dtype float64, but the graph was "
                                         "captured with float32"),
                       Error);
  CHECK_THROWS_WITH_AS(run({Tensor()}),
                       doctest::Contains("graph::Executable: input 0 ('x') is undefined; the graph was captured with "
                                         "float32[4, 3]"),
                       Error);
  auto two = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{add(in[0], in[1])}; };
  Executable run2 = compile(capture(two, {random({2}), random({2})}));
  CHECK_THROWS_WITH_AS(run2({random({2})}), doctest::Contains("expected 2 inputs (x0, x1), got 1"), Error);
  CHECK_THROWS_WITH_AS(run2({random({2}), random({3})}),
                       doctest::Contains("input 1 ('x1') has shape [3], but the graph was captured with shape [2]"),
                       Error);
}

TEST_CASE("each node runs as an ordinary op call: an op observer (the profiler's hook) sees the nodes") {
  nn::MLP mlp({.sizes = {4, 8, 8, 2}, .activation = nn::Activation::GELU});
  const Graph g = capture(mlp, {random({3, 4})});
  Executable run = compile(g);
  const Tensor x = random({3, 4});
  TopLevelOps seen;
  add_thread_op_observer(&seen);
  (void)run({x});
  remove_thread_op_observer(&seen);
  CHECK(seen.names == node_ops(g));
  CHECK(seen.names == std::vector<std::string>{"linear", "gelu", "linear", "gelu", "linear"});
}

namespace {
// At the start of each depth-0 op, how many outputs of the earlier ones are still alive.
struct AliveCounter : OpObserver {
  std::vector<std::weak_ptr<TensorImpl>> outputs;
  std::vector<size_t> alive_at_begin;
  void on_op_begin(const OpCall& call) override {
    if (call.depth != 0) return;
    size_t alive = 0;
    for (const auto& w : outputs) alive += w.expired() ? 0 : 1;
    alive_at_begin.push_back(alive);
  }
  void on_op_end(const OpCall& call) override {
    if (call.depth != 0) return;
    for (const Tensor& t : call.outputs) outputs.push_back(t.impl_ptr());
  }
};
}  // namespace

TEST_CASE("the interpreter frees each intermediate right after its last reader") {
  // x -> a -> b -> c -> d, and e = a + d: a lives until e, the others one step each.
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor a = mul(in[0], 2);
    const Tensor b = exp(a);
    const Tensor c = neg(b);
    const Tensor d = tanh(c);
    return std::vector<Tensor>{add(a, d)};
  };
  Executable run = compile(capture(fn, {random({8})}));
  const Tensor x = random({8});
  AliveCounter counter;
  add_thread_op_observer(&counter);
  const std::vector<Tensor> out = run({x});
  remove_thread_op_observer(&counter);
  // Before mul: none; exp: a; neg: a, b; tanh: a, c (b freed after neg); add: a, d.
  CHECK(counter.alive_at_begin == std::vector<size_t>{0, 1, 2, 2, 2});
  // After the run only the output is alive.
  size_t alive = 0;
  for (const auto& w : counter.outputs) alive += w.expired() ? 0 : 1;
  CHECK(alive == 1);
}

TEST_CASE("dropout draws new numbers on every run, and the same ones as eager after the same seed") {
  manual_seed(21);
  nn::MLP mlp({.sizes = {16, 64, 4}, .activation = nn::Activation::GELU, .dropout = 0.5});
  const Tensor x = random({8, 16});
  Executable run = compile(capture(mlp, {x}));
  const Tensor first = run({x})[0];
  const Tensor second = run({x})[0];
  CHECK_FALSE(equal(first, second));
  manual_seed(5);
  const Tensor eager = mlp(x);
  manual_seed(5);
  CHECK(equal(run({x})[0], eager));
  // In evaluation mode the captured dropout is the identity.
  mlp.eval();
  Executable eval_run = compile(capture(mlp, {x}));
  CHECK(equal(eval_run({x})[0], eval_run({x})[0]));
  CHECK(equal(eval_run({x})[0], mlp(x)));
}

TEST_CASE("random factories in a graph draw new numbers on every run") {
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{add(in[0], randn({6}))}; };
  Executable run = compile(capture(fn, {random({6})}));
  const Tensor x = random({6});
  CHECK_FALSE(equal(run({x})[0], run({x})[0]));
}

TEST_CASE("a graph references its parameters: changing one changes what the executable computes") {
  manual_seed(4);
  nn::Linear lin(3, 2);
  const Tensor x = random({5, 3});
  Executable run = compile(capture(lin, {x}));
  {
    NoGradGuard no_grad;
    lin.weight.copy_(mul(lin.weight, 0.5));
  }
  CHECK(equal(run({x})[0], lin(x)));
  check_close(run({x})[0], reference_linear(x, lin.weight, lin.bias), {5, 2});
}

TEST_CASE("gradients flow through an interpreted run as through the eager forward") {
  manual_seed(6);
  nn::MLP mlp({.sizes = {5, 12, 3}, .activation = nn::Activation::GELUTanh});
  mlp.to(kFloat64);
  const Tensor x = random({4, 5}, kFloat64);
  Executable run = compile(capture(mlp, {x}));
  run({x})[0].pow(2).sum().backward();
  std::vector<Tensor> graph_grads;
  for (Tensor p : mlp.parameters()) {
    graph_grads.push_back(p.grad().clone());
    p.set_grad(Tensor());
  }
  mlp(x).pow(2).sum().backward();
  const auto params = mlp.parameters();
  for (size_t i = 0; i < params.size(); ++i) CHECK(equal(graph_grads[i], params[i].grad()));
}

TEST_CASE("compile: verification first, the copy it keeps, the CUDA Graph mode and a moved-from executable") {
  Graph g;
  Value* x = g.add_input("x", {Shape{2}, kFloat32, Device::cpu()});
  Node* r = g.append_node(op::relu, {x}, {}, {std::nullopt});
  g.set_outputs({r->output()});
  CHECK_THROWS_WITH_AS(compile(g), doctest::Contains("graph::verify: node 'relu' (relu) output 0 ('relu') has no shape"),
                       Error);
  g.set_meta(r->output(), TensorMeta{Shape{2}, kFloat32, Device::cpu()});
  Executable run = compile(g);
  // Later changes to g do not reach the executable.
  Node* n = g.append_node(op::neg, {r->output()}, {}, {r->output()->meta()});
  g.set_outputs({n->output()});
  const Tensor in = from_vector(std::vector<float>{-1.5f, 2.5f});
  CHECK(run({in})[0].to_vector<float>() == std::vector<float>{0.0f, 2.5f});
  CHECK(run.graph().num_nodes() == 1);
  CHECK_THROWS_WITH_AS(compile(g, {.cuda_graph = true}),
                       doctest::Contains("graph::compile: cuda_graph = true needs every input on one CUDA device; input 0 "
                                         "is on cpu"),
                       Error);
  Executable moved = std::move(run);
  CHECK(moved({in})[0].to_vector<float>() == std::vector<float>{0.0f, 2.5f});
  CHECK_THROWS_WITH_AS(run({in}), doctest::Contains("graph::Executable: this executable was moved from"),  // NOLINT
                       Error);
  CHECK_THROWS_WITH_AS(Executable(Graph(), nullptr), doctest::Contains("graph::Executable: no executor"), Error);
}

TEST_CASE("a run checks what each node produced against the graph's metadata") {
  Graph g;
  Value* x = g.add_input("x", {Shape{2, 3}, kFloat32, Device::cpu()});
  Node* r = g.append_node(op::relu, {x}, {}, {TensorMeta{Shape{3, 2}, kFloat32, Device::cpu()}});
  g.set_outputs({r->output()});
  Executable wrong_shape = compile(g);
  CHECK_THROWS_WITH_AS(wrong_shape({random({2, 3})}),
                       doctest::Contains("graph::Executable: node 'relu' (relu) produced float32[2, 3] as output 0, but "
                                         "the graph records float32[3, 2]"),
                       Error);
  // A node promising a second output that its op does not produce, and a reader of it.
  Graph h;
  Value* y = h.add_input("y", {Shape{2}, kFloat32, Device::cpu()});
  const TensorMeta m{Shape{2}, kFloat32, Device::cpu()};
  Node* two = h.append_node(op::relu, {y}, {}, {m, m});
  Node* reader = h.append_node(op::neg, {two->output(1)}, {}, {m});
  h.set_outputs({reader->output()});
  Executable missing = compile(h);
  CHECK_THROWS_WITH_AS(missing({random({2})}),
                       doctest::Contains("node 'relu' (relu) produced no output 1 ('relu_out1'), which the graph reads"),
                       Error);
  // Unread, a missing output is fine.
  h.set_outputs({two->output()});
  h.erase_node(reader);
  Executable fine = compile(h);
  const Tensor v = random({2});
  CHECK(equal(fine({v})[0], relu(v)));
}

TEST_CASE("compile(step): a whole step as an executable; its inputs checked; cuda_graph needs CUDA inputs") {
  const Tensor w = from_vector(std::vector<float>{0.5f, -1.0f, 2.0f});
  int calls = 0;
  StepFunction step = [&](const std::vector<Tensor>& in) {
    ++calls;
    return std::vector<Tensor>{mul(in[0], w).sum()};
  };
  const Tensor x = from_vector(std::vector<float>{1.0f, 2.0f, 3.0f});
  Executable run = compile(step, {x});
  CHECK(run({x})[0].item<float>() == 4.5f);
  CHECK(run({from_vector(std::vector<float>{2.0f, 0.0f, 1.0f})})[0].item<float>() == 3.0f);
  CHECK(calls == 2);
  CHECK(run.graph().inputs().size() == 1);
  CHECK(run.static_inputs() == nullptr);
  CHECK(run.cuda_graph() == nullptr);
  CHECK_THROWS_WITH_AS(run({from_vector(std::vector<float>{1.0f, 2.0f})}),
                       doctest::Contains("graph::Executable: input 0"), Error);
  CHECK_THROWS_WITH_AS(run({x, x}), doctest::Contains("graph::Executable"), Error);
  CHECK(calls == 2);  // refused calls never reach the step
  CHECK_THROWS_WITH_AS(compile(StepFunction(), {x}), doctest::Contains("graph::compile: the step function is empty"),
                       Error);
  CHECK_THROWS_WITH_AS(compile(step, {Tensor()}), doctest::Contains("graph::compile: example input 0 is undefined"),
                       Error);
  CHECK_THROWS_WITH_AS(compile(step, {x}, {.cuda_graph = true}),
                       doctest::Contains("graph::compile(step): cuda_graph = true needs every input on one CUDA device; "
                                         "input 0 is on cpu"),
                       Error);
}
