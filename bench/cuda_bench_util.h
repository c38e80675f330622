// GPU timing helpers shared by the CUDA benchmarks (Kiln's and the LibTorch side's), plain
// CUDA runtime only so both projects can compile them:
//   - bare_launch: an empty <<<1,1>>> kernel, the floor of any eager CUDA op's host cost;
//   - gpu_sleep: a spin kernel that keeps the GPU busy while the host queues the timed
//     work, so back-to-back GPU time is measured even when one call is shorter than its
//     host-side launch (small GEMMs);
//   - median_gpu_ms: CUDA-event timing of `iters` queued calls after warm-up, median over
//     repeats, per call;
//   - median_alone_us: one call at a time between two events, launch included (a graph replay);
//   - check_cuda: a CUDA status or exit with a message.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string_view>

namespace kiln::bench {

/// linear(x [M, K], weight [N, K]) at the GEMM target shapes.
struct GemmShape {
  int64_t m, k, n;
  /// 2*M*N*K: one multiply and one add per term.
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};
inline constexpr GemmShape kGemmShapes[] = {{64, 1024, 4096}, {4096, 1024, 4096}, {8192, 4096, 16384}};

/// Calls per timed repeat for about 20 ms of GPU work at `flops` per call in `mode`
/// ("float32" is true fp32 at roughly 50 TFLOP/s; tf32 and bfloat16 roughly 400).
inline int gemm_iters(double flops, std::string_view mode) {
  const double rough_ms = flops / (mode == "float32" ? 50e9 : 400e9);
  return static_cast<int>(std::clamp(20.0 / rough_ms, 5.0, 200.0));
}

/// Launches an empty kernel with one thread on `stream`.
void bare_launch(cudaStream_t stream);

/// Launches an empty kernel with one thread whose parameters are the size of an elementwise
/// kernel's (an element count, a functor, three pointers), to see what arguments cost.
void bare_launch_with_args(cudaStream_t stream, const void* a, const void* b, void* out);

/// Queues a kernel that spins for about `ms` milliseconds on `stream`.
void gpu_sleep(cudaStream_t stream, double ms);

/// Exits with a message naming `what` when `status` is a CUDA error (the benchmarks' check).
void check_cuda(cudaError_t status, const char* what);

/// Median GPU microseconds of one call of `f` (which queues its work on `stream`) timed alone:
/// event, call, event, synchronise, so the launch's latency counts (how a CUDA graph replay's
/// latency is read). `warmup` untimed calls first, then `calls` timed ones.
double median_alone_us(const std::function<void()>& f, cudaStream_t stream, int calls = 200, int warmup = 20);

/// Median GPU milliseconds per call of `f` (which queues its work on `stream`): `warmup`
/// untimed calls, then `repeats` times: spin, event, `iters` calls, event.
double median_gpu_ms(const std::function<void()>& f, cudaStream_t stream, int iters = 20, int repeats = 9,
                     int warmup = 3);

}  // namespace kiln::bench
