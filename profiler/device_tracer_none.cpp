// The device tracer of a CPU-only build: there is no device activity to record, and
// start() says so; the profiler then prints CPU columns only.
#include "device_tracer.h"

namespace kiln::profiler {

std::string DeviceTracer::start(std::chrono::steady_clock::time_point) {
  return "Kiln was built without CUDA (CPU columns only)";
}

DeviceRecords DeviceTracer::stop() { return {}; }

void DeviceTracer::discard() {}

void DeviceTracer::set_setup(const DeviceTracerSetup&) {}

DeviceTracerSetup DeviceTracer::setup() { return {}; }

DeviceTracerStartCost DeviceTracer::last_start_cost() { return {}; }

}  // namespace kiln::profiler
