// The engine of engine.h, and the Tensor methods that reach it (backward, retain_grad,
// register_hook, register_post_accumulate_grad_hook). Backward nodes run under a profiler
// scope named as PyTorch's ("autograd::engine::evaluate_function: AddmmBackward0"), so their
// ops nest under it.
#include "engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "../ops/grad_mode.h"
#include "../ops/ops.h"
#include "../profiler/record_function.h"
#include "../tensor/shape.h"
#include "node.h"

namespace kiln::autograd {

namespace {

struct Later {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

Tensor accumulate(const Tensor& into, const Tensor& g) { return into.defined() ? add(into, g) : g; }

// What grad() wants back: for each input, the node and slot its gradient arrives at.
struct Capture {
  Node* node;
  uint32_t input_nr;
  Tensor value;
};

std::vector<Tensor> root_gradients(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                                   const char* who) {
  KILN_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
             "{}: got {} tensors and {} gradients", who, outputs.size(), grad_outputs.size());
  std::vector<Tensor> grads(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    KILN_CHECK(out.defined(), "{}: tensor {} is undefined", who, i);
    KILN_CHECK(out.requires_grad(),
               "{}: element {} of tensors does not require grad and does not have a grad_fn", who, i);
    if (!grad_outputs.empty() && grad_outputs[i].defined()) {
      const Tensor& g = grad_outputs[i];
      KILN_CHECK(g.sizes() == out.sizes(), "{}: mismatch in shape: grad_output[{}] has a shape of {} and output[{}] "
                 "has a shape of {}", who, i, shape_str(g.sizes()), i, shape_str(out.sizes()));
      grads[i] = g.dtype() == out.dtype() && g.device() == out.device() ? g : g.to(out.device(), out.dtype());
    } else {
      KILN_CHECK(out.numel() == 1, "{}: grad can be implicitly created only for scalar outputs (tensor {} has shape {})",
                 who, i, shape_str(out.sizes()));
      grads[i] = ones_like(out);
    }
  }
  return grads;
}

// The callbacks queued (queue_callback) during the backward pass running on this thread;
// null outside one. A pass started inside a hook (a nested backward) has its own queue.
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;

class CallbackQueue {
 public:
  CallbackQueue() : previous_(t_callbacks) { t_callbacks = &queue_; }
  ~CallbackQueue() { t_callbacks = previous_; }
  CallbackQueue(const CallbackQueue&) = delete;
  CallbackQueue& operator=(const CallbackQueue&) = delete;
  // Runs the callbacks in order, those they queue included.
  void drain() {
    for (size_t i = 0; i < queue_.size(); ++i) {
      std::function<void()> callback = std::move(queue_[i]);
      callback();
    }
    queue_.clear();
  }

 private:
  std::vector<std::function<void()>> queue_;
  std::vector<std::function<void()>>* previous_;
};

void run(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs, bool retain_graph,
         bool create_graph, std::vector<Capture>* captures, const char* who) {
  std::vector<Tensor> root_grads = root_gradients(outputs, grad_outputs, who);
  AutoGradMode mode(create_graph);
  CallbackQueue callbacks;

  // Dependencies: how many edges from reachable nodes point at each node.
  std::vector<Edge> roots;
  for (const Tensor& out : outputs) roots.push_back(gradient_edge(out));
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::shared_ptr<Node>> alive;  // keeps nodes alive while the pass runs
  std::vector<Node*> stack;
  for (const Edge& e : roots)
    if (alive.emplace(e.node.get(), e.node).second) stack.push_back(e.node.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      ++deps[e.node.get()];
      if (alive.emplace(e.node.get(), e.node).second) stack.push_back(e.node.get());
    }
  }

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto deliver = [&](const Edge& e, const Tensor& g) {
    auto& buf = buffers[e.node.get()];
    if (buf.size() < e.node->num_outputs()) buf.resize(e.node->num_outputs());
    if (g.defined()) buf[e.input_nr] = accumulate(buf[e.input_nr], g);
  };
  for (size_t i = 0; i < roots.size(); ++i) deliver(roots[i], root_grads[i]);

  std::priority_queue<Node*, std::vector<Node*>, Later> ready;
  std::unordered_set<Node*> queued;
  for (const Edge& e : roots)
    if (deps[e.node.get()] == 0 && queued.insert(e.node.get()).second) ready.push(e.node.get());

  std::vector<Node*> ran;
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    grads.resize(n->num_outputs());
    n->run_pre_hooks(grads);
    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();
    std::vector<Tensor> outs;
    if (captures != nullptr)
      for (Capture& c : *captures)
        if (c.node == n && c.input_nr < grads.size() && grads[c.input_nr].defined())
          c.value = accumulate(c.value, grads[c.input_nr]);
    // grad() never touches .grad(): leaf accumulators do not run.
    const bool is_accumulator = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    if (any && !(captures != nullptr && is_accumulator)) {
      profiler::RecordFunction scope(fmt::format("autograd::engine::evaluate_function: {}", n->name()));
      outs = n->apply(std::move(grads));
    }
    ran.push_back(n);
    const auto& edges = n->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      deliver(e, i < outs.size() ? outs[i] : Tensor());
      if (--deps[e.node.get()] == 0 && queued.insert(e.node.get()).second) ready.push(e.node.get());
    }
  }
  if (!retain_graph)
    for (Node* n : ran) n->release_variables();
  callbacks.drain();
}

}  // namespace

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs, bool retain_graph,
              bool create_graph) {
  run(outputs, grad_outputs, retain_graph || create_graph, create_graph, nullptr, "backward");
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph,
                         bool allow_unused) {
  std::vector<Capture> captures;
  std::vector<std::shared_ptr<Node>> keep;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    KILN_CHECK(t.defined() && t.requires_grad(), "grad: input {} does not require grad", i);
    const Edge e = gradient_edge(t);
    keep.push_back(e.node);
    captures.push_back(Capture{e.node.get(), e.input_nr, Tensor()});
  }
  run(outputs, grad_outputs, retain_graph || create_graph, create_graph, &captures, "grad");
  std::vector<Tensor> result;
  for (size_t i = 0; i < captures.size(); ++i) {
    KILN_CHECK(captures[i].value.defined() || allow_unused,
               "grad: one of the differentiated tensors (input {}) appears to not have been used in the graph. Set "
               "allow_unused=true if this is the desired behavior",
               i);
    result.push_back(captures[i].value);
  }
  return result;
}

void queue_callback(std::function<void()> callback) {
  KILN_CHECK(t_callbacks != nullptr, "queue_callback: no backward pass is running on this thread");
  KILN_CHECK(callback != nullptr, "queue_callback: the callback is empty");
  t_callbacks->push_back(std::move(callback));
}

}  // namespace kiln::autograd

namespace kiln {

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

void Tensor::retain_grad() const {
  KILN_CHECK(requires_grad(), "retain_grad: can't retain_grad on a tensor that has requires_grad=false");
  if (is_leaf()) return;  // leaves keep their gradient anyway
  AutogradMeta& meta = unsafe_impl()->ensure_autograd_meta();
  if (meta.retains_grad) return;
  meta.retains_grad = true;
  std::weak_ptr<TensorImpl> self = impl_ptr();
  meta.grad_fn->add_pre_hook(meta.output_nr, [self](const Tensor& g) {
    if (auto impl = self.lock()) {
      AutogradMeta& m = impl->ensure_autograd_meta();
      m.grad = m.grad.defined() ? kiln::add(m.grad, g) : (g.is_contiguous() ? g.clone() : g.contiguous());
    }
    return Tensor();
  });
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  KILN_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& meta = unsafe_impl()->ensure_autograd_meta();
  if (meta.grad_fn) meta.grad_fn->add_pre_hook(meta.output_nr, std::move(hook));
  else meta.hooks.push_back(std::move(hook));
}

namespace {
std::atomic<uint64_t> g_next_hook_key{1};
}  // namespace

uint64_t Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  KILN_CHECK(defined(), "register_post_accumulate_grad_hook: the tensor is undefined");
  KILN_CHECK(requires_grad(),
             "register_post_accumulate_grad_hook: cannot register a hook on a tensor that doesn't require gradient");
  KILN_CHECK(is_leaf(), "register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered on "
             "non-leaf tensors (grad_fn {})", grad_fn()->name());
  KILN_CHECK(hook != nullptr, "register_post_accumulate_grad_hook: the hook is empty");
  const uint64_t key = g_next_hook_key.fetch_add(1, std::memory_order_relaxed);
  unsafe_impl()->ensure_autograd_meta().post_accumulate_grad_hooks.emplace_back(key, std::move(hook));
  return key;
}

bool Tensor::remove_post_accumulate_grad_hook(uint64_t key) const {
  if (!defined() || unsafe_impl()->autograd_meta() == nullptr) return false;
  auto& hooks = unsafe_impl()->autograd_meta()->post_accumulate_grad_hooks;
  const auto it = std::find_if(hooks.begin(), hooks.end(), [key](const auto& h) { return h.first == key; });
  if (it == hooks.end()) return false;
  hooks.erase(it);
  return true;
}

}  // namespace kiln
