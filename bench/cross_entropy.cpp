// cross_entropy on the GPU at three shapes (float32 logits [N, C], int64 targets): the
// forward (kiln::cross_entropy, one fused kernel), the same loss composed as PyTorch runs it
// (log_softmax, then nll_loss), and forward + backward as autograd will call them
// (_cross_entropy_forward, then _cross_entropy_backward with a grad_output of 1).
//   - host us/call: the host's time to issue a batch of calls (the stream is synchronised,
//     untimed, between batches, so the launch queue never fills), median of the batches;
//     a call that waited for the GPU would show its kernel time here;
//   - GPU us/call: CUDA events around back-to-back calls queued behind a spin kernel, median
//     of 9 repeats (bench/cuda_bench_util.h), the way bench/torch_cross_entropy.py times
//     PyTorch's F.cross_entropy and its backward.
//
//   cross_entropy
#include <kiln/kiln.h>

#include <cuda_runtime_api.h>

#include <algorithm>

#include "bench/bench_util.h"
#include "bench/cuda_bench_util.h"

using namespace kiln;

namespace {

struct Case {
  int64_t n, c;
};
constexpr Case kCases[] = {{256, 10}, {4096, 1000}, {32768, 32000}};

}  // namespace

int main() {
  if (!cuda::is_available()) {
    fmt::print("cross_entropy: no GPU visible\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(cuda::current_stream(gpu).id());
  fmt::print("cross_entropy: float32 logits [N, C], int64 targets, on {} ({})\n", cuda::device_properties(gpu).name,
             bench::machine_description());
  fmt::print("host: median of 51 rounds of a batch per variant; GPU: CUDA events, median of 9 repeats\n\n");
  fmt::print("{:<16} {:<40} {:>12} {:>12}\n", "shape", "variant", "host us/call", "GPU us/call");
  for (const Case& k : kCases) {
    manual_seed(0);
    const Tensor x = randn({k.n, k.c}, gpu);
    const Tensor t = (rand({k.n}, gpu) * static_cast<double>(k.c)).to(kInt64);
    const Tensor one = ones({}, gpu);
    const double elements = static_cast<double>(k.n) * static_cast<double>(k.c);
    // Few calls per batch for the large shapes, so a batch never fills the launch queue.
    const int calls = elements >= 1e8 ? 10 : elements >= 1e6 ? 50 : 200;
    const int iters = elements >= 1e8 ? 10 : 50;
    struct Variant {
      const char *key, *label;
      std::function<void()> f;
    };
    const Variant variants[] = {
        {"fwd", "cross_entropy (fused)",
         [&] { bench::do_not_optimize(cross_entropy(x, t)); }},
        {"composed_fwd", "log_softmax + nll_loss",
         [&] { bench::do_not_optimize(nll_loss(log_softmax(x, 1), t)); }},
        {"fwdbwd", "_cross_entropy_forward + _backward",
         [&] {
           const CrossEntropyForward f = _cross_entropy_forward(x, t);
           bench::do_not_optimize(_cross_entropy_backward(one, x, t, f.logsumexp, f.count));
         }},
    };
    bench::Turns turns;
    for (const Variant& v : variants) turns.add(v.key, calls, v.f);
    turns.run(51, [stream] { (void)cudaStreamSynchronize(stream); });
    const std::string shape = fmt::format("[{}, {}]", k.n, k.c), tag = fmt::format("{}x{}", k.n, k.c);
    for (const Variant& v : variants) {
      const double host_us = turns.median_ns(v.key) / 1e3;
      const double gpu_us = bench::median_gpu_ms(v.f, stream, iters) * 1e3;
      fmt::print("{:<16} {:<40} {:>12.2f} {:>12.2f}\n", shape, v.label, host_us, gpu_us);
      fmt::print("RESULT kiln_xent_{}_{}_host_us {:.3f}\nRESULT kiln_xent_{}_{}_gpu_us {:.3f}\n", v.key, tag, host_us,
                 v.key, tag, gpu_us);
    }
  }
  cuda::synchronize(gpu);  // raises a device-side error, had any call recorded one
  return 0;
}
