// replay() of every op's record on the CPU: each op's sample call, recorded by a thread
// observer, replayed with its recorded inputs and attributes, gives the recorded outputs.
#include <set>
#include <thread>

#include "replay_check.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("every op in the op table has a sample call (or a stated reason not to)") {
  std::set<std::string> sampled;
  for (const OpSample& s : op_samples(Device::cpu(), kFloat32)) sampled.insert(s.op);
  for (const OpDesc* op : all_ops()) {
    const bool excused = std::find(kOpsWithoutSample.begin(), kOpsWithoutSample.end(), op->name) != kOpsWithoutSample.end();
    INFO("op " << std::string(op->name));
    CHECK((sampled.count(op->name) == 1 || excused));
    CHECK(find_op(op->name) == op);
  }
  CHECK(find_op("no_such_op") == nullptr);
}

TEST_CASE("replay(call) gives the call's result, for every op, float32 and float64") {
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const OpSample& s : op_samples(Device::cpu(), dtype)) {
      INFO("op " << s.op << " dtype " << dtype);
      CHECK(check_replay(s) >= 1);
    }
  }
}

TEST_CASE("a recorded call carries its attributes, by slot, and absent inputs as null") {
  CallRecorder rec;
  add_thread_op_observer(&rec);
  const Tensor x = randn({2, 3});
  const Tensor w = randn({4, 3});
  const Tensor y = linear(x, w);  // no bias
  const Tensor z = sum(y, {1}, true);
  const Tensor g = gelu(z, "tanh");
  remove_thread_op_observer(&rec);
  REQUIRE(rec.calls.size() == 5);  // randn, randn, linear, sum, gelu (nested ops are not depth 0)
  const RecordedCall& lin = rec.calls[2];
  CHECK(lin.op == &op::linear);
  REQUIRE(lin.inputs.size() == 3);
  CHECK(lin.inputs[1].equal(w));
  CHECK_FALSE(lin.inputs[2].defined());
  const RecordedCall& s = rec.calls[3];
  CHECK(s.op == &op::sum);
  CHECK(attr_ints(s.attrs, 0) == Shape{1});
  CHECK(attr_bool(s.attrs, 1));
  CHECK(attr_string(rec.calls[4].attrs, 0) == "tanh");
  CHECK(rec.calls[0].op == &op::randn);
  CHECK(attr_ints(rec.calls[0].attrs, 0) == Shape{2, 3});
}

TEST_CASE("a thread observer sees only its own thread's ops") {
  CallRecorder rec;
  add_thread_op_observer(&rec);
  std::thread other([] { (void)add(randn({2}), 1); });
  other.join();
  remove_thread_op_observer(&rec);
  CHECK(rec.calls.empty());
}

TEST_CASE("replay refuses calls that do not fit the op's record") {
  CHECK_THROWS_WITH_AS(replay(op::add, std::vector<Tensor>{randn({2})}, std::vector<AttrValue>{Scalar(1), {}, {}}),
                       doctest::Contains("add takes 2 inputs"), Error);
  CHECK_THROWS_WITH_AS(replay(op::sum, std::vector<Tensor>{randn({2})}, std::vector<AttrValue>{}),
                       doctest::Contains("sum takes 2 attributes"), Error);
  CHECK_THROWS_AS(replay(op::sum, std::vector<Tensor>{randn({2})}, std::vector<AttrValue>{Scalar(1), true}),
                  Error);  // a Scalar where dims belong: an internal error naming the kinds
}

TEST_CASE("attr_str prints each kind of attribute readably") {
  CHECK(attr_str(AttrValue()) == "None");
  CHECK(attr_str(AttrValue(int64_t{3})) == "3");
  CHECK(attr_str(AttrValue(true)) == "True");
  CHECK(attr_str(AttrValue(Shape{0, 1})) == "[0, 1]");
  CHECK(attr_str(AttrValue(std::string_view("tanh"))) == "'tanh'");
  CHECK(attr_str(AttrValue(kFloat64)) == "float64");
}

TEST_CASE("an observer may run ops inside its callbacks: the call it holds stays valid") {
  // Each callback runs enough ops to push the per-thread stacks past a chunk, then reads
  // the call's inputs and attributes again.
  struct Busy final : OpObserver {
    int checked = 0;
    void on_op_begin(const OpCall& call) override {
      if (call.depth != 0 || busy) return;
      busy = true;
      const std::vector<const Tensor*> before(call.inputs.begin(), call.inputs.end());
      const std::vector<Tensor> many(300, zeros({1}));
      (void)cat(many, 0);  // 300 inputs in one scope: a new chunk
      for (size_t i = 0; i < before.size(); ++i) CHECK(call.inputs[i] == before[i]);
      if (call.op == &op::sum) CHECK(attr_ints(call.attrs, 0) == Shape{1});
      ++checked;
      busy = false;
    }
    void on_op_end(const OpCall&) override {}
    bool busy = false;
  } busy;
  add_thread_op_observer(&busy);
  const Tensor x = randn({3, 4});
  (void)sum(x, {1});
  (void)add(x, x);
  remove_thread_op_observer(&busy);
  CHECK(busy.checked == 3);
}
