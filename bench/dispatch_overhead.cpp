// Eager dispatch overhead on the CPU: nanoseconds per 1-element add through kiln::add
// (validation, type promotion, op scope, output allocation, kernel lookup, kernel) against
// the same registered CPU kernel called directly on preallocated tensors, and against a
// bare C++ float addition. The difference is what Kiln's front end costs per op.
#include <kiln/kiln.h>

#include "bench/bench_util.h"
#include "ops/kernels.h"

using namespace kiln;

int main() {
  constexpr int kRepeats = 21, kCalls = 20000;
  const Tensor a = full({1}, 1.5f), b = full({1}, 2.25f);
  Tensor out = empty({1});
  const auto kernel = dispatch::binary_kernels.get("add", Device::cpu());

  float fa = 1.5f, fb = 2.25f;
  bench::Turns turns;
  turns.add("bare", kCalls, [&] {
    bench::do_not_optimize(fa);
    float r = fa + fb;
    bench::do_not_optimize(r);
  });
  turns.add("kernel", kCalls, [&] {
    kernel(BinaryOp::Add, out, a, b, 1);
    bench::do_not_optimize(out);
  });
  turns.add("empty", kCalls, [&] {
    Tensor t = empty({1});
    bench::do_not_optimize(t);
  });
  turns.add("add", kCalls, [&] {
    Tensor r = add(a, b);
    bench::do_not_optimize(r);
  });
  turns.add("operator", kCalls, [&] {
    Tensor r = a + b;
    bench::do_not_optimize(r);
  });
  turns.run(kRepeats);
  const double bare_cpp = turns.median_ns("bare"), bare_kernel = turns.median_ns("kernel");
  const double alloc_only = turns.median_ns("empty"), through_kiln = turns.median_ns("add");
  const double through_operator = turns.median_ns("operator");

  fmt::print("dispatch_overhead: 1-element float32 add on the CPU ({})\n", bench::machine_description());
  fmt::print("median of {} rounds; each round times a batch of {} calls of every variant in turn\n\n", kRepeats, kCalls);
  fmt::print("{:<52} {:>10}\n", "path", "ns/op");
  fmt::print("{:<52} {:>10.1f}\n", "bare C++ float add", bare_cpp);
  fmt::print("{:<52} {:>10.1f}\n", "registered CPU kernel, preallocated output", bare_kernel);
  fmt::print("{:<52} {:>10.1f}\n", "empty({1}) alone (output allocation)", alloc_only);
  fmt::print("{:<52} {:>10.1f}\n", "kiln::add(a, b)", through_kiln);
  fmt::print("{:<52} {:>10.1f}\n", "a + b", through_operator);
  fmt::print("\nkiln::add over the bare kernel: {:.1f} ns/op ({:.1f}x the kernel call)\n", through_kiln - bare_kernel,
             through_kiln / bare_kernel);
  return 0;
}
