// The collector's bookkeeping: a mutex-guarded list of compact records, and per thread a
// stack of open events so each new event knows its parent.
#include "collector.h"

namespace kiln::profiler {

namespace {

// Handles pack the recording's generation with the event's index, so a handle from an
// earlier recording never closes an event of a later one.
constexpr int kIndexBits = 40;
int64_t make_handle(uint64_t generation, size_t index) {
  return static_cast<int64_t>(((generation & 0x7fffff) << kIndexBits) | index);
}
uint64_t handle_generation(int64_t h) { return static_cast<uint64_t>(h) >> kIndexBits; }
size_t handle_index(int64_t h) {
  return static_cast<size_t>(static_cast<uint64_t>(h) & ((uint64_t{1} << kIndexBits) - 1));
}

struct ThreadState {
  uint64_t generation = 0;
  std::vector<size_t> open;  // indices of this thread's open events, innermost last
};
thread_local ThreadState t_state;

uint64_t thread_number() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t mine = next.fetch_add(1);
  return mine;
}

}  // namespace

int64_t Collector::current_handle() {
  // Thread-local state only: a handle of an ended recording is told apart later (index_in).
  const ThreadState& t = t_state;
  return t.open.empty() ? -1 : make_handle(t.generation, t.open.back());
}

uint64_t Collector::thread_id() { return thread_number(); }

uint64_t Collector::generation() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return generation_;
}

std::optional<size_t> Collector::index_in(int64_t handle, uint64_t generation) {
  if (handle < 0 || handle_generation(handle) != (generation & 0x7fffff)) return std::nullopt;
  return handle_index(handle);
}

Collector& Collector::instance() {
  static Collector* c = new Collector();  // immortal: scopes may close during exit
  return *c;
}

int64_t Collector::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin_).count();
}

void Collector::start(std::chrono::steady_clock::time_point origin) {
  std::lock_guard<std::mutex> lock(mutex_);
  records_.clear();
  records_.reserve(4096);  // no regrowth during a typical recording
  names_.clear();
  shapes_.clear();
  ++generation_;
  origin_ = origin;
  active_.store(true, std::memory_order_relaxed);
}

std::vector<ProfileEvent> Collector::stop() {
  std::vector<Record> records;
  std::vector<std::string> names;
  std::vector<std::vector<std::vector<int64_t>>> shapes;
  int64_t now = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    active_.store(false, std::memory_order_relaxed);
    now = now_ns();
    ++generation_;
    records = std::move(records_);
    names = std::move(names_);
    shapes = std::move(shapes_);
    records_.clear();
    names_.clear();
    shapes_.clear();
  }
  std::vector<ProfileEvent> events(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    ProfileEvent& e = events[i];
    e.name = r.op_name != nullptr ? std::string("kiln::") + r.op_name : std::move(names[r.name_index]);
    e.kind = r.kind;
    e.start_ns = r.start_ns;
    e.end_ns = r.end_ns < r.start_ns ? now : r.end_ns;  // still open: ends with the recording
    e.thread = r.thread;
    e.parent = r.parent;
    if (r.shapes_index > 0) e.input_shapes = std::move(shapes[r.shapes_index - 1]);
    e.cpu_memory_bytes = r.cpu_memory_bytes;
    e.cuda_memory_bytes = r.cuda_memory_bytes;
    e.flops = r.flops;
    e.bytes = r.bytes;
    e.math = r.math;
  }
  return events;
}

int64_t Collector::open(EventKind kind, const char* op_name, std::string* name,
                        std::vector<std::vector<int64_t>> shapes) {
  if (!active()) return -1;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active_.load(std::memory_order_relaxed)) return -1;
  ThreadState& t = t_state;
  if (t.generation != generation_) {
    t.generation = generation_;
    t.open.clear();
  }
  const size_t index = records_.size();
  Record& r = records_.emplace_back();
  r.kind = kind;
  r.op_name = op_name;
  if (name != nullptr) {
    r.name_index = static_cast<uint32_t>(names_.size());
    names_.push_back(std::move(*name));
  }
  r.start_ns = now_ns();
  r.thread = thread_id();
  r.parent = t.open.empty() ? -1 : static_cast<int64_t>(t.open.back());
  if (!shapes.empty()) {
    shapes_.push_back(std::move(shapes));
    r.shapes_index = static_cast<uint32_t>(shapes_.size());
  }
  t.open.push_back(index);
  return make_handle(generation_, index);
}

int64_t Collector::begin(std::string name, EventKind kind, std::vector<std::vector<int64_t>> shapes) {
  return open(kind, nullptr, &name, std::move(shapes));
}

int64_t Collector::begin_op(const char* op_name, std::vector<std::vector<int64_t>> shapes) {
  return open(EventKind::CpuOp, op_name, nullptr, std::move(shapes));
}

std::optional<size_t> Collector::live_index(int64_t handle) const {
  // A handle of an earlier recording (that recording is over) names nothing.
  const std::optional<size_t> index = index_in(handle, generation_);
  if (!index || *index >= records_.size()) return std::nullopt;
  return index;
}

void Collector::set_cost(int64_t handle, double flops, double bytes, MathKind math) {
  if (handle < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (const std::optional<size_t> index = live_index(handle)) {
    records_[*index].flops = flops;
    records_[*index].bytes = bytes;
    records_[*index].math = math;
  }
}

void Collector::memory(bool cuda, int64_t bytes) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  ThreadState& t = t_state;
  if (!active_.load(std::memory_order_relaxed) || t.generation != generation_ || t.open.empty()) return;
  Record& r = records_[t.open.back()];
  (cuda ? r.cuda_memory_bytes : r.cpu_memory_bytes) += bytes;
}

void Collector::end(int64_t handle) {
  if (handle < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  ThreadState& t = t_state;
  const std::optional<size_t> live = live_index(handle);
  if (!live) return;
  const size_t index = *live;
  records_[index].end_ns = now_ns();
  if (t.generation != generation_) return;
  // Normally the innermost; a scope closed out of order is taken out wherever it is.
  for (size_t i = t.open.size(); i-- > 0;)
    if (t.open[i] == index) {
      t.open.erase(t.open.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
}

}  // namespace kiln::profiler
