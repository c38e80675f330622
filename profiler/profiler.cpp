// Profiler: the schedule's transitions, the op observer that turns op scopes into events,
// and the Chrome trace export.
#include "profiler.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../allocator/memory_observer.h"
#include "../core/error.h"
#include "../ops/op_scope.h"
#include "collector.h"
#include "op_cost.h"

namespace kiln::profiler {

namespace {

// Every op scope becomes a host event named "kiln::<op>". Op scopes nest strictly on a
// thread, so the handles wait on a per-thread stack between begin and end.
class OpRecorder final : public OpObserver {
 public:
  bool record_shapes = false;
  bool with_flops = false;

  void on_op_begin(const OpCall& call) override {
    std::vector<std::vector<int64_t>> shapes;
    if (record_shapes) {
      shapes.reserve(call.inputs.size());
      for (const Tensor* t : call.inputs) shapes.emplace_back(t->sizes().begin(), t->sizes().end());
    }
    t_handles.push_back(
        Collector::instance().begin(std::string("kiln::") + call.name, EventKind::CpuOp, std::move(shapes)));
  }
  void on_op_end(const OpCall& call) override {
    if (t_handles.empty()) return;  // the op began before recording started
    const int64_t handle = t_handles.back();
    t_handles.pop_back();
    if (with_flops && handle >= 0) {
      const OpCost cost = op_cost(call.name, call.inputs, call.outputs);
      Collector::instance().set_cost(handle, cost.flops, cost.bytes);
    }
    Collector::instance().end(handle);
  }

 private:
  static thread_local std::vector<int64_t> t_handles;
};
thread_local std::vector<int64_t> OpRecorder::t_handles;

OpRecorder& recorder() {
  static OpRecorder* r = new OpRecorder();  // immortal, like the collector
  return *r;
}

std::atomic<bool> g_running{false};  // one profiler at a time

// profile_memory: the allocators' blocks, attributed to the innermost open event.
void on_memory(Device device, int64_t bytes) { Collector::instance().memory(device.is_cuda(), bytes); }

}  // namespace

Profiler::Profiler(ProfilerOptions options) : options_(std::move(options)) {
  if (options_.schedule) (void)schedule_action(*options_.schedule, 0);  // validates it now
}

Profiler::~Profiler() {
  if (running_) {
    try {
      stop();
    } catch (...) {
      // A destructor cannot report an on_trace_ready failure.
    }
  }
}

void Profiler::start() {
  KILN_CHECK(!running_, "Profiler::start: this profiler is already running");
  bool expected = false;
  KILN_CHECK(g_running.compare_exchange_strong(expected, true),
             "Profiler::start: another profiler is running; stop it first (one profiler records at a time)");
  running_ = true;
  step_ = 0;
  origin_ = std::chrono::steady_clock::now();
  action_ = options_.schedule ? schedule_action(*options_.schedule, 0) : ProfilerAction::Record;
  if (action_ != ProfilerAction::None) begin_recording();
}

void Profiler::step() {
  KILN_CHECK(running_, "Profiler::step: the profiler is not running (call start() first)");
  ++step_;
  if (!options_.schedule) return;
  const ProfilerAction previous = action_;
  action_ = schedule_action(*options_.schedule, step_);
  if (previous == ProfilerAction::RecordAndSave) {
    end_recording(true);  // the active span is complete
  } else if (previous == ProfilerAction::Warmup && action_ != ProfilerAction::Warmup) {
    end_recording(false);  // warm-up events are dropped
  }
  if (action_ != ProfilerAction::None && !recording_) begin_recording();
}

void Profiler::stop() {
  KILN_CHECK(running_, "Profiler::stop: the profiler is not running");
  running_ = false;
  g_running.store(false);
  if (recording_) end_recording(action_ == ProfilerAction::Record || action_ == ProfilerAction::RecordAndSave);
}

void Profiler::begin_recording() {
  recorder().record_shapes = options_.record_shapes;
  recorder().with_flops = options_.with_flops;
  Collector::instance().start(origin_);
  add_op_observer(&recorder());
  if (options_.profile_memory) set_memory_observer(&on_memory);
  recording_ = true;
}

void Profiler::end_recording(bool keep) {
  remove_op_observer(&recorder());
  if (options_.profile_memory) set_memory_observer(nullptr);
  std::vector<ProfileEvent> events = Collector::instance().stop();
  recording_ = false;
  if (!keep) return;
  events_ = std::move(events);
  if (options_.on_trace_ready) options_.on_trace_ready(*this);
}

KeyAverages Profiler::key_averages(bool group_by_input_shape) const {
  KILN_CHECK(!recording_, "Profiler::key_averages: stop the profiler (or finish the active steps) first");
  KeyAverages averages = profiler::key_averages(events_, group_by_input_shape);
  averages.set_profile_memory(options_.profile_memory);
  averages.set_with_flops(options_.with_flops);
  return averages;
}

void Profiler::export_chrome_trace(const std::string& path) const {
  const auto pid = static_cast<int64_t>(::getpid());
  nlohmann::json trace_events = nlohmann::json::array();
  trace_events.push_back(
      {{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", "kiln"}}}});
  std::vector<uint64_t> threads;
  for (size_t i = 0; i < events_.size(); ++i) {
    const ProfileEvent& e = events_[i];
    nlohmann::json args = {{"External id", i}};
    if (!e.input_shapes.empty()) args["Input Dims"] = e.input_shapes;
    trace_events.push_back({{"ph", "X"},
                            {"cat", e.kind == EventKind::UserScope ? "user_annotation" : "cpu_op"},
                            {"name", e.name},
                            {"pid", pid},
                            {"tid", e.thread},
                            {"ts", static_cast<double>(e.start_ns) / 1e3},
                            {"dur", static_cast<double>(e.duration_ns()) / 1e3},
                            {"args", args}});
    if (std::find(threads.begin(), threads.end(), e.thread) == threads.end()) threads.push_back(e.thread);
  }
  for (uint64_t t : threads)
    trace_events.push_back({{"ph", "M"},
                            {"name", "thread_name"},
                            {"pid", pid},
                            {"tid", t},
                            {"args", {{"name", "thread " + std::to_string(t)}}}});
  const nlohmann::json doc = {{"schemaVersion", 1}, {"displayTimeUnit", "ms"}, {"traceEvents", trace_events}};
  std::ofstream out(path);
  KILN_CHECK(out.good(), "export_chrome_trace: cannot open \"{}\" for writing", path);
  out << doc.dump();
  out.close();
  KILN_CHECK(out.good(), "export_chrome_trace: writing \"{}\" failed", path);
}

}  // namespace kiln::profiler
