// Per-kernel device durations as Kiln's profiler records them, to hold against Nsight
// Compute's gpu__time_duration for the same launches (scripts/ncu_agreement.sh). The program
// runs a fixed sequence of CUDA ops whose kernels mostly take 10 us or more (float32 matmul
// with TF32 off and on, bfloat16 matmul, float32 and bfloat16 linear, add / gelu / sum on
// 2^26 float32 elements, softmax over 8192x8192, bfloat16 gelu): one warm-up pass, then
// kRepeats passes in the measured section, marked by the NVTX range "kiln_measured" so ncu
// can profile exactly those launches (--nvtx --nvtx-include "kiln_measured/").
//
// Both modes run the same host code and launch the same kernels in the same order; only
// --profile has Kiln's profiler recording the measured section. The stream is drained after
// every op in both modes, so each op starts on an idle GPU, as it does under ncu, which
// serializes the kernels it profiles.
//
//   profiler_kernel_times --profile   # one line per kernel: index, duration in ns, name
//   profiler_kernel_times --plain     # the same launches without the profiler (run under ncu)
#include <kiln/kiln.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <functional>
#include <string_view>
#include <vector>

using namespace kiln;

namespace {

constexpr int kRepeats = 5;

/// One op of the sequence: a label (for the header) and the call, result discarded.
struct Step {
  const char* label;
  std::function<void()> run;
};

/// The fixed op sequence on `gpu`; the operands live as long as the returned closures.
std::vector<Step> make_steps(Device gpu) {
  manual_seed(0);
  const TensorOptions f32 = TensorOptions(kFloat32).device(gpu);
  const int64_t n = int64_t{1} << 26, g = 4096;
  const Tensor ma = randn({g, g}, f32), mb = randn({g, g}, f32);
  const Tensor ma16 = ma.to(kBFloat16), mb16 = mb.to(kBFloat16);
  const Tensor x = randn({8192, g}, f32), w = randn({g, g}, f32) * 0.03, bias = randn({g}, f32);
  const Tensor x16 = x.to(kBFloat16), w16 = w.to(kBFloat16), bias16 = bias.to(kBFloat16);
  const Tensor a = randn({n}, f32), b = randn({n}, f32), a16 = a.to(kBFloat16);
  const Tensor rows = randn({8192, 8192}, f32);
  return {
      {"matmul float32 4096^3", [=] { (void)matmul(ma, mb); }},
      {"matmul tf32 4096^3",
       [=] {
         set_allow_tf32(true);
         (void)matmul(ma, mb);
         set_allow_tf32(false);
       }},
      {"matmul bfloat16 4096^3", [=] { (void)matmul(ma16, mb16); }},
      {"linear float32 [8192,4096]x[4096,4096]^T", [=] { (void)linear(x, w, bias); }},
      {"linear bfloat16 [8192,4096]x[4096,4096]^T", [=] { (void)linear(x16, w16, bias16); }},
      {"add float32 2^26", [=] { (void)add(a, b); }},
      {"gelu float32 2^26", [=] { (void)gelu(a); }},
      {"softmax float32 8192x8192 dim -1", [=] { (void)softmax(rows, -1); }},
      {"sum float32 2^26", [=] { (void)sum(a); }},
      {"gelu bfloat16 2^26", [=] { (void)gelu(a16); }},
  };
}

/// Runs every step once, draining the stream after each.
void run_pass(const std::vector<Step>& steps, Device gpu) {
  for (const Step& s : steps) {
    s.run();
    cuda::synchronize(gpu);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc == 2 ? argv[1] : "";
  if (mode != "--profile" && mode != "--plain") {
    fmt::print(stderr, "usage: profiler_kernel_times --profile | --plain\n");
    return 2;
  }
  if (!cuda::is_available()) {
    fmt::print("profiler_kernel_times: no GPU visible\n");
    return 1;
  }
  const Device gpu = Device::cuda(0);
  const std::vector<Step> steps = make_steps(gpu);
  set_allow_tf32(false);
  run_pass(steps, gpu);  // warm-up: cuBLAS handles and heuristics, allocator segments, clocks

  fmt::print("# profiler_kernel_times {}: {} ops x {} repeats on {}\n", mode, steps.size(), kRepeats,
             cuda::device_properties(gpu).name);
  for (const Step& s : steps) fmt::print("# op {}\n", s.label);
  fmt::print("# repeats {}\n", kRepeats);
  profiler::Profiler prof({.activities = {profiler::Activity::CPU, profiler::Activity::CUDA}});
  const bool profiling = mode == "--profile";
  if (profiling) prof.start();
  nvtxRangePushA("kiln_measured");
  {
    // Kiln's own NVTX ranges too ("kiln::addmm", ... in the domain "kiln"), which
    // scripts/nvtx_check.sh selects kernels by under ncu.
    profiler::EmitNvtx op_ranges;
    for (int r = 0; r < kRepeats; ++r) run_pass(steps, gpu);
  }
  nvtxRangePop();
  if (!profiling) return 0;
  prof.stop();

  // Kernels only: ncu profiles no memcpys or memsets. One stream, drained after every op, so
  // start order is launch order.
  std::vector<const profiler::ProfileEvent*> kernels;
  for (const profiler::ProfileEvent& e : prof.events())
    if (e.kind == profiler::EventKind::Kernel) kernels.push_back(&e);
  std::stable_sort(kernels.begin(), kernels.end(),
                   [](const auto* x, const auto* y) { return x->start_ns < y->start_ns; });
  fmt::print("# kernels {}\n# index duration_ns name\n", kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) fmt::print("{} {} {}\n", i, kernels[i]->duration_ns(), kernels[i]->name);
  return kernels.empty() ? 1 : 0;
}
