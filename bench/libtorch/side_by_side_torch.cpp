// LibTorch's half of side_by_side_cuda_overhead (see side_by_side.h).
#include <torch/torch.h>

#include <string>

#include "bench_util.h"
#include "side_by_side.h"

namespace side_by_side {

namespace {
at::Tensor g_a, g_b;
at::TensorOptions options() { return torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA, 0); }
}  // namespace

void torch_setup() {
  g_a = torch::full({1}, 1.5f, options());
  g_b = torch::full({1}, 2.25f, options());
}

void torch_add() {
  at::Tensor r = at::add(g_a, g_b);
  kiln::bench::do_not_optimize(r);
}

void torch_empty() {
  at::Tensor t = at::empty({1}, options());
  kiln::bench::do_not_optimize(t);
}

void torch_teardown() { g_a = g_b = at::Tensor(); }

namespace {
at::Tensor g_x, g_w, g_bias;
}  // namespace

void torch_linear_setup(const char* mode, int64_t m, int64_t k, int64_t n) {
  const std::string name(mode);
  at::globalContext().setAllowTF32CuBLAS(name == "tf32");
  const auto o = torch::TensorOptions().dtype(name == "bfloat16" ? torch::kBFloat16 : torch::kFloat32).device(torch::kCUDA, 0);
  torch::manual_seed(0);
  g_x = torch::randn({m, k}, o);
  g_w = torch::randn({n, k}, o) * 0.03;
  g_bias = torch::randn({n}, o);
}

void torch_linear() {
  at::Tensor y = at::linear(g_x, g_w, g_bias);
  kiln::bench::do_not_optimize(y);
}

const char* torch_version() { return TORCH_VERSION; }

}  // namespace side_by_side
