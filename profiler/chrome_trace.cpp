// chrome_trace(): one JSON object per event, flow pair and named pid/tid (see chrome_trace.h).
#include "chrome_trace.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "../core/error.h"

namespace kiln::profiler {

namespace {

const char* category(EventKind kind) {
  switch (kind) {
    case EventKind::CpuOp:
      return "cpu_op";
    case EventKind::UserScope:
      return "user_annotation";
    case EventKind::Kernel:
      return "kernel";
    case EventKind::Memcpy:
      return "gpu_memcpy";
    case EventKind::Memset:
      return "gpu_memset";
  }
  return "cpu_op";
}

double us(int64_t ns) { return static_cast<double>(ns) / 1e3; }

nlohmann::json name_record(const char* what, int64_t pid, int64_t tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

std::string chrome_trace(const std::vector<ProfileEvent>& events) {
  const auto pid = static_cast<int64_t>(::getpid());
  nlohmann::json trace_events = nlohmann::json::array();
  trace_events.push_back(name_record("process_name", pid, 0, "kiln"));
  std::set<uint64_t> threads;
  std::set<std::pair<int, uint64_t>> streams;  // (device, stream)
  for (size_t i = 0; i < events.size(); ++i) {
    const ProfileEvent& e = events[i];
    nlohmann::json record = {
        {"ph", "X"}, {"cat", category(e.kind)}, {"name", e.name}, {"ts", us(e.start_ns)}, {"dur", us(e.duration_ns())}};
    if (!on_device(e.kind)) {
      record["pid"] = pid;
      record["tid"] = e.thread;
      nlohmann::json args = {{"External id", i}};
      if (!e.input_shapes.empty()) args["Input Dims"] = e.input_shapes;
      record["args"] = std::move(args);
      threads.insert(e.thread);
      trace_events.push_back(std::move(record));
      continue;
    }
    record["pid"] = e.device;
    record["tid"] = e.thread;
    nlohmann::json args = {{"device", e.device}, {"stream", e.thread}, {"correlation", e.correlation}};
    if (e.launcher >= 0) args["External id"] = e.launcher;
    if (e.kind == EventKind::Kernel) {
      args["grid"] = e.grid;
      args["block"] = e.block;
      args["registers per thread"] = e.registers_per_thread;
      args["shared memory"] = e.shared_memory_bytes;
    } else {
      args["bytes"] = e.transfer_bytes;
      if (e.duration_ns() > 0)
        args["memory bandwidth (GB/s)"] = static_cast<double>(e.transfer_bytes) / e.duration_ns();
    }
    record["args"] = std::move(args);
    streams.insert({e.device, e.thread});
    trace_events.push_back(std::move(record));
    if (e.launcher < 0) continue;
    // The flow from the launch (inside the launching op, on its thread; at the op's start
    // when the launch time is unknown) to the device event.
    const ProfileEvent& op = events[static_cast<size_t>(e.launcher)];
    const int64_t launch = e.launch_ns >= op.start_ns && e.launch_ns <= op.end_ns ? e.launch_ns : op.start_ns;
    trace_events.push_back({{"ph", "s"},
                            {"id", e.correlation},
                            {"cat", "ac2g"},
                            {"name", "ac2g"},
                            {"pid", pid},
                            {"tid", op.thread},
                            {"ts", us(launch)}});
    trace_events.push_back({{"ph", "f"},
                            {"id", e.correlation},
                            {"cat", "ac2g"},
                            {"name", "ac2g"},
                            {"bp", "e"},
                            {"pid", e.device},
                            {"tid", e.thread},
                            {"ts", us(e.start_ns)}});
  }
  for (uint64_t t : threads)
    trace_events.push_back(name_record("thread_name", pid, static_cast<int64_t>(t), "thread " + std::to_string(t)));
  std::set<int> devices;
  for (const auto& [device, stream] : streams) {
    if (devices.insert(device).second)
      trace_events.push_back(name_record("process_name", device, 0, "GPU " + std::to_string(device)));
    trace_events.push_back(
        name_record("thread_name", device, static_cast<int64_t>(stream), "stream " + std::to_string(stream)));
  }
  const nlohmann::json doc = {
      {"schemaVersion", 1}, {"displayTimeUnit", "ms"}, {"traceEvents", std::move(trace_events)}};
  return doc.dump();
}

void write_chrome_trace(const std::vector<ProfileEvent>& events, const std::string& path) {
  const std::string text = chrome_trace(events);
  std::ofstream out(path);
  KILN_CHECK(out.good(), "export_chrome_trace: cannot open \"{}\" for writing", path);
  out << text;
  out.close();
  KILN_CHECK(out.good(), "export_chrome_trace: writing \"{}\" failed", path);
}

}  // namespace kiln::profiler
