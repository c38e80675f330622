// capture(): a thread op observer records the forward's depth-0 op calls into a Graph.
//
// Note [Tensors are values by identity]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A tensor is known by its TensorImpl: an op's input whose impl a recorded node produced (or
// that is a graph input) reads that node's value; any other input is a constant the graph
// references (parameters, buffers, tensors the function closed over). An in-place op returns
// its first input's impl, so afterwards that impl maps to the in-place node's output and later
// readers see the written value. While capture runs it keeps every recorded output alive, so
// an impl freed mid-forward cannot be reused by a new tensor and mistaken for the old one.
//
// Observers must not throw, so a host read (item(), to_vector(), equal()) is remembered and
// reported when the forward returns; the observer is removed on every path out.
#include "capture.h"

#include <fmt/format.h>

#include <exception>
#include <optional>
#include <unordered_map>

#include "../ops/op_scope.h"
#include "verify.h"

namespace kiln::graph {

namespace {

class Recorder final : public OpObserver {
 public:
  Recorder(Graph& graph, std::unordered_map<const TensorImpl*, std::string> names)
      : graph_(graph), names_(std::move(names)) {}

  void on_op_begin(const OpCall& call) override {
    if (depth_++ != 0 || failed()) return;
    ++ops_seen_;
    if (call.op->has(kOpHostRead)) host_read_ = call.op->name;
  }

  void on_op_end(const OpCall& call) override {
    if (--depth_ != 0 || failed()) return;
    // Not replayable (from_vector, tensor: the host data is not in the record): their results
    // become constants when read. No tensor out: a failed call (its exception is on its way
    // out of the forward), or an op with no result (record_stream, an allocator hint).
    if (call.op->replay == nullptr || call.outputs.empty()) return;
    try {
      record(call);
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  /// Makes `t` a graph input.
  void add_input(const Tensor& t, std::string_view name) {
    values_[t.unsafe_impl()] = graph_.add_input(name, TensorMeta::of(t));
  }
  /// The value `t` is in the graph (a constant if nothing recorded produced it).
  Value* value_of(const Tensor& t) {
    auto it = values_.find(t.unsafe_impl());
    if (it != values_.end()) return it->second;
    auto named = names_.find(t.unsafe_impl());
    Value* v = graph_.add_constant(
        t, named != names_.end() ? named->second : fmt::format("_tensor_constant{}", constants_++));
    values_[t.unsafe_impl()] = v;
    return v;
  }
  /// Throws what went wrong while recording, if anything.
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
    KILN_CHECK(host_read_ == nullptr,
               "graph::capture: {} reads a tensor's value on the host (op {} of the forward); data-dependent control "
               "flow cannot be captured: the graph would replay whatever the example inputs decided. Keep the "
               "computation on tensors (where(), masked_fill(), clamp() instead of item() and an if), or capture the "
               "parts before and after the read as separate graphs",
               host_read_, ops_seen_);
  }

 private:
  bool failed() const { return host_read_ != nullptr || error_ != nullptr; }

  void record(const OpCall& call) {
    std::vector<Value*> inputs;
    inputs.reserve(call.inputs.size());
    for (const Tensor* t : call.inputs) inputs.push_back(t != nullptr ? value_of(*t) : nullptr);
    std::vector<std::optional<TensorMeta>> outputs;  // an undefined one (a gradient not asked for) is marked so
    for (const Tensor& out : call.outputs) outputs.emplace_back(TensorMeta::of(out));
    Node* node = graph_.append_node(*call.op, std::move(inputs), {call.attrs.begin(), call.attrs.end()},
                                    std::move(outputs));
    for (size_t i = 0; i < call.outputs.size(); ++i) {
      if (!call.outputs[i].defined()) continue;
      values_[call.outputs[i].unsafe_impl()] = node->output(i);
      alive_.push_back(call.outputs[i]);
    }
  }

  Graph& graph_;
  std::unordered_map<const TensorImpl*, std::string> names_;  // parameters and buffers
  std::unordered_map<const TensorImpl*, Value*> values_;      // Note [Tensors are values by identity]
  std::vector<Tensor> alive_;
  int depth_ = 0;
  size_t ops_seen_ = 0;
  size_t constants_ = 0;
  const char* host_read_ = nullptr;
  std::exception_ptr error_;
};

// Removes the observer however capture leaves.
struct ObserverGuard {
  OpObserver* observer;
  explicit ObserverGuard(OpObserver* o) : observer(o) { add_thread_op_observer(o); }
  ~ObserverGuard() { remove_thread_op_observer(observer); }
  ObserverGuard(const ObserverGuard&) = delete;
  ObserverGuard& operator=(const ObserverGuard&) = delete;
};

std::unordered_map<const TensorImpl*, std::string> constant_names(const nn::Module* module) {
  std::unordered_map<const TensorImpl*, std::string> names;
  if (module == nullptr) return names;
  for (const auto& [name, t] : module->named_parameters())
    if (t.defined()) names.emplace(t.unsafe_impl(), name);
  for (const auto& [name, t] : module->named_buffers())
    if (t.defined()) names.emplace(t.unsafe_impl(), name);
  return names;
}

}  // namespace

Graph capture(const CaptureFn& fn, std::vector<Tensor> example_inputs, CaptureOptions options) {
  KILN_CHECK(static_cast<bool>(fn), "graph::capture: the function is empty");
  const size_t n = example_inputs.size();
  KILN_CHECK(options.input_names.empty() || options.input_names.size() == n,
             "graph::capture: {} input names for {} example inputs", options.input_names.size(), n);
  for (size_t i = 0; i < n; ++i) {
    KILN_CHECK(example_inputs[i].defined(), "graph::capture: example input {} is undefined", i);
    for (size_t j = 0; j < i; ++j)
      KILN_CHECK(!example_inputs[i].is_same(example_inputs[j]),
                 "graph::capture: example inputs {} and {} are the same tensor; pass distinct tensors (a graph input "
                 "is known by its tensor)",
                 j, i);
  }
  Graph graph;
  Recorder recorder(graph, constant_names(options.module));
  for (size_t i = 0; i < n; ++i) {
    const std::string name = !options.input_names.empty() ? options.input_names[i]
                             : n == 1                     ? std::string("x")
                                                          : fmt::format("x{}", i);
    recorder.add_input(example_inputs[i], name);
  }
  std::vector<Tensor> results;
  {
    ObserverGuard guard(&recorder);
    results = fn(example_inputs);
  }
  recorder.rethrow();
  std::vector<Value*> outputs;
  for (size_t i = 0; i < results.size(); ++i) {
    KILN_CHECK(results[i].defined(), "graph::capture: output {} of the function is undefined", i);
    outputs.push_back(recorder.value_of(results[i]));
  }
  graph.set_outputs(std::move(outputs));
  verify(graph);
  return graph;
}

Graph capture(nn::Module& module, std::vector<Tensor> example_inputs, CaptureOptions options) {
  KILN_CHECK(example_inputs.size() == 1,
             "graph::capture: a module's forward takes one tensor, got {} example inputs (capture a function to pass "
             "several)",
             example_inputs.size());
  if (options.module == nullptr) options.module = &module;
  return capture([&module](const std::vector<Tensor>& in) { return std::vector<Tensor>{module(in[0])}; },
                 std::move(example_inputs), std::move(options));
}

}  // namespace kiln::graph
