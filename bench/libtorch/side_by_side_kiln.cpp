// Kiln's half of side_by_side_cuda_overhead (see side_by_side.h).
#include <kiln/kiln.h>

#include <string_view>

#include "bench_util.h"
#include "side_by_side.h"

namespace side_by_side {

namespace {
kiln::Tensor g_a, g_b;
const kiln::Device kGpu = kiln::Device::cuda(0);
}  // namespace

void kiln_setup() {
  g_a = kiln::full({1}, 1.5f, kGpu);
  g_b = kiln::full({1}, 2.25f, kGpu);
}

void kiln_add() {
  kiln::Tensor r = kiln::add(g_a, g_b);
  kiln::bench::do_not_optimize(r);
}

void kiln_empty() {
  kiln::Tensor t = kiln::empty({1}, kGpu);
  kiln::bench::do_not_optimize(t);
}

void kiln_teardown() { g_a = g_b = kiln::Tensor(); }

namespace {
kiln::Tensor g_x, g_w, g_bias;
}  // namespace

void kiln_linear_setup(const char* mode, int64_t m, int64_t k, int64_t n) {
  const std::string_view name(mode);
  kiln::set_allow_tf32(name == "tf32");
  const kiln::TensorOptions o = kiln::TensorOptions(name == "bfloat16" ? kiln::kBFloat16 : kiln::kFloat32).device(kGpu);
  kiln::manual_seed(0);
  g_x = kiln::randn({m, k}, o);
  g_w = kiln::randn({n, k}, o) * 0.03;
  g_bias = kiln::randn({n}, o);
}

void kiln_linear() {
  kiln::Tensor y = kiln::linear(g_x, g_w, g_bias);
  kiln::bench::do_not_optimize(y);
}

}  // namespace side_by_side
