// Op records and autograd on the GPU: replay() of every op's sample call, gradcheck of every
// differentiable op with float64 CUDA inputs (strided ones included), the gradients of a
// small network on the GPU against the CPU's, and pin_memory's record (which needs a GPU).
#ifdef KILN_WITH_CUDA

#include "autograd/gradcheck_all.h"
#include "autograd/replay_check.h"
#include "cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("replay(call) gives the call's result for every op on the GPU") {
  const Device gpu = Device::cuda(0);
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const OpSample& s : op_samples(gpu, dtype)) {
      INFO("op " << s.op << " dtype " << dtype);
      CHECK(check_replay(s) >= 1);
    }
  }
  for (const char* op : {"pin_memory", "_pin_memory"}) {
    const OpSample pin{op, {random({3, 2})}, [](const std::vector<Tensor>& x) { return x[0].pin_memory(); }, {}};
    INFO("op " << op);
    CHECK(check_replay(pin) >= 1);
  }
}

TEST_CASE("gradcheck passes for every differentiable op on the GPU (float64)") {
  for (const OpSample& s : op_samples(Device::cuda(0), kFloat64)) {
    INFO("op " << s.op);
    CHECK_NOTHROW(gradcheck_sample(s));
  }
}

TEST_CASE("a network's gradients on the GPU equal the CPU's") {
  manual_seed(5);
  // float64, so the two devices' summation orders differ by rounding only (~1e-16 relative).
  const Tensor x = random({16, 8}, kFloat64), w1 = random({32, 8}, kFloat64), b1 = random({32}, kFloat64),
               w2 = random({4, 32}, kFloat64), b2 = random({4}, kFloat64);
  const Tensor target = from_vector(std::vector<int64_t>{0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0}, {16});
  auto grads_on = [&](Device d) {
    // Fresh leaves per device (to(cpu) of a CPU tensor is the tensor itself).
    auto leaf_on = [d](const Tensor& t) { return t.to(d).detach().clone().requires_grad_(); };
    std::vector<Tensor> p = {leaf_on(w1), leaf_on(b1), leaf_on(w2), leaf_on(b2)};
    const Tensor h = gelu(linear(x.to(d), p[0], p[1]));
    cross_entropy(linear(h, p[2], p[3]), target.to(d)).backward();
    std::vector<std::vector<double>> g;
    for (const Tensor& t : p) g.push_back(t.grad().to_vector<double>());
    return g;
  };
  const auto cpu = grads_on(Device::cpu()), gpu = grads_on(Device::cuda(0));
  for (size_t i = 0; i < cpu.size(); ++i)
    for (size_t k = 0; k < cpu[i].size(); ++k) CHECK(gpu[i][k] == doctest::Approx(cpu[i][k]).epsilon(1e-10).scale(1e-12));
}

TEST_CASE("gradients cross devices: a GPU leaf used on the CPU gets its gradient on the GPU") {
  const Tensor w = random({3}, kFloat64).to(Device::cuda(0)).requires_grad_();
  sum(mul(w.to(Device::cpu()), 2.0)).backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().is_cuda());
  CHECK(w.grad().to(Device::cpu()).equal(full({3}, 2.0, kFloat64)));
}

#endif  // KILN_WITH_CUDA
