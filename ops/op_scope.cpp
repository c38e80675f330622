// Observer registry and the slow path of OpScope. The registry is small and changes
// rarely, so it is a mutex-guarded vector copied out before the callbacks run.
#include "op_scope.h"

#include <algorithm>
#include <mutex>

namespace kiln {

namespace detail {
std::atomic<bool> g_op_observers_active{false};
}

namespace {
std::mutex g_mutex;
std::vector<OpObserver*>& observers() {
  static std::vector<OpObserver*> list;
  return list;
}
thread_local int t_depth = 0;

std::vector<OpObserver*> snapshot() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return observers();
}
}  // namespace

void add_op_observer(OpObserver* observer) {
  KILN_CHECK(observer != nullptr, "add_op_observer: observer is null");
  std::lock_guard<std::mutex> lock(g_mutex);
  if (std::find(observers().begin(), observers().end(), observer) == observers().end())
    observers().push_back(observer);
  detail::g_op_observers_active.store(true, std::memory_order_relaxed);
}

void remove_op_observer(OpObserver* observer) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& list = observers();
  list.erase(std::remove(list.begin(), list.end(), observer), list.end());
  detail::g_op_observers_active.store(!list.empty(), std::memory_order_relaxed);
}

void OpScope::begin(std::initializer_list<const Tensor*> inputs) {
  inputs_.clear();
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined()) inputs_.push_back(t);  // numbers and absent optionals are not inputs
  notify_begin();
}

void OpScope::begin_list(const std::vector<Tensor>& inputs) {
  inputs_.clear();
  for (const Tensor& t : inputs)
    if (t.defined()) inputs_.push_back(&t);
  notify_begin();
}

void OpScope::notify_begin() {
  active_ = true;
  depth_ = t_depth++;
  const OpCall call{name_, inputs_, {}, depth_};
  for (OpObserver* o : snapshot()) o->on_op_begin(call);
}

void OpScope::end(std::span<const Tensor> outs) {
  active_ = false;
  --t_depth;
  const OpCall call{name_, inputs_, outs, depth_};
  for (OpObserver* o : snapshot()) o->on_op_end(call);
}

void OpScope::end_without_outputs() {
  // Reached when the op threw (or returned without recording outputs): close the nesting
  // and report an end with no outputs so observers stay balanced.
  end({});
}

}  // namespace kiln
