// FLOP and byte counts of the clamp, masked_fill and indexing ops (profiler/op_cost.cpp):
// clamp counts one FLOP per output element like the other elementwise ops, scatter_add one
// per index element (an addition each), and the pure data movers (gather, index_select,
// embedding, scatter, masked_fill) bytes only.
#include "profiler/op_cost.h"
#include "profiler/profiler.h"
#include "op_cost_testing.h"
#include "testing.h"

using namespace kiln;
using profiler::Profiler;

using testing::cost_of;

TEST_CASE("op_cost: clamp, scatter_add, gather, index_select, embedding, masked_fill") {
  const Tensor x = randn({64, 32});
  const Tensor index = zeros({16, 32}, kInt64), src = randn({16, 32});
  const Tensor rows = zeros({10}, kInt64), mask = zeros({64, 32}, kBool);
  Tensor target = zeros({64, 32});
  Profiler prof({.with_flops = true});
  prof.start();
  (void)clamp(x, -1, 1);
  (void)clamp_min(x, 0);
  scatter_add_(target, 0, index, src);
  (void)gather(x, 0, index);
  (void)index_select(x, 0, rows);
  (void)embedding(x, rows);
  (void)masked_fill(x, mask, 0);
  prof.stop();

  const double f = 4.0, i = 8.0;  // bytes per float32, int64
  const auto [clamp_flops, clamp_bytes] = cost_of(prof, "kiln::clamp");
  CHECK(clamp_flops == 64 * 32);
  CHECK(clamp_bytes == f * 2 * 64 * 32);
  CHECK(cost_of(prof, "kiln::clamp_min").first == 64 * 32);
  const auto [add_flops, add_bytes] = cost_of(prof, "kiln::scatter_add_");
  CHECK(add_flops == 16 * 32);
  CHECK(add_bytes == f * 64 * 32 + i * 16 * 32 + f * 16 * 32 + f * 64 * 32);  // self, index, src, self
  const auto [gather_flops, gather_bytes] = cost_of(prof, "kiln::gather");
  CHECK(gather_flops == 0);
  CHECK(gather_bytes == f * 64 * 32 + i * 16 * 32 + f * 16 * 32);
  CHECK(cost_of(prof, "kiln::index_select").first == 0);
  CHECK(cost_of(prof, "kiln::embedding").first == 0);
  CHECK(cost_of(prof, "kiln::masked_fill").first == 0);
}
