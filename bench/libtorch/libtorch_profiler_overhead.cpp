// LibTorch's profiler cost per small CUDA op, timed exactly as bench/profiler_overhead.cpp
// times Kiln's: host microseconds to issue a 1-element float32 at::add on cuda:0 (result
// discarded) with no profiler, with Kineto recording CPU and CUDA activity, and with Kineto
// also recording input shapes; batches of 200 calls, the profiler prepared and enabled (and
// one op run) before and disabled after each batch of the recording variants (untimed), the
// stream drained untimed between batches, medians of 301 rounds; and a whole one-op profile. A process of its own:
// Kiln's profiler and Kineto would both claim CUPTI in one. scripts/gpu_bench_summary.py sets the result beside Kiln's
// (kiln_profiler_added_us from the same GPU check run).
//
// With --startup it runs bench/profiler_startup.h's protocol instead (start() and stop(), plain
// ops before and after profiles, the first profiled ops against the later ones), the row
// scripts/profiler_startup_experiment.sh prints beside Kiln's teardowns (run it with
// TEARDOWN_CUPTI=1 for Kineto's cuptiFinalize at stop, PyTorch's Python default).
//
//   libtorch_profiler_overhead [--startup]
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>

#include "bench_util.h"
#include "profiler_startup.h"

namespace {

using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

/// Starts Kineto as torch.profiler.profile(activities=[CPU, CUDA], record_shapes=shapes) does.
void start_kineto(bool shapes) {
  const ProfilerConfig config(ProfilerState::KINETO, /*report_input_shapes=*/shapes, /*profile_memory=*/false);
  const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
}

size_t g_device_events = 0;  // CUDA events in the last recorded batch: shows Kineto saw the kernels

/// Stops Kineto, counts the device events it recorded and drops them.
void stop_kineto() {
  const auto result = torch::autograd::profiler::disableProfiler();
  g_device_events = 0;
  for (const auto& e : result->events()) g_device_events += e.deviceType() == c10::DeviceType::CUDA;
}

/// The start-up protocol (bench/profiler_startup.h) on Kineto: at::add of 1-element tensors
/// and at::linear of [64, 1024] by [4096, 1024], as Kiln's profiler_startup runs them.
int run_startup_protocol() {
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA, 0);
  const at::Tensor a = torch::full({1}, 1.5f, opts), b = torch::full({1}, 2.25f, opts);
  const at::Tensor x = torch::randn({64, 1024}, opts), w = torch::randn({4096, 1024}, opts),
                   bias = torch::randn({4096}, opts);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(0).stream();
  std::unique_ptr<torch::autograd::profiler::ProfilerResult> last;
  kiln::bench::StartupHooks hooks;
  hooks.start = [] { start_kineto(false); };
  hooks.stop = [&] { last = torch::autograd::profiler::disableProfiler(); };
  hooks.small_op = [&] {
    at::Tensor r = at::add(a, b);
    kiln::bench::do_not_optimize(r);
  };
  hooks.large_op = [&] {
    at::Tensor r = at::linear(x, w, bias);
    kiln::bench::do_not_optimize(r);
  };
  hooks.drain = [stream] { (void)cudaStreamSynchronize(stream); };
  hooks.profiled_us = [&] {
    std::vector<double> adds, gemms;
    for (const auto& e : last->events()) {
      if (e.deviceType() != c10::DeviceType::CPU) continue;
      if (e.name() == "aten::add") adds.push_back(static_cast<double>(e.durationNs()) / 1e3);
      if (e.name() == "aten::addmm") gemms.push_back(static_cast<double>(e.durationNs()) / 1e3);
    }
    return std::pair{adds, gemms};
  };
  const kiln::bench::StartupResult r = kiln::bench::run_startup(hooks);
  const char* teardown = std::getenv("TEARDOWN_CUPTI");
  kiln::bench::print_startup_row(
      std::string("kineto ") + TORCH_VERSION + (teardown != nullptr ? std::string(" TEARDOWN_CUPTI=") + teardown : ""),
      r, "libtorch_profiler_startup");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (!torch::cuda::is_available()) {
    std::printf("libtorch_profiler_overhead: no GPU visible\n");
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--startup") == 0) return run_startup_protocol();
  constexpr int kRounds = 301, kCalls = 200;
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA, 0);
  const at::Tensor a = torch::full({1}, 1.5f, opts), b = torch::full({1}, 2.25f, opts);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(0).stream();
  kiln::bench::Turns turns;
  auto add_once = [&] {
    at::Tensor r = at::add(a, b);
    kiln::bench::do_not_optimize(r);
  };
  turns.add("off", kCalls, add_once);
  // As for Kiln: one op runs untimed after each start, so the batches time the steady cost;
  // a whole one-op profile is timed apart.
  const auto starting = [&](bool shapes) {
    return [&, shapes] {
      start_kineto(shapes);
      add_once();
      (void)cudaStreamSynchronize(stream);
    };
  };
  turns.add("on", kCalls, add_once, starting(false), stop_kineto);
  turns.add("on_shapes", kCalls, add_once, starting(true), stop_kineto);
  turns.add("one_op_profile", 1, [&] {
    start_kineto(false);
    add_once();
    (void)torch::autograd::profiler::disableProfiler();
  });
  turns.run(kRounds, [stream] { (void)cudaStreamSynchronize(stream); });
  const double off = turns.median_ns("off") / 1e3, on = turns.median_ns("on") / 1e3,
               on_shapes = turns.median_ns("on_shapes") / 1e3;
  std::printf("libtorch_profiler_overhead: host us per 1-element float32 at::add on cuda:0, LibTorch %s (%s)\n",
              TORCH_VERSION, kiln::bench::machine_description().c_str());
  std::printf("median of %d rounds; each round times a batch of %d calls of every variant in turn\n\n", kRounds,
              kCalls);
  std::printf("%-46s %10s\n", "variant", "us/op");
  std::printf("%-46s %10.3f\n", "at::add, no profiler", off);
  std::printf("%-46s %10.3f\n", "at::add, Kineto recording CPU + CUDA", on);
  std::printf("%-46s %10.3f\n", "at::add, Kineto recording CPU + CUDA + shapes", on_shapes);
  std::printf("%-46s %10.3f\n", "one-op profile: start, add, stop (us)", turns.median_ns("one_op_profile") / 1e3);
  std::printf("\nKineto adds %.3f us per op (%.3f us with shapes)\n", on - off, on_shapes - off);
  std::printf("its last recorded batch held %zu CUDA events for %d + 1 kernels\n", g_device_events, kCalls);
  std::printf("RESULT libtorch_profiler_off_us %.3f\nRESULT libtorch_profiler_on_us %.3f\n", off, on);
  std::printf("RESULT libtorch_profiler_added_us %.3f\nRESULT libtorch_profiler_shapes_added_us %.3f\n", on - off,
              on_shapes - off);
  return 0;
}
