// Observer registry and the slow path of OpScope, both free of heap allocation per op call
// (the profiler's cost per op is this path's cost), and where autograd hooks in:
// - the registry is an immutable list, replaced whole (copy on write, under a mutex) when
//   an observer is added or removed; an op reads the current list with one atomic load.
//   Replaced lists are kept, never freed, because an op on another thread may still be
//   walking one; they are a few pointers each and change only when a profiler (or another
//   observer) starts or stops.
// - an op's tensor inputs go on a per-thread stack that keeps its capacity, its attribute
//   values on a second one; a scope pops back to where it started when it ends (scopes end
//   in reverse order). The stacks are made of chunks that never move, so the spans an
//   OpCall hands out stay valid while an observer or autograd runs ops of its own.
// - autograd records the outermost differentiable op only: while a recording scope is open,
//   the ops it calls (linear's addmm, cross_entropy's log_softmax) record nothing, since the
//   outer op's backward formula covers them. A composite op (no formula of its own) records
//   nothing and lets the ops it calls record theirs.
#include "op_scope.h"

// Note [The eager fast path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every op opens an OpScope, and almost always nobody is watching (no profiler, no test
// observer, no capture, no input that requires grad). That case must stay within a small
// constant of calling the kernel, so the inline constructor in op_scope.h reads one separate
// flag, g_op_observers_active, with a relaxed load, one thread-local flag, and each input's
// autograd pointer (null unless it ever required grad), and everything dearer (the per-thread input
// stack, the depth, the observer list) sits behind [[unlikely]] in the functions below. A
// bool rather than the list pointer: one byte compared at the top of every op, with no
// ordering to pay while nothing is installed. Relaxed is enough: an observer is owed the ops
// that begin after add_op_observer() returned, on that thread or one synchronised with it
// (the list is then read with acquire). An op running while the list changes may be seen at
// one end only: an observer added meanwhile can get on_op_end without on_op_begin, one
// removed meanwhile misses the end; observers tolerate both (the profiler's recorder does).
// bench/dispatch_overhead measures this path.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>

#include "autograd_hook.h"

namespace kiln {

namespace detail {
std::atomic<bool> g_op_observers_active{false};
thread_local bool t_thread_observers_active = false;
}  // namespace detail

namespace {
thread_local bool t_grad_enabled = true;  // grad_mode.h
}  // namespace

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

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
thread_local int t_grad_suppressed = 0;             // open scopes that record for the ops below them
// A stack of T whose elements never move: chunks of at least kChunk slots; n slots pushed at
// once are contiguous (a push that does not fit starts the next chunk).
template <typename T>
class StableStack {
 public:
  static constexpr uint32_t kChunk = 256;
  /// n contiguous slots, value-initialised.
  T* push(uint32_t n) {
    if (chunks_.empty()) add_chunk(n);
    if (used_ + n > sizes_[chunk_]) {
      ++chunk_;
      if (chunk_ == chunks_.size()) add_chunk(n);
      else if (sizes_[chunk_] < n) replace_chunk(n);
      used_ = 0;
    }
    T* p = chunks_[chunk_].get() + used_;
    used_ += n;
    return p;
  }
  /// Where the stack stands now.
  OpScopeMark mark() const { return {static_cast<uint32_t>(chunk_), used_}; }
  /// Pops back to `m`, resetting the popped slots (an attribute may own memory).
  void pop_to(OpScopeMark m) {
    while (chunk_ > m.chunk || (chunk_ == m.chunk && used_ > m.used)) {
      if (used_ == 0) {  // back into the previous chunk: its fill is not kept, reset it all
        --chunk_;
        used_ = sizes_[chunk_];
        continue;
      }
      chunks_[chunk_][--used_] = T{};
    }
    chunk_ = m.chunk;
    used_ = m.used;
  }

 private:
  void add_chunk(uint32_t n) {
    const uint32_t size = std::max(kChunk, n);
    chunks_.push_back(std::make_unique<T[]>(size));
    sizes_.push_back(size);
  }
  void replace_chunk(uint32_t n) {
    const uint32_t size = std::max(kChunk, n);
    chunks_[chunk_] = std::make_unique<T[]>(size);
    sizes_[chunk_] = size;
  }
  std::vector<std::unique_ptr<T[]>> chunks_;
  std::vector<uint32_t> sizes_;
  size_t chunk_ = 0;
  uint32_t used_ = 0;
};

thread_local StableStack<const Tensor*> t_inputs;  // the open scopes' inputs, innermost last
thread_local StableStack<AttrValue> t_attrs;       // the open scopes' attributes, innermost last
thread_local ObserverList t_thread_observers;       // add_thread_op_observer()

template <typename F>
void for_each_observer(F&& f) {
  if (detail::g_op_observers_active.load(std::memory_order_relaxed))
    for (OpObserver* o : current()) f(o);
  for (OpObserver* o : t_thread_observers) f(o);
}

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

void add_thread_op_observer(OpObserver* observer) {
  KILN_CHECK(observer != nullptr, "add_thread_op_observer: observer is null");
  if (std::find(t_thread_observers.begin(), t_thread_observers.end(), observer) == t_thread_observers.end())
    t_thread_observers.push_back(observer);
  detail::t_thread_observers_active = true;
}

void remove_thread_op_observer(OpObserver* observer) {
  std::erase(t_thread_observers, observer);
  detail::t_thread_observers_active = !t_thread_observers.empty();
}

void OpScope::begin(std::initializer_list<const Tensor*> inputs, std::initializer_list<AttrValue> attrs) {
  inputs_mark_ = t_inputs.mark();
  num_inputs_ = static_cast<uint32_t>(inputs.size());
  const Tensor** slot = t_inputs.push(num_inputs_);
  inputs_ = slot;
  for (const Tensor* t : inputs)  // every slot, null where absent: observers index by slot
    *slot++ = t != nullptr && t->defined() ? t : nullptr;
  notify_begin(attrs);
}

void OpScope::begin_list(const std::vector<Tensor>& inputs, std::initializer_list<AttrValue> attrs) {
  inputs_mark_ = t_inputs.mark();
  num_inputs_ = static_cast<uint32_t>(inputs.size());
  const Tensor** slot = t_inputs.push(num_inputs_);
  inputs_ = slot;
  for (const Tensor& t : inputs) *slot++ = t.defined() ? &t : nullptr;
  notify_begin(attrs);
}

OpCall OpScope::call(std::span<const Tensor> outs) const {
  return OpCall{op_, op_->name, {inputs_, num_inputs_}, {attrs_, num_attrs_}, outs, depth_};
}

void OpScope::pop_stacks() const {
  t_attrs.pop_to(attrs_mark_);
  t_inputs.pop_to(inputs_mark_);
}

void OpScope::notify_begin(std::initializer_list<AttrValue> attrs) {
  attrs_mark_ = t_attrs.mark();
  num_attrs_ = static_cast<uint32_t>(attrs.size());
  AttrValue* slot = t_attrs.push(num_attrs_);
  attrs_ = slot;
  for (const AttrValue& a : attrs) *slot++ = a;
  depth_ = t_depth;
  // Autograd: the outermost differentiable op with an input that requires grad, while grad
  // mode is on. Non-differentiable ops also shield the ops they call. The check runs before
  // the scope counts as open: when it throws (from the constructor, so no destructor runs)
  // it leaves the per-thread stacks as it found them.
  if (t_grad_suppressed == 0 && t_grad_enabled && !op_->has(kOpComposite)) {
    bool needs = false;
    for (uint32_t i = 0; i < num_inputs_; ++i)
      if (inputs_[i] != nullptr && inputs_[i]->requires_grad()) needs = true;
    if (needs) {
      try {
        detail::autograd_check(call({}));
      } catch (...) {
        pop_stacks();
        throw;
      }
      grad_ = !op_->has(kOpNonDifferentiable);
      ++t_grad_suppressed;
      suppressing_ = true;
    }
  }
  active_ = true;
  ++t_depth;
  observers_ = detail::observed();
  if (observers_) {
    const OpCall c = call({});
    for_each_observer([&](OpObserver* o) { o->on_op_begin(c); });
  }
}

void OpScope::end(std::span<const Tensor> outs) {
  active_ = false;
  --t_depth;
  if (suppressing_) --t_grad_suppressed;
  const OpCall c = call(outs);
  if (op_->has(kOpInPlace) && !outs.empty() && outs[0].defined())
    outs[0].unsafe_impl()->storage()->bump_version();
  // Autograd first, so observers see outputs with their grad_fn. A failure here (an op's
  // record that does not fit its call) is an internal error; the stacks are restored below.
  struct Pop {
    const OpScope* scope;
    ~Pop() { scope->pop_stacks(); }
  } pop{this};
  if (grad_ && !outs.empty()) detail::autograd_record(c);
  if (observers_) for_each_observer([&](OpObserver* o) { o->on_op_end(c); });
}

void OpScope::end_without_outputs() {
  // Reached when the op threw (or returned without recording outputs): close the nesting
  // and report an end with no outputs so observers stay balanced.
  end({});
}

}  // namespace kiln
