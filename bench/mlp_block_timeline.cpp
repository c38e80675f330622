// Where the MLP block's time goes between calls (issue 15's batch-64 target): the block
// (Linear 1024 -> 4096, GELU, Linear 4096 -> 1024) eager, fused and interpreted, and fused as a
// CUDA graph. Per variant, `calls` calls back to back, three ways:
// - throughput: CUDA events around the calls (as side_by_side_fused_mlp times them);
// - host: the wall time of enqueueing them behind a long GEMM, so the device never waits and
//   the host's own cost per call shows;
// - device: the same queued behind the GEMM under Kiln's profiler (CUPTI kernel timestamps):
//   medians over calls of the span from a call's first device event to its last end, the gap
//   since the previous call's last end, and each event's duration and the gap before it.
// Device events are grouped into calls by start order, `calls` equal groups: where a call's
// kernels overlap the next call's (programmatic dependent launch, eager calls) the per-event rows
// mix the two, while the per-call time (first start to last end over all calls, divided by
// `calls`) does not depend on the grouping. Weights are the block's one set (L2-warm), unlike
// side_by_side_fused_mlp's rotating sets. The CUDA graph's node count comes first.
//
//   mlp_block_timeline [--batch 64] [--calls 40] [--dtype bfloat16|float32]
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "graph/cuda_graph.h"

namespace {

using namespace kiln;
using kiln::bench::median;

/// Times `calls` calls of `call` three ways (see the file comment) and prints the medians.
void timeline(const char* title, int calls, const std::function<void()>& spin, const std::function<void()>& call) {
  const Device gpu = Device::cuda(0);
  for (int i = 0; i < 5; ++i) call();  // warm
  cuda::synchronize(gpu);
  // Throughput, as the side-by-side benchmark measures it.
  Event start(gpu, true), stop(gpu, true);
  start.record(cuda::current_stream(gpu));
  for (int i = 0; i < calls; ++i) call();
  stop.record(cuda::current_stream(gpu));
  stop.synchronize();
  const double throughput_us = 1e3 * static_cast<double>(start.elapsed_ms(stop)) / calls;
  // Host: enqueueing behind the spin GEMM.
  spin();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  const auto t1 = std::chrono::steady_clock::now();
  cuda::synchronize(gpu);
  const double host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
  // Device: the same under the profiler.
  int64_t spin_events = 0;
  profiler::Profiler prof;
  {
    profiler::ProfileGuard recording(prof);
    spin();
    cuda::synchronize(gpu);
  }
  for (const profiler::ProfileEvent& e : prof.events()) spin_events += profiler::on_device(e.kind) ? 1 : 0;
  profiler::Profiler prof_calls;
  {
    profiler::ProfileGuard recording(prof_calls);
    spin();
    for (int i = 0; i < calls; ++i) call();
    cuda::synchronize(gpu);
  }
  std::printf("%s: throughput %.2f us per call (events), host %.2f us per call (enqueued behind a GEMM)\n", title,
              throughput_us, host_us);
  std::vector<const profiler::ProfileEvent*> device;
  for (const profiler::ProfileEvent& e : prof_calls.events())
    if (profiler::on_device(e.kind)) device.push_back(&e);
  std::sort(device.begin(), device.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
  if (static_cast<int64_t>(device.size()) <= spin_events) {
    std::printf("%s: no device events recorded for the calls\n", title);
    return;
  }
  device.erase(device.begin(), device.begin() + spin_events);  // the spin GEMM's
  const size_t per_call = device.size() / static_cast<size_t>(calls);
  if (per_call == 0 || device.size() % static_cast<size_t>(calls) != 0) {
    std::printf("%s: %zu device events for %d calls: not a whole number per call\n", title, device.size(), calls);
    return;
  }
  std::vector<double> span, gap_before;
  std::vector<std::vector<double>> duration(per_call), gap(per_call);
  int64_t previous_end = 0;  // the previous call's last end
  for (int c = 0; c < calls; ++c) {
    const size_t first = static_cast<size_t>(c) * per_call;
    int64_t last_end = device[first]->end_ns;
    for (size_t k = 0; k < per_call; ++k) {
      const profiler::ProfileEvent& e = *device[first + k];
      duration[k].push_back(1e-3 * static_cast<double>(e.duration_ns()));
      if (k > 0) gap[k].push_back(1e-3 * static_cast<double>(e.start_ns - device[first + k - 1]->end_ns));
      last_end = std::max(last_end, e.end_ns);
    }
    span.push_back(1e-3 * static_cast<double>(last_end - device[first]->start_ns));
    if (c > 0) gap_before.push_back(1e-3 * static_cast<double>(device[first]->start_ns - previous_end));
    previous_end = last_end;
  }
  const double total = 1e-3 * static_cast<double>(device.back()->end_ns - device.front()->start_ns);
  std::printf("%s: %zu device events per call; per call %.2f us (first start to last end over %d calls)\n", title,
              per_call, total / calls, calls);
  std::printf("  median span %.2f us, median gap before a call %.2f us\n", median(span), median(gap_before));
  for (size_t k = 0; k < per_call; ++k)
    std::printf("  event %zu: %8.2f us, gap before %6.2f us  %.90s\n", k, median(duration[k]),
                k > 0 ? median(gap[k]) : 0.0, device[k]->name.c_str());
  std::printf("RESULT mlp_timeline %s throughput_us=%.2f host_us=%.2f device_per_call_us=%.2f span_us=%.2f gap_us=%.2f\n",
              title, throughput_us, host_us, total / calls, median(span), median(gap_before));
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 64;
  int calls = 40;
  std::string dtype = "bfloat16";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batch")) batch = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--calls")) calls = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dtype")) dtype = argv[i + 1];
  }
  if (!cuda::is_available()) {
    std::printf("mlp_block_timeline: no CUDA device, nothing to measure\n");
    return 0;
  }
  if (batch < 1 || calls < 2 || (dtype != "bfloat16" && dtype != "float32")) {
    std::fprintf(stderr, "mlp_block_timeline: --batch >= 1, --calls >= 2, --dtype bfloat16|float32\n");
    return 2;
  }
  try {
    const Device device = Device::cuda(0);
    const DType dt = dtype == "bfloat16" ? kBFloat16 : kFloat32;
    manual_seed(0);
    NoGradGuard no_grad;
    nn::MLP model({.sizes = {1024, 4096, 1024}, .activation = nn::Activation::GELU});
    model.to(device, dt);
    model.eval();
    const Tensor x = randn({batch, 1024}, TensorOptions().device(device).dtype(dt));
    graph::Graph captured = graph::capture(model, {x});
    graph::fuse_linear_gelu(captured);
    graph::Executable fused = graph::compile(captured);
    graph::Executable graphed = graph::compile(captured, {.cuda_graph = true});
    (void)graphed({x});  // eager warm-up
    (void)graphed({x});  // captures
    const Tensor graph_input = graphed.static_inputs()->at(0);
    std::printf("mlp_block_timeline: %s batch %lld; the CUDA graph holds %zu nodes\n", dtype.c_str(),
                static_cast<long long>(batch), graphed.cuda_graph()->num_nodes());
    const Tensor a = randn({8192, 8192}, TensorOptions().device(device).dtype(dt));
    const auto spin = [&] { (void)matmul(a, a); };
    timeline("eager", calls, spin, [&] { (void)model(x); });
    timeline("fused", calls, spin, [&] { (void)fused({x}); });
    timeline("fused+graph", calls, spin, [&] { (void)graphed({graph_input}); });
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
