// The replay check shared by the CPU and CUDA suites: runs an op sample with a thread
// observer that keeps each call of the sample's op (at any depth: _to_copy runs inside to)
// and each call at depth 0, replays every recorded call of the sample's op, and compares
// the replayed outputs with the recorded ones. Inputs are kept as they were passed (same
// strides), except those of an in-place op, which are cloned before the kernel writes.
#pragma once

#include "op_samples.h"

namespace kiln::testing {

struct RecordedCall {
  const OpDesc* op = nullptr;
  std::vector<Tensor> inputs;
  std::vector<AttrValue> attrs;
  std::vector<Tensor> outputs;
};

class CallRecorder final : public OpObserver {
 public:
  std::vector<RecordedCall> calls;
  std::string target;  ///< an op recorded at any depth
  void on_op_begin(const OpCall& call) override {
    if (!wanted(call) || busy_) return;
    busy_ = true;
    RecordedCall r;
    r.op = call.op;
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      const Tensor* t = call.inputs[i];
      const bool written = call.op->has(kOpInPlace);  // in place: cloned before the kernel writes
      r.inputs.push_back(t == nullptr ? Tensor() : written ? t->detach().clone() : t->detach());
    }
    r.attrs.assign(call.attrs.begin(), call.attrs.end());
    open_.push_back(std::move(r));
    busy_ = false;
  }
  void on_op_end(const OpCall& call) override {
    if (!wanted(call) || busy_ || open_.empty()) return;
    busy_ = true;
    RecordedCall r = std::move(open_.back());
    open_.pop_back();
    for (const Tensor& t : call.outputs) r.outputs.push_back(t.defined() ? t.detach().clone() : Tensor());
    calls.push_back(std::move(r));
    busy_ = false;
  }

 private:
  bool wanted(const OpCall& call) const { return call.depth == 0 || target == call.name; }
  bool busy_ = false;
  std::vector<RecordedCall> open_;
};

/// Runs `s`, replays its op's recorded calls, and checks each against the original; returns
/// how many calls were replayed.
inline int check_replay(const OpSample& s) {
  CallRecorder rec;
  rec.target = s.op;
  add_thread_op_observer(&rec);
  manual_seed(7);
  Tensor result;
  try {
    result = s.fn(s.inputs);
  } catch (...) {
    remove_thread_op_observer(&rec);
    throw;
  }
  remove_thread_op_observer(&rec);
  int replayed = 0;
  for (const RecordedCall& c : rec.calls) {
    if (s.op != c.op->name) continue;
    if (c.op->replay == nullptr) {
      CHECK_THROWS_WITH_AS(replay(*c.op, c.inputs, c.attrs), doctest::Contains("cannot be replayed"), Error);
      ++replayed;
      continue;
    }
    if (s.op == "record_stream") continue;
    manual_seed(7);
    const std::vector<Tensor> out = replay(*c.op, c.inputs, c.attrs);
    // An op whose result is not a tensor (equal, item) recorded no output: its replay gives
    // the value as a 0-dim tensor, which the sample returned too.
    const std::vector<Tensor> expected = c.outputs.empty() ? std::vector<Tensor>{result} : c.outputs;
    REQUIRE(out.size() == expected.size());
    for (size_t j = 0; j < out.size(); ++j) {
      CHECK(out[j].sizes() == expected[j].sizes());
      CHECK(out[j].dtype() == expected[j].dtype());
      if (s.op != "empty") CHECK(out[j].equal(expected[j]));  // empty's values are whatever memory held
    }
    ++replayed;
  }
  return replayed;
}

}  // namespace kiln::testing
