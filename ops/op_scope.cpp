// Observer registry and the slow path of OpScope, both free of heap allocation per op call
// (the profiler's cost per op is this path's cost):
// - the registry is an immutable list, replaced whole (copy on write, under a mutex) when
//   an observer is added or removed; an op reads the current list with one atomic load.
//   Replaced lists are kept, never freed, because an op on another thread may still be
//   walking one; they are a few pointers each and change only when a profiler (or another
//   observer) starts or stops.
// - an op's tensor inputs go on a per-thread stack that keeps its capacity; a scope holds
//   its offset there and pops back to it when it ends (scopes end in reverse order).
#include "op_scope.h"

// Note [The eager fast path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every op opens an OpScope, and almost always nobody is watching (no profiler, no test
// observer; later no capture, no grad). That case must stay within a small constant of
// calling the kernel, so the inline constructor in op_scope.h reads one separate flag,
// g_op_observers_active, with a relaxed load, and everything dearer (the per-thread input
// stack, the depth, the observer list) sits behind [[unlikely]] in the functions below. A
// bool rather than the list pointer: one byte compared at the top of every op, with no
// ordering to pay while nothing is installed. Relaxed is enough: an observer is owed the ops
// that begin after add_op_observer() returned, on that thread or one synchronised with it
// (the list is then read with acquire). An op running while the list changes may be seen at
// one end only: an observer added meanwhile can get on_op_end without on_op_begin, one
// removed meanwhile misses the end; observers tolerate both (the profiler's recorder does).
// bench/dispatch_overhead measures this path.

#include <algorithm>
#include <memory>
#include <mutex>

namespace kiln {

namespace detail {
std::atomic<bool> g_op_observers_active{false};
}

namespace {

using ObserverList = std::vector<OpObserver*>;

std::mutex g_mutex;                                          // guards replacing the list
std::atomic<const ObserverList*> g_current{nullptr};         // the list ops read
std::vector<std::unique_ptr<const ObserverList>>& lists() {  // every list ever made (mutex)
  static auto* all = new std::vector<std::unique_ptr<const ObserverList>>();
  return *all;
}

// Makes `next` the current list (mutex held).
void publish(ObserverList next) {
  const bool any = !next.empty();
  lists().push_back(std::make_unique<const ObserverList>(std::move(next)));
  g_current.store(lists().back().get(), std::memory_order_release);
  detail::g_op_observers_active.store(any, std::memory_order_relaxed);
}

const ObserverList& current() {
  static const ObserverList empty;
  const ObserverList* list = g_current.load(std::memory_order_acquire);
  return list != nullptr ? *list : empty;
}

thread_local int t_depth = 0;
thread_local std::vector<const Tensor*> t_inputs;  // the open scopes' inputs, innermost last

}  // namespace

void add_op_observer(OpObserver* observer) {
  KILN_CHECK(observer != nullptr, "add_op_observer: observer is null");
  std::lock_guard<std::mutex> lock(g_mutex);
  ObserverList next = current();
  if (std::find(next.begin(), next.end(), observer) != next.end()) return;
  next.push_back(observer);
  publish(std::move(next));
}

void remove_op_observer(OpObserver* observer) {
  std::lock_guard<std::mutex> lock(g_mutex);
  ObserverList next = current();
  const auto it = std::remove(next.begin(), next.end(), observer);
  if (it == next.end()) return;
  next.erase(it, next.end());
  publish(std::move(next));
}

void OpScope::begin(std::initializer_list<const Tensor*> inputs) {
  inputs_begin_ = t_inputs.size();
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined()) t_inputs.push_back(t);  // numbers and absent optionals are not inputs
  notify_begin();
}

void OpScope::begin_list(const std::vector<Tensor>& inputs) {
  inputs_begin_ = t_inputs.size();
  for (const Tensor& t : inputs)
    if (t.defined()) t_inputs.push_back(&t);
  notify_begin();
}

std::span<const Tensor* const> OpScope::inputs() const {
  return {t_inputs.data() + inputs_begin_, t_inputs.size() - inputs_begin_};
}

void OpScope::notify_begin() {
  active_ = true;
  depth_ = t_depth++;
  const OpCall call{name_, inputs(), {}, depth_};
  for (OpObserver* o : current()) o->on_op_begin(call);
}

void OpScope::end(std::span<const Tensor> outs) {
  active_ = false;
  --t_depth;
  const OpCall call{name_, inputs(), outs, depth_};
  for (OpObserver* o : current()) o->on_op_end(call);
  t_inputs.resize(inputs_begin_);
}

void OpScope::end_without_outputs() {
  // Reached when the op threw (or returned without recording outputs): close the nesting
  // and report an end with no outputs so observers stay balanced.
  end({});
}

}  // namespace kiln
