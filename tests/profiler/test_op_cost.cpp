// FLOP and byte counts per op (profiler/op_cost.h), from real op calls observed by the
// profiler, and PyTorch's "Total FLOPs" column.
#include "profiler/op_cost.h"
#include "profiler/profiler.h"
#include "testing.h"

using namespace kiln;
using profiler::Profiler;

namespace {

// The FLOPs and bytes recorded for the first event named `name`.
std::pair<double, double> cost_of(const Profiler& p, const std::string& name) {
  for (const profiler::ProfileEvent& e : p.events())
    if (e.name == name) return {e.flops, e.bytes};
  FAIL("no event " << name);
  return {};
}

}  // namespace

TEST_CASE("op_cost: matrix products, elementwise ops, reductions, softmax, layer_norm, views") {
  const Tensor x = randn({64, 1024}), w = randn({4096, 1024}), b = randn({4096});
  const Tensor batch_a = randn({3, 5, 7}), batch_b = randn({3, 7, 2});
  Profiler prof({.with_flops = true});
  prof.start();
  (void)linear(x, w, b);
  (void)matmul(batch_a, batch_b);
  (void)gelu(x);
  (void)sum(x);
  (void)softmax(x, 1);
  (void)layer_norm(x, {1024});
  (void)x.view({1024, 64});
  prof.stop();

  const double f = 4.0;  // bytes per float32
  const auto [addmm_flops, addmm_bytes] = cost_of(prof, "kiln::addmm");
  CHECK(addmm_flops == 2.0 * 64 * 4096 * 1024);
  CHECK(addmm_bytes == f * (4096 + 64 * 1024 + 1024 * 4096 + 64 * 4096));  // bias, x, w^T, out
  CHECK(cost_of(prof, "kiln::linear").first == 0);                         // counted once, in addmm
  CHECK(cost_of(prof, "kiln::matmul").first == 2.0 * 3 * 5 * 2 * 7);
  const auto [gelu_flops, gelu_bytes] = cost_of(prof, "kiln::gelu");
  CHECK(gelu_flops == 64 * 1024);
  CHECK(gelu_bytes == f * 2 * 64 * 1024);
  CHECK(cost_of(prof, "kiln::sum").first == 64 * 1024);
  CHECK(cost_of(prof, "kiln::sum").second == f * (64 * 1024 + 1));
  CHECK(cost_of(prof, "kiln::softmax").first == 5.0 * 64 * 1024);
  CHECK(cost_of(prof, "kiln::layer_norm").first == 8.0 * 64 * 1024);
  CHECK(cost_of(prof, "kiln::view") == std::pair<double, double>{0, 0});

  // The column: one unit for every row, from the smallest count; "--" where none.
  const std::string t = prof.key_averages().table();
  CHECK(t.find("Total FLOPs") != std::string::npos);  // the smallest, matmul's 420, sets the unit
  CHECK(t.find(" 420.000") != std::string::npos);
  CHECK(t.find("536870912.000") != std::string::npos);  // addmm: 2 * 64 * 4096 * 1024
  CHECK(t.find("--") != std::string::npos);             // linear, view
  // Without with_flops nothing is counted and the column stays away.
  Profiler plain;
  plain.start();
  (void)gelu(x);
  plain.stop();
  CHECK(cost_of(plain, "kiln::gelu").first == 0);
  CHECK(plain.key_averages().table().find("FLOPs") == std::string::npos);
}
