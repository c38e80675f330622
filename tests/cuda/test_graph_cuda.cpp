// Captured graphs on the GPU: the interpreter over CUDA tensors against eager (the same
// kernels, so bit for bit) and float64 references, fused graphs, every op's sample run
// through a graph, the device check on inputs, and dropout's fresh numbers per run.
#ifdef KILN_WITH_CUDA

#include "autograd/op_samples.h"
#include "graph/graph_testing.h"

using namespace kiln;
using namespace kiln::graph;
using namespace kiln::testing;

TEST_CASE("an MLP captured on the GPU: the interpreter equals eager, fused and unfused graphs match float64") {
  const Device gpu = Device::cuda(0);
  for (nn::Activation act : {nn::Activation::GELU, nn::Activation::GELUTanh}) {
    for (DType dtype : {kFloat32, kFloat64}) {
      const bool tanh_mode = act == nn::Activation::GELUTanh;
      INFO("tanh " << tanh_mode << " dtype " << dtype);
      manual_seed(51);
      nn::MLP mlp({.sizes = {24, 64, 32, 10}, .activation = act});
      mlp.to(gpu, dtype);
      const Graph captured = capture(mlp, {random({33, 24}, dtype).to(gpu)});
      CHECK(captured.inputs()[0]->device() == gpu);
      Graph fused = captured;
      CHECK(fuse_linear_gelu(fused) == 2);
      Executable plain_run = compile(captured);
      Executable fused_run = compile(fused);
      for (int trial = 0; trial < 2; ++trial) {
        const Tensor x = random({33, 24}, dtype).to(gpu);
        const Tensor plain = plain_run({x})[0];
        CHECK(plain.device() == gpu);
        CHECK(equal(plain.cpu(), mlp(x).cpu()));
        const std::vector<double> ref = reference_mlp(mlp, x, tanh_mode);
        check_close(plain, ref, {33, 10}, "unfused");
        check_close(fused_run({x})[0], ref, {33, 10}, "fused");
      }
    }
  }
}

TEST_CASE("every op's sample call, captured on the GPU and interpreted, gives the eager result") {
  for (const OpSample& s : op_samples(Device::cuda(0), kFloat32)) {
    INFO("op " << s.op);
    const OpDesc* op = find_op(s.op);
    REQUIRE(op != nullptr);
    auto fn = [&s](const std::vector<Tensor>& in) { return std::vector<Tensor>{s.fn(in)}; };
    if (op->has(kOpHostRead)) {
      CHECK_THROWS_WITH_AS(capture(fn, s.inputs), doctest::Contains("reads a tensor's value on the host"), Error);
      continue;
    }
    Executable run = compile(capture(fn, s.inputs));
    const Tensor expected = s.fn(s.inputs);
    const Tensor got = run(s.inputs)[0];
    REQUIRE(got.sizes() == expected.sizes());
    CHECK(got.dtype() == expected.dtype());
    CHECK(got.device() == expected.device());
    if (!op->has(kOpRandom)) CHECK(equal(got.cpu(), expected.cpu()));
  }
}

TEST_CASE("a graph captured on the GPU refuses inputs on another device, naming both") {
  nn::Linear lin(3, 2);
  lin.to(Device::cuda(0));
  Executable run = compile(capture(lin, {random({4, 3}).to(Device::cuda(0))}));
  CHECK_THROWS_WITH_AS(run({random({4, 3})}),
                       doctest::Contains("graph::Executable: input 0 ('x') is on cpu, but the graph was captured on cuda:0"),
                       Error);
}

TEST_CASE("dropout on the GPU draws new numbers on every run, and eager's after the same seed") {
  manual_seed(52);
  nn::MLP mlp({.sizes = {32, 128, 8}, .activation = nn::Activation::GELU, .dropout = 0.5});
  mlp.to(Device::cuda(0));
  const Tensor x = random({16, 32}).to(Device::cuda(0));
  Executable run = compile(capture(mlp, {x}));
  CHECK_FALSE(equal(run({x})[0].cpu(), run({x})[0].cpu()));
  manual_seed(9);
  const Tensor eager = mlp(x).cpu();
  manual_seed(9);
  CHECK(equal(run({x})[0].cpu(), eager));
}

TEST_CASE("an interpreted run on the GPU shows its nodes as op calls") {
  nn::MLP mlp({.sizes = {8, 16, 4}, .activation = nn::Activation::GELU});
  mlp.to(Device::cuda(0));
  const Tensor x = random({5, 8}).to(Device::cuda(0));
  Graph g = capture(mlp, {x});
  fuse_linear_gelu(g);
  Executable run = compile(g);
  TopLevelOps seen;
  add_thread_op_observer(&seen);
  (void)run({x});
  remove_thread_op_observer(&seen);
  CHECK(seen.names == std::vector<std::string>{"fused_linear_gelu", "linear"});
}

#endif  // KILN_WITH_CUDA
