// Kiln's half of side_by_side_cuda_overhead (see side_by_side.h).
#include <kiln/kiln.h>

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

}  // namespace side_by_side
