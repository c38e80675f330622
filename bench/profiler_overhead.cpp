// The profiler's cost per op: host nanoseconds to issue a 1-element float32 add (result
// discarded) with no profiler, with one recording, and with one recording input shapes,
// timed in turns (batches of 200, the profiler started and stopped untimed around each
// batch of the recording variants; medians of 301 rounds). On the GPU when one is visible,
// with the stream drained untimed between batches, else on the CPU.
//
// This is the host side of the overhead target; the CUDA activity (CUPTI) adds its
// own cost per kernel, measured side by side with LibTorch's Kineto once it lands.
//
//   profiler_overhead
#include <kiln/kiln.h>

#include "bench/bench_util.h"

using namespace kiln;

int main() {
  const Device device = cuda::is_available() ? Device::cuda(0) : Device::cpu();
  constexpr int kRounds = 301, kCalls = 200;
  const Tensor a = full({1}, 1.5f, TensorOptions().device(device)), b = full({1}, 2.25f, TensorOptions().device(device));
  profiler::Profiler plain, shapes({.record_shapes = true});
  bench::Turns turns;
  auto add_once = [&] {
    Tensor r = add(a, b);
    bench::do_not_optimize(r);
  };
  turns.add("off", kCalls, add_once);
  turns.add("on", kCalls, add_once, [&] { plain.start(); }, [&] { plain.stop(); });
  turns.add("on_shapes", kCalls, add_once, [&] { shapes.start(); }, [&] { shapes.stop(); });
  turns.add("scope_off", kCalls, [] { profiler::RecordFunction scope("user_scope"); });
  turns.run(kRounds, [&] {
    if (device.is_cuda()) cuda::synchronize(device);
  });
  const double off = turns.median_ns("off") / 1e3, on = turns.median_ns("on") / 1e3,
               on_shapes = turns.median_ns("on_shapes") / 1e3;
  fmt::print("profiler_overhead: host us per 1-element float32 add on {} ({})\n", device.str(),
             bench::machine_description());
  fmt::print("median of {} rounds; each round times a batch of {} calls of every variant in turn\n\n", kRounds, kCalls);
  fmt::print("{:<46} {:>10}\n", "variant", "us/op");
  fmt::print("{:<46} {:>10.3f}\n", "add, no profiler", off);
  fmt::print("{:<46} {:>10.3f}\n", "add, profiler recording", on);
  fmt::print("{:<46} {:>10.3f}\n", "add, profiler recording shapes", on_shapes);
  fmt::print("{:<46} {:>10.3f}\n", "RecordFunction scope, no profiler", turns.median_ns("scope_off") / 1e3);
  fmt::print("\nprofiler adds {:.3f} us per op ({:.3f} us with shapes)\n", on - off, on_shapes - off);
  fmt::print("RESULT kiln_profiler_added_us {:.3f}\nRESULT kiln_profiler_shapes_added_us {:.3f}\n", on - off,
             on_shapes - off);
  return 0;
}
