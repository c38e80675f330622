// The dispatcher: every op passes the op scope (observers see names, inputs, outputs and
// nesting), and a device without a kernel gives a clear error.
#include "ops/dispatch.h"
#include "testing.h"

using namespace kiln;

namespace {
struct Recorder : OpObserver {
  std::vector<std::pair<std::string, int>> begins;
  std::vector<std::string> ends;
  std::vector<size_t> input_counts;
  std::vector<size_t> output_counts;
  void on_op_begin(const OpCall& c) override {
    begins.emplace_back(c.name, c.depth);
    input_counts.push_back(c.inputs.size());
  }
  void on_op_end(const OpCall& c) override {
    ends.emplace_back(c.name);
    output_counts.push_back(c.outputs.size());
  }
};
}  // namespace

TEST_CASE("observers see each op with its nesting depth") {
  const Tensor x = ones({2, 3}), w = ones({4, 3}), b = zeros({4});
  Recorder rec;
  add_op_observer(&rec);
  const Tensor y = linear(x, w, b);
  remove_op_observer(&rec);
  REQUIRE(!rec.begins.empty());
  CHECK(rec.begins[0] == std::pair<std::string, int>{"linear", 0});
  CHECK(rec.input_counts[0] == 3);
  bool saw_addmm = false;
  for (auto& [name, depth] : rec.begins)
    if (name == "addmm") saw_addmm = depth == 1;
  CHECK(saw_addmm);
  CHECK(rec.ends.back() == "linear");
  CHECK(rec.output_counts.back() == 1);
  CHECK(rec.begins.size() == rec.ends.size());
}

TEST_CASE("a device without a kernel in the table is a clear error") {
  using Fn = void (*)();
  dispatch::KernelTable<Fn> table;  // a family with no kernel registered anywhere
  CHECK_THROWS_WITH_AS(table.get("myop", Device::cuda(0)), "[myop] has no CUDA kernel (tensor on cuda:0)", Error);
  CHECK_THROWS_WITH_AS(table.get("myop", Device::cpu()), "[myop] has no CPU kernel (tensor on cpu)", Error);
  table.set(DeviceType::CPU, +[] {});
  CHECK(static_cast<bool>(table.get("myop", Device::cpu())));
  CHECK_THROWS_AS(table.get("myop", Device::cuda(1)), Error);
}
