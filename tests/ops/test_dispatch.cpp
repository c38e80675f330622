// The dispatcher: every op passes the op scope (observers see names, inputs, outputs and
// nesting), and a device without a kernel gives a clear error.
#include <algorithm>
#include <atomic>
#include <thread>

#include "ops/dispatch.h"
#include "testing.h"

using namespace kiln;

namespace {
struct Recorder : OpObserver {
  std::vector<std::pair<std::string, int>> begins;
  std::vector<std::string> ends;
  std::vector<size_t> input_counts;
  std::vector<size_t> output_counts;
  std::vector<std::vector<const Tensor*>> begin_inputs, end_inputs;
  void on_op_begin(const OpCall& c) override {
    begins.emplace_back(c.name, c.depth);
    input_counts.push_back(c.inputs.size());
    begin_inputs.emplace_back(c.inputs.begin(), c.inputs.end());
  }
  void on_op_end(const OpCall& c) override {
    ends.emplace_back(c.name);
    output_counts.push_back(c.outputs.size());
    end_inputs.emplace_back(c.inputs.begin(), c.inputs.end());
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
  // The ops nested inside linear had inputs of their own; linear's end still sees its own
  // three, the tensors the user passed.
  CHECK(rec.begin_inputs[0] == std::vector<const Tensor*>{&x, &w, &b});
  CHECK(rec.end_inputs.back() == std::vector<const Tensor*>{&x, &w, &b});
}

TEST_CASE("observers added and removed while ops run on other threads") {
  // One observer, alive throughout, counting this thread's mul calls; a worker thread runs
  // ops while the observer list is replaced 400 times under it.
  struct MainThreadMuls : OpObserver {
    std::thread::id main = std::this_thread::get_id();
    std::atomic<int> begins{0}, ends{0}, others{0};
    void on_op_begin(const OpCall& c) override {
      if (std::this_thread::get_id() != main)
        ++others;
      else if (std::string(c.name) == "mul")
        ++begins;
    }
    void on_op_end(const OpCall& c) override {
      if (std::this_thread::get_id() == main && std::string(c.name) == "mul") ++ends;
    }
  };
  static MainThreadMuls observer;  // outlives every list that may still name it
  const Tensor a = ones({8});
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    while (!stop.load()) (void)add(a, a);
  });
  for (int i = 0; i < 200; ++i) {
    add_op_observer(&observer);
    (void)mul(a, a);
    remove_op_observer(&observer);
    (void)mul(a, a);  // not observed
  }
  stop.store(true);
  worker.join();
  CHECK(observer.begins.load() == 200);
  CHECK(observer.ends.load() == 200);
}

TEST_CASE("a device without a kernel in the table is a clear error") {
  using Fn = void (*)();
  dispatch::KernelTable<Fn> table;  // a family with no kernel registered anywhere
  CHECK_THROWS_WITH_AS(table.get("myop", Device::cuda(0)), "[myop] has no CUDA kernel (tensor on cuda:0)", Error);
  CHECK_THROWS_WITH_AS(table.get("myop", Device::cpu()), "[myop] has no CPU kernel (tensor on cpu)", Error);
  table.set(
      DeviceType::CPU, +[] {});
  CHECK(static_cast<bool>(table.get("myop", Device::cpu())));
  CHECK_THROWS_AS(table.get("myop", Device::cuda(1)), Error);
}
