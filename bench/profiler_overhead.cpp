// The profiler's cost per op: host nanoseconds to issue a 1-element float32 add (result
// discarded) with no profiler, with one recording CPU and CUDA activity (CUPTI kernel, memcpy and
// memset records: the "recording" figure), with one recording input
// shapes too, and with one recording CPU activity only; timed in turns (batches of 200, the
// profiler started, with one op run, and stopped untimed around each batch of the recording
// variants; medians of 301 rounds); and the fixed cost of a whole one-op profile. On a GPU it
// also times the add under CUPTI's kernel records alone, set up here with no profiler: the
// floor that any profiler built on CUPTI's activity API pays per launch on this host, so that
// the profiler's own share (recording minus that floor) can be told apart from CUPTI's; and
// the same with each of the two CUPTI ways to tie a kernel to its launch added (latency
// timestamps, the profiler's; runtime-API records, Kineto's). On the GPU when one is visible,
// with the stream drained untimed between batches, else on the CPU. "off" is also timed before the first profile,
// because once CUPTI has been enabled in a process its hooks may cost launches something even while no profile records.
// bench/libtorch/libtorch_profiler_overhead.cpp measures Kineto the same way; the GPU check runs both and compares the
// added microseconds. Here the profiler detaches CUPTI at every stop (CuptiTeardown::Finalize,
// not its default of detaching after 1 s idle): the CUPTI-alone variants set CUPTI up and
// finalize it themselves, so each variant must find CUPTI detached, and "off" is then timed
// with CUPTI detached, as before issue 13. Start-up costs: bench/profiler_startup.cpp.
//
//   profiler_overhead
#include <kiln/kiln.h>

#include "bench/bench_util.h"
#include "profiler/device_tracer.h"

#ifdef KILN_WITH_CUDA
#include <cupti.h>

#include <cstdlib>
#endif

using namespace kiln;

#ifdef KILN_WITH_CUDA
// CUPTI's kernel records with nothing else: buffers dropped unread, CUPTI finalized after
// each batch as the profiler does. Optionally with one of the two ways to tie a kernel to the
// host call that launched it: latency timestamps (each record's queued time; the profiler's
// way) or runtime-API records of the launch calls (their thread and host times; Kineto's).
namespace cupti_floor {
enum class Tie { None, LatencyTimestamps, RuntimeRecords };
constexpr CUpti_CallbackId kLaunchCalls[] = {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                             CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000};
void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, size_t{4} << 20));
  *size = *buffer != nullptr ? size_t{4} << 20 : 0;
  *max_records = 0;
}
void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t) { std::free(buffer); }
bool start(Tie tie) {
  bool ok = cuptiActivityRegisterCallbacks(requested, completed) == CUPTI_SUCCESS;
  if (tie == Tie::LatencyTimestamps) ok = ok && cuptiActivityEnableLatencyTimestamps(1) == CUPTI_SUCCESS;
  if (tie == Tie::RuntimeRecords)
    for (CUpti_CallbackId id : kLaunchCalls) ok = ok && cuptiActivityEnableRuntimeApi(id, 1) == CUPTI_SUCCESS;
  return ok && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
}
void stop(Tie tie) {
  cuda::synchronize();
  (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (tie == Tie::LatencyTimestamps) (void)cuptiActivityEnableLatencyTimestamps(0);
  if (tie == Tie::RuntimeRecords)
    for (CUpti_CallbackId id : kLaunchCalls) (void)cuptiActivityEnableRuntimeApi(id, 0);
  (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  (void)cuptiFinalize();
}
}  // namespace cupti_floor
#endif

int main() {
  profiler::DeviceTracerSetup setup = profiler::DeviceTracer::setup();
  setup.teardown = profiler::CuptiTeardown::Finalize;  // see the file comment
  profiler::DeviceTracer::set_setup(setup);
  const Device device = cuda::is_available() ? Device::cuda(0) : Device::cpu();
  constexpr int kRounds = 301, kCalls = 200;
  const Tensor a = full({1}, 1.5f, TensorOptions().device(device)),
               b = full({1}, 2.25f, TensorOptions().device(device));
  profiler::Profiler plain, shapes({.record_shapes = true}), cpu_only({.activities = {profiler::Activity::CPU}});
  auto add_once = [&] {
    Tensor r = add(a, b);
    bench::do_not_optimize(r);
  };
  auto drain = [&] {
    if (device.is_cuda()) cuda::synchronize(device);
  };
  bench::Turns before_any_profile;
  before_any_profile.add("off", kCalls, add_once);
  before_any_profile.run(kRounds, drain);

  bench::Turns turns;
  turns.add("off", kCalls, add_once);
  // Each recording batch starts its profiler and runs one op untimed first: the figures are
  // the steady cost while recording; the one-time cost of a profile (start, CUPTI's set-up,
  // the first op, stop with its flush) is timed apart as "one-op profile".
  auto starting = [&](profiler::Profiler& p) {
    return [&] {
      p.start();
      add_once();
      drain();
    };
  };
  turns.add("on", kCalls, add_once, starting(plain), [&] { plain.stop(); });
  turns.add("on_shapes", kCalls, add_once, starting(shapes), [&] { shapes.stop(); });
  bool floor_measured = false;
#ifdef KILN_WITH_CUDA
  if (device.is_cuda()) {
    floor_measured = true;
    using cupti_floor::Tie;
    for (const auto& [name, tie] :
         {std::pair{"cupti_kernel_records", Tie::None}, std::pair{"cupti_latency_timestamps", Tie::LatencyTimestamps},
          std::pair{"cupti_runtime_records", Tie::RuntimeRecords}})
      turns.add(
          name, kCalls, add_once,
          [&, tie] {
            floor_measured = cupti_floor::start(tie) && floor_measured;
            add_once();
            drain();
          },
          [tie] { cupti_floor::stop(tie); });
  }
#endif
  turns.add("on_cpu_only", kCalls, add_once, starting(cpu_only), [&] { cpu_only.stop(); });
  turns.add("one_op_profile", 1, [&] {
    plain.start();
    add_once();
    plain.stop();
  });
  turns.add("scope_off", kCalls, [] { profiler::RecordFunction scope("user_scope"); });
  turns.run(kRounds, drain);
  const double off = turns.median_ns("off") / 1e3, on = turns.median_ns("on") / 1e3,
               on_shapes = turns.median_ns("on_shapes") / 1e3, on_cpu = turns.median_ns("on_cpu_only") / 1e3,
               off_first = before_any_profile.median_ns("off") / 1e3;
  fmt::print("profiler_overhead: host us per 1-element float32 add on {} ({})\n", device.str(),
             bench::machine_description());
  fmt::print("median of {} rounds; each round times a batch of {} calls of every variant in turn\n\n", kRounds, kCalls);
  fmt::print("device activity: {}\n\n",
             plain.device_activity_status().empty() ? std::string("recorded (CUPTI)") : plain.device_activity_status());
  fmt::print("{:<46} {:>10}\n", "variant", "us/op");
  fmt::print("{:<46} {:>10.3f}\n", "add, before the first profile", off_first);
  fmt::print("{:<46} {:>10.3f}\n", "add, no profiler", off);
  fmt::print("{:<46} {:>10.3f}\n", "add, profiler recording (CPU + CUDA)", on);
  fmt::print("{:<46} {:>10.3f}\n", "add, profiler recording shapes", on_shapes);
  fmt::print("{:<46} {:>10.3f}\n", "add, profiler recording CPU only", on_cpu);
  if (floor_measured) {
    fmt::print("{:<46} {:>10.3f}\n", "add, CUPTI kernel records alone (no profiler)",
               turns.median_ns("cupti_kernel_records") / 1e3);
    fmt::print("{:<46} {:>10.3f}\n", "  + latency timestamps", turns.median_ns("cupti_latency_timestamps") / 1e3);
    fmt::print("{:<46} {:>10.3f}\n", "  + runtime-API records of launches",
               turns.median_ns("cupti_runtime_records") / 1e3);
  }
  fmt::print("{:<46} {:>10.3f}\n", "RecordFunction scope, no profiler", turns.median_ns("scope_off") / 1e3);
  fmt::print("{:<46} {:>10.3f}\n", "one-op profile: start, add, stop (us)", turns.median_ns("one_op_profile") / 1e3);
  fmt::print("\nprofiler adds {:.3f} us per op ({:.3f} us with shapes)\n", on - off, on_shapes - off);
  fmt::print("CPU-only recording adds {:.3f} us; no-profiler calls after profiling differ by {:+.3f} us\n",
             on_cpu - off, off - off_first);
  fmt::print("RESULT kiln_profiler_added_us {:.3f}\nRESULT kiln_profiler_shapes_added_us {:.3f}\n", on - off,
             on_shapes - off);
  fmt::print("RESULT kiln_profiler_off_us {:.3f}\nRESULT kiln_profiler_on_us {:.3f}\n", off, on);
  if (floor_measured) {
    const double floor = turns.median_ns("cupti_kernel_records") / 1e3 - off;
    fmt::print(
        "CUPTI's kernel records alone add {:.3f} us per op on this host; the profiler's own share is {:.3f} us\n",
        floor, on - off - floor);
    fmt::print("RESULT kiln_profiler_cupti_floor_us {:.3f}\n", floor);
    const double latency = turns.median_ns("cupti_latency_timestamps") / 1e3 - off - floor,
                 runtime = turns.median_ns("cupti_runtime_records") / 1e3 - off - floor;
    fmt::print(
        "tying kernels to their launch on top of that: latency timestamps {:+.3f} us, runtime-API records {:+.3f} us\n",
        latency, runtime);
    fmt::print("RESULT kiln_profiler_cupti_tie_latency_us {:.3f}\nRESULT kiln_profiler_cupti_tie_runtime_us {:.3f}\n",
               latency, runtime);
  }
  return 0;
}
