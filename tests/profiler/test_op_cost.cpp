// FLOP and byte counts per op (profiler/op_cost.h), from real op calls observed by the
// profiler, PyTorch's "Total FLOPs" column, and the arithmetic (MathKind) of those FLOPs.
#include "profiler/op_cost.h"
#include "profiler/profiler.h"
#include "op_cost_testing.h"
#include "testing.h"

using namespace kiln;
using profiler::MathKind;
using profiler::Profiler;

using testing::cost_of;

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

TEST_CASE("op_cost: the FLOPs' arithmetic comes from the first floating input") {
  using profiler::op_cost;
  // A call of op `name` as an observer sees it (the op's record, inputs by slot, outputs).
  auto call_of = [](const char* name, const std::vector<const Tensor*>& in, const Tensor& out) {
    const OpDesc* op = find_op(name);
    REQUIRE(op != nullptr);
    return OpCall{op, op->name, in, {}, std::span<const Tensor>(&out, 1), 0};
  };
  auto math = [&](const char* name, std::initializer_list<const Tensor*> inputs, const Tensor& out) {
    const std::vector<const Tensor*> in(inputs);
    return op_cost(call_of(name, in, out)).math;
  };
  const Tensor a32 = randn({4, 8}), b32 = randn({8, 3}), bias32 = randn({3});
  const Tensor a64 = randn({4, 8}, kFloat64), b64 = randn({8, 3}, kFloat64);
  const Tensor a16 = randn({4, 8}, kFloat16), abf = randn({4, 8}, kBFloat16);
  const Tensor out43 = zeros({4, 3}), out48 = zeros({4, 8});
  CHECK(math("mm", {&a32, &b32}, out43) == MathKind::Float32);
  CHECK(math("mm", {&a64, &b64}, zeros({4, 3}, kFloat64)) == MathKind::Float64);
  CHECK(math("gelu", {&a16}, zeros({4, 8}, kFloat16)) == MathKind::Half);
  CHECK(math("softmax", {&abf}, zeros({4, 8}, kBFloat16)) == MathKind::Half);
  CHECK(math("layer_norm", {&a64}, zeros({4, 8}, kFloat64)) == MathKind::Float64);
  CHECK(math("sum", {&a16}, zeros({}, kFloat16)) == MathKind::Half);
  // addmm without a bias: the undefined first input is skipped, the matrices decide.
  const Tensor none;
  CHECK(math("addmm", {&none, &a64, &b64}, zeros({4, 3}, kFloat64)) == MathKind::Float64);
  // The first floating input wins, not a later one; integer-only ops keep their nominal
  // count but have no FLOP ceiling.
  const Tensor i32 = zeros({4, 8}, kInt32), i32_out = zeros({4, 8}, kInt32);
  CHECK(math("add", {&i32, &a16}, zeros({4, 8}, kFloat16)) == MathKind::Half);
  CHECK(math("add", {&i32, &i32}, i32_out) == MathKind::None);
  const std::vector<const Tensor*> ints = {&i32, &i32};
  CHECK(op_cost(call_of("add", ints, i32_out)).flops == 32);
  // No FLOPs, no arithmetic: views, copies, linear (its addmm child carries the work).
  CHECK(math("view", {&a32}, out48) == MathKind::None);
  CHECK(math("linear", {&a32, &b32, &bias32}, out43) == MathKind::None);
  CHECK(math("contiguous", {&a32}, out48) == MathKind::None);

  // allow_tf32 affects CUDA GEMMs only: CPU float32 products stay Float32 with it on.
  const bool saved = allow_tf32();
  set_allow_tf32(true);
  CHECK(math("mm", {&a32, &b32}, out43) == MathKind::Float32);
  CHECK(math("addmm", {&bias32, &a32, &b32}, out43) == MathKind::Float32);
  CHECK(math("matmul", {&a32, &b32}, out43) == MathKind::Float32);
  CHECK(math("add", {&a32, &a32}, out48) == MathKind::Float32);
  set_allow_tf32(saved);

  // The profiler records it on the op's event, and key_averages() carries it into the row.
  Profiler prof({.with_flops = true});
  prof.start();
  (void)mm(a64, b64);
  (void)gelu(a32);
  (void)a32.view({8, 4});
  prof.stop();
  const profiler::KeyAverages averages = prof.key_averages();
  auto row_math = [&](const std::string& key) {
    for (const profiler::EventAverage& r : averages.rows())
      if (r.key == key) return r.math;
    FAIL("no row " << key);
    return MathKind::None;
  };
  CHECK(row_math("kiln::mm") == MathKind::Float64);
  CHECK(row_math("kiln::gelu") == MathKind::Float32);
  CHECK(row_math("kiln::view") == MathKind::None);
}
