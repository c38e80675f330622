// Profiler: the schedule's transitions, the op observer that turns op scopes into events,
// and the Chrome trace export.
#include "profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "../allocator/memory_observer.h"
#include "../core/error.h"
#include "../ops/op_scope.h"
#include "chrome_trace.h"
#include "collector.h"
#include "device_ceilings.h"
#include "device_tracer.h"
#include "launch_attribution.h"
#include "op_cost.h"

namespace kiln::profiler {

namespace {

// Every op scope becomes a host event named "kiln::<op>". Op scopes nest strictly on a
// thread, so the handles wait on a per-thread stack between begin and end.
class OpRecorder final : public OpObserver {
 public:
  // Set by the thread that starts a recording while other threads may still be finishing
  // ops of the previous one: atomics, read relaxed (a stale value only shapes that op's event).
  std::atomic<bool> record_shapes{false};
  std::atomic<bool> with_flops{false};

  void on_op_begin(const OpCall& call) override {
    std::vector<std::vector<int64_t>> shapes;
    if (record_shapes.load(std::memory_order_relaxed)) {
      shapes.reserve(call.inputs.size());
      for (const Tensor* t : call.inputs)  // an absent optional input shows as [], as in PyTorch
        if (t != nullptr) shapes.emplace_back(t->sizes().begin(), t->sizes().end());
        else shapes.emplace_back();
    }
    t_handles.push_back(Collector::instance().begin_op(call.name, std::move(shapes)));
  }
  void on_op_end(const OpCall& call) override {
    if (t_handles.empty()) return;  // the op began before recording started
    const int64_t handle = t_handles.back();
    t_handles.pop_back();
    if (with_flops.load(std::memory_order_relaxed) && handle >= 0) {
      const OpCost cost = op_cost(call);
      Collector::instance().set_cost(handle, cost.flops, cost.bytes, cost.math);
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
  open_step_scope();
}

void Profiler::open_step_scope() {
  // As torch.profiler does with a schedule: each step is a "ProfilerStep#N" scope, the
  // parent of the step's ops.
  if (options_.schedule && recording_)
    step_scope_ = Collector::instance().begin(fmt::format("ProfilerStep#{}", step_), EventKind::UserScope);
}

void Profiler::close_step_scope() {
  Collector::instance().end(step_scope_);  // nothing for -1 or a handle of an ended recording
  step_scope_ = -1;
}

void Profiler::step() {
  KILN_CHECK(running_, "Profiler::step: the profiler is not running (call start() first)");
  close_step_scope();
  ++step_;
  if (!options_.schedule) return;
  const ProfilerAction previous = action_;
  action_ = schedule_action(*options_.schedule, step_);
  if (previous == ProfilerAction::RecordAndSave) {
    end_recording(true);  // the active span is complete
  } else if (previous == ProfilerAction::Warmup && action_ == ProfilerAction::None) {
    end_recording(false);  // warm-up events are dropped
  } else if (previous == ProfilerAction::Warmup && action_ != ProfilerAction::Warmup) {
    // Warm-up events are dropped, but the recording goes on: CUPTI's set-up, paid during
    // the warm-up, is not paid again by the first active step.
    (void)Collector::instance().stop();
    start_collector();
    if (tracing_device()) DeviceTracer::discard();
  }
  if (action_ != ProfilerAction::None && !recording_) begin_recording();
  open_step_scope();
}

void Profiler::stop() {
  KILN_CHECK(running_, "Profiler::stop: the profiler is not running");
  close_step_scope();
  running_ = false;
  g_running.store(false);
  if (recording_) end_recording(action_ == ProfilerAction::Record || action_ == ProfilerAction::RecordAndSave);
}

void Profiler::start_collector() {
  Collector::instance().start(origin_);
  generation_ = Collector::instance().generation();
}

void Profiler::begin_recording() {
  recorder().record_shapes.store(options_.record_shapes, std::memory_order_relaxed);
  recorder().with_flops.store(options_.with_flops, std::memory_order_relaxed);
  start_collector();
  const bool want_cuda =
      std::find(options_.activities.begin(), options_.activities.end(), Activity::CUDA) != options_.activities.end();
  device_status_ = want_cuda ? DeviceTracer::start(origin_) : "CUDA activity was not requested";
  add_op_observer(&recorder());
  if (options_.profile_memory) set_memory_observer(&on_memory);
  recording_ = true;
}

void Profiler::end_recording(bool keep) {
  remove_op_observer(&recorder());
  if (options_.profile_memory) set_memory_observer(nullptr);
  std::vector<ProfileEvent> events = Collector::instance().stop();
  DeviceRecords device;
  if (tracing_device()) device = DeviceTracer::stop();
  recording_ = false;
  if (!keep) return;
  // Device events follow the host events; each names the op whose handle it carried, or
  // else the innermost op open on its launching thread when it was launched.
  std::vector<int64_t> launchers(device.events.size(), -1);
  if (!device.events.empty()) {
    const LaunchAttribution attribution(events);  // before `events` grows
    for (size_t i = 0; i < device.events.size(); ++i) {
      const ProfileEvent& e = device.events[i];
      if (const std::optional<size_t> op = Collector::index_in(device.launcher_handles[i], generation_);
          op && *op < events.size())
        launchers[i] = static_cast<int64_t>(*op);
      else if (device.launch_threads[i] != 0 && e.launch_ns >= 0)
        launchers[i] = attribution.innermost(device.launch_threads[i], e.launch_ns);
    }
  }
  for (size_t i = 0; i < device.events.size(); ++i) {
    device.events[i].launcher = launchers[i];
    events.push_back(std::move(device.events[i]));
  }
  dropped_device_records_ = device.dropped;
  if (device.dropped > 0)
    fmt::print(stderr,
               "kiln profiler: warning: CUPTI dropped {} device activity records (its buffers were full); the CUDA "
               "times of this profile are missing them\n",
               device.dropped);
  events_ = std::move(events);
  if (options_.on_trace_ready) options_.on_trace_ready(*this);
}

KeyAverages Profiler::key_averages(bool group_by_input_shape) const {
  KILN_CHECK(!recording_, "Profiler::key_averages: stop the profiler (or finish the active steps) first");
  KeyAverages averages = profiler::key_averages(events_, group_by_input_shape);
  averages.set_profile_memory(options_.profile_memory);
  averages.set_with_flops(options_.with_flops);
  averages.set_dropped_device_records(dropped_device_records_);
  if (options_.with_flops) {
    // The roofline columns compare against the GPU the device events ran on (measured once
    // per process, outside any recording: this is after stop()).
    const auto device_event =
        std::find_if(events_.begin(), events_.end(), [](const ProfileEvent& e) { return on_device(e.kind); });
    if (device_event != events_.end()) averages.set_device_ceilings(device_ceilings(device_event->device));
  }
  return averages;
}

void Profiler::export_chrome_trace(const std::string& path) const { write_chrome_trace(events_, path); }

}  // namespace kiln::profiler
