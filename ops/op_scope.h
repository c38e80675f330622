// The op scope: the hook point every public op opens after validating its inputs and
// before running its kernel. Observers (the profiler, graph capture, autograd, tests) see
// each op's name, inputs and outputs, nested as the ops call one another.
//
// With no observer installed the scope costs one relaxed atomic load and a branch
// (Note [The eager fast path], in op_scope.cpp); everything else sits behind [[unlikely]].
#pragma once

#include <atomic>
#include <initializer_list>
#include <span>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln {

/// What an observer sees of one op call.
struct OpCall {
  const char* name;                       ///< "add", "linear", ...: a static string (the profiler keeps it)
  std::span<const Tensor* const> inputs;  ///< tensor arguments, in signature order
  std::span<const Tensor> outputs;        ///< empty in on_op_begin
  int depth;                              ///< 0 for an op the user called, >0 when nested
};

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

namespace detail {
extern std::atomic<bool> g_op_observers_active;
}

/// RAII scope for one op call; see the file comment.
class OpScope {
 public:
  /// Opens the scope for op `name` (a static string) with its tensor inputs.
  OpScope(const char* name, std::initializer_list<const Tensor*> inputs) : name_(name) {
    if (detail::g_op_observers_active.load(std::memory_order_relaxed)) [[unlikely]]
      begin(inputs);
  }
  /// Opens the scope for an op whose tensor inputs are a list (cat, stack).
  OpScope(const char* name, const std::vector<Tensor>& inputs) : name_(name) {
    if (detail::g_op_observers_active.load(std::memory_order_relaxed)) [[unlikely]]
      begin_list(inputs);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  ~OpScope() {
    if (active_) [[unlikely]]
      end_without_outputs();
  }

  /// Records the op's single output and returns it (use as `return scope.output(out);`).
  Tensor output(Tensor out) {
    if (active_) [[unlikely]]
      end(std::span<const Tensor>(&out, 1));
    return out;
  }
  /// Records several outputs.
  void outputs(std::span<const Tensor> outs) {
    if (active_) [[unlikely]]
      end(outs);
  }

 private:
  void begin(std::initializer_list<const Tensor*> inputs);
  void begin_list(const std::vector<Tensor>& inputs);
  void notify_begin();
  void end(std::span<const Tensor> outs);
  void end_without_outputs();
  std::span<const Tensor* const> inputs() const;  // this scope's part of the per-thread input stack

  const char* name_;
  bool active_ = false;
  int depth_ = 0;
  size_t inputs_begin_ = 0;  // where this scope's inputs start on the per-thread stack
};

}  // namespace kiln
