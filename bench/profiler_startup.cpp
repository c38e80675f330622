// What a Kiln profile costs around its ops, for one way of leaving CUPTI between profiles
// (the device tracer's teardown, profiler/device_tracer.h) per process: CUPTI's state is
// process-wide, so scripts/profiler_startup_experiment.sh runs this once per teardown and
// libtorch_profiler_overhead --startup for Kineto, and prints one table. The protocol
// (bench/profiler_startup.h): plain 1-element adds before any profile, right after each
// stop() and after a pause; start() and stop(); the first add and the first linear layer of
// each profile against the later ones. It also prints where start()'s time went.
//
//   profiler_startup [--teardown finalize|background|idle|disable|disable-all|keep-subscriber|reset]
//                    [--no-warm-up] [--cupti-zeroes] [--preallocate N] [--idle-ms N] [--cycles N]
#include <kiln/kiln.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "bench/bench_util.h"
#include "bench/profiler_startup.h"
#include "profiler/device_tracer.h"

using namespace kiln;
using profiler::CuptiTeardown;

namespace {

const std::map<std::string, CuptiTeardown> kTeardowns = {
    {"finalize", CuptiTeardown::Finalize},
    {"background", CuptiTeardown::FinalizeInBackground},
    {"idle", CuptiTeardown::FinalizeWhenIdle},
    {"disable", CuptiTeardown::Disable},
    {"disable-all", CuptiTeardown::DisableAll},
    {"keep-subscriber", CuptiTeardown::DisableKeepSubscriber},
    {"reset", CuptiTeardown::DisableReset},
};

std::string teardown_name(CuptiTeardown t) {
  for (const auto& [name, value] : kTeardowns)
    if (value == t) return name;
  return "?";
}

int usage(const char* why) {
  std::fprintf(stderr,
               "profiler_startup: %s\nusage: profiler_startup [--teardown NAME] [--no-warm-up] [--cupti-zeroes] "
               "[--preallocate N] [--idle-ms N] [--cycles N]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  profiler::DeviceTracerSetup setup = profiler::DeviceTracer::setup();
  int cycles = 30;
  std::string variant;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--teardown" && has_value) {
      const auto it = kTeardowns.find(argv[++i]);
      if (it == kTeardowns.end()) return usage("unknown teardown");
      setup.teardown = it->second;
    } else if (arg == "--no-warm-up") {
      setup.warm_up = false;
    } else if (arg == "--cupti-zeroes") {
      setup.zeroed_buffers = false;
    } else if (arg == "--preallocate" && has_value) {
      setup.preallocated_device_buffers = static_cast<size_t>(std::atoi(argv[++i]));
      variant += "/prealloc" + std::to_string(setup.preallocated_device_buffers);
    } else if (arg == "--idle-ms" && has_value) {
      setup.finalize_idle_ms = std::atoi(argv[++i]);
    } else if (arg == "--cycles" && has_value) {
      cycles = std::max(3, std::atoi(argv[++i]));
    } else {
      return usage(("unknown argument " + arg).c_str());
    }
  }
  variant = teardown_name(setup.teardown) + variant + (setup.warm_up ? "" : "/no-warm-up") +
            (setup.zeroed_buffers ? "" : "/cupti-zeroes");
  if (!cuda::is_available()) {
    std::printf("profiler_startup: no CUDA device visible\n");
    return 0;
  }
  profiler::DeviceTracer::set_setup(setup);

  const Device gpu = Device::cuda(0);
  const TensorOptions on_gpu = TensorOptions().device(gpu);
  const Tensor a = full({1}, 1.5f, on_gpu), b = full({1}, 2.25f, on_gpu);
  const Tensor x = randn({64, 1024}, on_gpu), w = randn({4096, 1024}, on_gpu), bias = randn({4096}, on_gpu);
  profiler::Profiler prof;
  std::vector<profiler::DeviceTracerStartCost> costs;
  bench::StartupHooks hooks;
  hooks.start = [&] {
    prof.start();
    costs.push_back(profiler::DeviceTracer::last_start_cost());
  };
  hooks.stop = [&] { prof.stop(); };
  hooks.small_op = [&] {
    Tensor r = add(a, b);
    bench::do_not_optimize(r);
  };
  hooks.large_op = [&] {
    Tensor r = linear(x, w, bias);
    bench::do_not_optimize(r);
  };
  hooks.drain = [&] { cuda::synchronize(gpu); };
  hooks.profiled_us = [&] {
    std::vector<double> adds, gemms;
    for (const profiler::ProfileEvent& e : prof.events()) {
      if (e.name == "kiln::add") adds.push_back(static_cast<double>(e.duration_ns()) / 1e3);
      if (e.name == "kiln::addmm") gemms.push_back(static_cast<double>(e.duration_ns()) / 1e3);
    }
    return std::pair{adds, gemms};
  };
  const bench::StartupResult r = bench::run_startup(hooks, cycles);
  if (!prof.device_activity_status().empty())
    std::printf("profiler_startup: warning: %s\n", prof.device_activity_status().c_str());
  bench::print_startup_row("kiln " + variant, r, "kiln_profiler_startup");
  auto phases = [](const profiler::DeviceTracerStartCost& c) {
    return fmt::format("set-up {:.3f}, subscribe {:.3f}, enable {:.3f}, warm-up {:.3f} ms{}", c.setup_ns / 1e6,
                       c.subscribe_ns / 1e6, c.enable_ns / 1e6, c.warm_up_ns / 1e6,
                       c.was_set_up ? " (CUPTI still set up)" : "");
  };
  fmt::print("PHASES kiln {}: first start: {}; second: {}; last: {}\n", variant, phases(costs.front()),
             phases(costs.at(1)), phases(costs.back()));
  return 0;
}
