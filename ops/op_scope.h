// The op scope: the hook point every public op opens after validating its inputs and
// before running its kernel. Observers (the profiler, graph capture, tests) and autograd see
// each op's record (op_record.h): its descriptor, inputs by slot, attributes and outputs,
// nested as the ops call one another.
//
// With no observer installed and no input requiring grad the scope costs one relaxed
// atomic load, a thread-local load and a flag test per input (Note [The eager fast path],
// in op_scope.cpp); everything else sits behind [[unlikely]].
#pragma once

#include <atomic>
#include <initializer_list>
#include <span>
#include <vector>

#include "../tensor/autograd_meta.h"
#include "../tensor/tensor.h"
#include "grad_mode.h"
#include "op_list.h"
#include "op_record.h"

namespace kiln {

/// Receives every op call while installed. Callbacks must not throw.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  /// Called after validation, before the kernel runs.
  virtual void on_op_begin(const OpCall& call) = 0;
  /// Called when the op returns normally, with its outputs.
  virtual void on_op_end(const OpCall& call) = 0;
};

/// Installs an observer for all threads (it must outlive its installation).
void add_op_observer(OpObserver* observer);
/// Removes an installed observer.
void remove_op_observer(OpObserver* observer);
/// Installs an observer for the calling thread only (graph capture, a test's recorder).
void add_thread_op_observer(OpObserver* observer);
/// Removes an observer installed for the calling thread.
void remove_thread_op_observer(OpObserver* observer);

/// Where a per-thread stack of the op scopes stood (internal).
struct OpScopeMark {
  uint32_t chunk = 0;
  uint32_t used = 0;
};

namespace detail {
extern std::atomic<bool> g_op_observers_active;
extern thread_local bool t_thread_observers_active;

// Does any input need autograd? (The fast path's per-input test.)
inline bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined() && t->requires_grad()) [[unlikely]]
      return true;
  return false;
}
inline bool any_requires_grad(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) [[unlikely]]
      return true;
  return false;
}
inline bool observed() {
  return g_op_observers_active.load(std::memory_order_relaxed) || t_thread_observers_active;
}
}  // namespace detail

/// RAII scope for one op call; see the file comment.
class OpScope {
 public:
  /// Opens the scope for `op` with one tensor per input slot (null where an optional input
  /// is absent or the argument is a number) and its attribute values, in slot order.
  template <typename... Attrs>
  OpScope(const OpDesc& op, std::initializer_list<const Tensor*> inputs, const Attrs&... attrs) : op_(&op) {
    if (detail::observed() || detail::any_requires_grad(inputs)) [[unlikely]]
      begin(inputs, {detail::to_attr(attrs)...});
  }
  /// Opens the scope for a variadic op (cat, stack): its inputs are a list.
  template <typename... Attrs>
  OpScope(const OpDesc& op, const std::vector<Tensor>& inputs, const Attrs&... attrs) : op_(&op) {
    if (detail::observed() || detail::any_requires_grad(inputs)) [[unlikely]]
      begin_list(inputs, {detail::to_attr(attrs)...});
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  ~OpScope() {
    if (active_) [[unlikely]]
      end_without_outputs();
  }

  /// Whether autograd records this call (grad mode on, an input requires grad, no recording
  /// op around it): an op with an optional saved output (fused_linear_gelu's pre-activation)
  /// materialises it only then.
  bool records_grad() const { return grad_; }

  /// Records the op's single output and returns it (use as `return scope.output(out);`).
  Tensor output(Tensor out) {
    if (active_) [[unlikely]]
      end(std::span<const Tensor>(&out, 1));
    return out;
  }
  /// Records the output of an in-place op (its first input) and returns it.
  Tensor& output_in_place(Tensor& self) {
    if (active_) [[unlikely]]
      end(std::span<const Tensor>(&self, 1));
    return self;
  }
  /// Records several outputs.
  void outputs(std::span<const Tensor> outs) {
    if (active_) [[unlikely]]
      end(outs);
  }
  /// Records that the op produced no tensor (item, equal, record_stream).
  void done() {
    if (active_) [[unlikely]]
      end({});
  }

 private:
  void begin(std::initializer_list<const Tensor*> inputs, std::initializer_list<AttrValue> attrs);
  void begin_list(const std::vector<Tensor>& inputs, std::initializer_list<AttrValue> attrs);
  void notify_begin(std::initializer_list<AttrValue> attrs);
  void end(std::span<const Tensor> outs);
  void end_without_outputs();
  OpCall call(std::span<const Tensor> outs) const;
  void pop_stacks() const;

  const OpDesc* op_;
  bool active_ = false;
  bool observers_ = false;  // observers were told of the begin
  bool grad_ = false;        // autograd records this call
  bool suppressing_ = false; // nested ops record nothing (this op's backward covers them)
  int depth_ = 0;
  uint32_t num_inputs_ = 0;
  uint32_t num_attrs_ = 0;
  const Tensor* const* inputs_ = nullptr;  // this scope's slots on the per-thread input stack
  const AttrValue* attrs_ = nullptr;       // its attributes on the per-thread attribute stack
  OpScopeMark inputs_mark_, attrs_mark_;   // where the stacks stood before this scope
};

}  // namespace kiln
