// The interpreter: runs a graph's nodes in program order through run_node(), so each node is
// an ordinary op call (its own op scope: profiler rows, autograd, the device's kernels).
// Values live in a table of slots filled from the inputs and constants; a value's slot is
// cleared right after the last node that reads it, so intermediates are freed as soon as
// eager code would free them. The plan (slots, what to free after each node) is computed
// once, when the executor is built.
#include <fmt/format.h>

#include <unordered_map>

#include "../ops/dropout.h"
#include "../ops/op_list.h"
#include "../tensor/shape.h"
#include "executor.h"

namespace kiln::graph {

namespace {

class Interpreter final : public ExecutorImpl {
 public:
  explicit Interpreter(const Graph& graph) : graph_(graph) { plan(); }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    std::vector<Tensor> slots(num_slots_);
    for (size_t i = 0; i < input_slots_.size(); ++i) slots[input_slots_[i]] = inputs[i];
    for (const auto& [slot, value] : constant_slots_) slots[slot] = value->constant();
    std::vector<Tensor> args;
    for (const Step& step : steps_) {
      args.clear();
      for (int32_t s : step.inputs) args.push_back(s < 0 ? Tensor() : slots[s]);
      std::vector<Tensor> outs = run_node(*step.node, args);
      check_outputs(*step.node, outs);
      for (size_t i = 0; i < step.outputs.size(); ++i) slots[step.outputs[i]] = std::move(outs[i]);
      args.clear();
      for (int32_t s : step.release) slots[s] = Tensor();
    }
    std::vector<Tensor> results;
    results.reserve(output_slots_.size());
    for (int32_t s : output_slots_) results.push_back(slots[s]);
    return results;
  }

 private:
  struct Step {
    const Node* node;
    std::vector<int32_t> inputs;   // slot per input position, -1 where absent
    std::vector<int32_t> outputs;  // slot per output
    std::vector<int32_t> release;  // slots read for the last time here (or never read)
  };

  void plan() {
    std::unordered_map<const Value*, int32_t> slot;
    auto slot_of = [&](const Value* v) {
      auto [it, fresh] = slot.emplace(v, static_cast<int32_t>(slot.size()));
      return it->second;
    };
    for (const Value* v : graph_.inputs()) input_slots_.push_back(slot_of(v));
    for (const Value* v : graph_.constants()) constant_slots_.emplace_back(slot_of(v), v);
    const std::vector<Node*> nodes = graph_.nodes();
    std::unordered_map<const Value*, size_t> last_read;  // index of the last step reading it
    for (size_t k = 0; k < nodes.size(); ++k) {
      Step step{nodes[k], {}, {}, {}};
      for (const Value* v : nodes[k]->inputs()) {
        step.inputs.push_back(v == nullptr ? -1 : slot_of(v));
        if (v != nullptr) last_read[v] = k;
      }
      for (const Value* v : nodes[k]->outputs()) step.outputs.push_back(slot_of(v));
      steps_.push_back(std::move(step));
    }
    for (const Value* v : graph_.outputs()) output_slots_.push_back(slot_of(v));
    num_slots_ = slot.size();
    // Free after the last read; a node output nobody reads right after its node. Graph
    // outputs stay until the end; inputs and constants are the caller's anyway.
    for (size_t k = 0; k < nodes.size(); ++k)
      for (const Value* v : nodes[k]->outputs())
        if (!v->is_graph_output() && last_read.count(v) == 0) steps_[k].release.push_back(slot.at(v));
    for (const auto& [v, k] : last_read)
      if (!v->is_graph_output()) steps_[k].release.push_back(slot.at(v));
  }

  // What a node computed must be what the graph says it computes: passes and the fusion
  // decisions relied on that metadata. An op may return more tensors than the node has
  // outputs, or fewer: fused_linear_gelu adds its pre-activation exactly when autograd records
  // the call, so a node captured without grad has one output and a run with grad gets two (the
  // extra one is dropped), and the other way round the missing one must be a value nobody reads.
  static void check_outputs(const Node& node, std::vector<Tensor>& outs) {
    outs.resize(node.outputs().size());
    for (size_t i = 0; i < outs.size(); ++i) {
      const Value* v = node.outputs()[i];
      const TensorMeta& want = v->meta();
      if (!outs[i].defined()) {
        KILN_CHECK(v->unused(), "graph::Executable: node '{}' ({}) produced no output {} ('{}'), which the graph reads",
                   node.name(), node.op().name, i, v->name());
        continue;
      }
      if (!want.defined) continue;  // captured undefined, and still unread
      KILN_CHECK(outs[i].sizes() == want.shape && outs[i].dtype() == want.dtype && outs[i].device() == want.device,
                 "graph::Executable: node '{}' ({}) produced {} as output {}, but the graph records {} (a constant "
                 "changed shape, dtype or device since capture, or a pass recorded the wrong metadata)",
                 node.name(), node.op().name, TensorMeta::of(outs[i]).str(), i, want.str());
    }
  }

  Graph graph_;
  std::vector<Step> steps_;
  std::vector<int32_t> input_slots_;
  std::vector<std::pair<int32_t, const Value*>> constant_slots_;
  std::vector<int32_t> output_slots_;
  size_t num_slots_ = 0;
};

}  // namespace

std::unique_ptr<ExecutorImpl> make_interpreter(const Graph& graph, const CompileOptions&) {
  return std::make_unique<Interpreter>(graph);
}

std::vector<Tensor> run_node(const Node& node, std::span<const Tensor> inputs) {
  if (&node.op() == &op::dropout)
    return {dropout(inputs[0], attr_double(node.attrs(), 0), attr_bool(node.attrs(), 1))};
  return replay(node.op(), inputs, node.attrs());
}

void check_inputs(const Graph& graph, std::span<const Tensor> inputs, std::string_view who) {
  const auto& want = graph.inputs();
  auto names = [&] {
    std::vector<std::string> n;
    for (const Value* v : want) n.push_back(v->name());
    return fmt::format("{}", fmt::join(n, ", "));
  };
  KILN_CHECK(inputs.size() == want.size(), "{}: expected {} input{} ({}), got {}", who, want.size(),
             want.size() == 1 ? "" : "s", names(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = want[i];
    const Tensor& t = inputs[i];
    KILN_CHECK(t.defined(), "{}: input {} ('{}') is undefined; the graph was captured with {}", who, i, v->name(),
               v->meta().str());
    KILN_CHECK(t.sizes() == v->shape(), "{}: input {} ('{}') has shape {}, but the graph was captured with shape {}",
               who, i, v->name(), shape_str(t.sizes()), shape_str(v->shape()));
    KILN_CHECK(t.dtype() == v->dtype(), "{}: input {} ('{}') has dtype {}, but the graph was captured with {}", who,
               i, v->name(), t.dtype(), v->dtype());
    KILN_CHECK(t.device() == v->device(), "{}: input {} ('{}') is on {}, but the graph was captured on {}", who, i,
               v->name(), t.device(), v->device());
  }
}

}  // namespace kiln::graph
