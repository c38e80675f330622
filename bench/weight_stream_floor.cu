// The floor under the MLP block at batch 64 (issue 15's "<= 12 us"): what reading the block's
// two weights costs with no arithmetic at all. At M = 64 each linear is bound by its weight's
// bytes (8 MiB of bf16 per layer), so a kernel that only streams those bytes and sums them is a
// lower bound for any kernel of the block, and two of them back to back (the second waiting
// for the first, as the down-projection waits for h) for any two-launch design. Timed the ways
// bench/skinny_gemm times the block: calls back to back behind a spin kernel (median per call,
// weights rotating through sets that fill twice the L2, so every read comes from DRAM), and as
// one CUDA graph replayed alone between two events (launch included, weights L2-warm), which
// is how examples/fused_mlp times "fused + CUDA graph" (bench/cuda_bench_util.h times both).
// Plain CUDA runtime; no Kiln library code.
//
//   weight_stream_floor        a table; the last lines are the floors
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench/cuda_bench_util.h"

namespace {

using kiln::bench::check_cuda;

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight per thread

/// When the kernel waits for the previous one (griddepcontrol.wait): before its reads (the
/// data depends on it, like h) or after them (the data does not, like a weight).
enum class Wait { Before, After };

/// Sums `n` 16-byte words of `w` into one word per block (kept so the loads are not removed).
/// Launched with programmatic dependent launch, it lets the next kernel start at once.
template <Wait kWait>
__global__ void __launch_bounds__(kThreads) stream_sum(const uint4* __restrict__ w, size_t n, unsigned* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
  if constexpr (kWait == Wait::Before) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  unsigned acc = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * kThreads;
  size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(w + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldg(w + i);
    acc += v.x ^ v.y ^ v.z ^ v.w;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kWait == Wait::After) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  for (int d = 16; d > 0; d /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, d);
  if (threadIdx.x % 32 == 0) atomicAdd(out + blockIdx.x, acc);
}

/// Launches stream_sum over `bytes` of `w` with `blocks` blocks, programmatic launch on.
void launch(Wait wait, const void* w, size_t bytes, unsigned* out, int blocks, cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  auto* kernel = wait == Wait::Before ? stream_sum<Wait::Before> : stream_sum<Wait::After>;
  check_cuda(cudaLaunchKernelEx(&cfg, kernel, static_cast<const uint4*>(w), bytes / 16, out), "launch");
}

}  // namespace

int main() {
  int dev = 0, sms = 0, l2 = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "SM count");
  check_cuda(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "L2 size");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, dev), "properties");
  const size_t bytes = size_t{1024} * 4096 * 2;  // one layer's bf16 weight, 8 MiB
  const int sets = std::max(4, static_cast<int>(2.0 * l2 / static_cast<double>(bytes)) + 1);
  std::vector<void*> w(static_cast<size_t>(2 * sets));
  for (void*& p : w) {
    check_cuda(cudaMalloc(&p, bytes), "cudaMalloc");
    check_cuda(cudaMemset(p, 0x5a, bytes), "cudaMemset");  // never read as numbers: only streamed
  }
  void* copy_dst = nullptr;
  check_cuda(cudaMalloc(&copy_dst, bytes), "cudaMalloc");
  unsigned* out = nullptr;
  check_cuda(cudaMalloc(&out, sizeof(unsigned) * 64 * static_cast<size_t>(sms)), "cudaMalloc");
  cudaStream_t s = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  std::printf("%s, %d SMs, L2 %d MiB, %d weight sets of %zu MiB; us per call, medians\n", prop.name, sms, l2 >> 20,
              2 * sets, bytes >> 20);

  int next = 0;
  auto weight = [&] { return w[static_cast<size_t>(next++ % (2 * sets))]; };
  auto per_call_us = [&](auto&& f) { return 1e3 * kiln::bench::median_gpu_ms(f, s, 20, 15, 3); };
  const double gbs = static_cast<double>(bytes) / 1e3;  // bytes / us -> GB/s

  // One kernel streaming 8 MiB from DRAM, per grid size (blocks per SM).
  double best_one = 1e30;
  int best_blocks = sms;
  for (int per_sm : {1, 2, 4, 8}) {
    const int blocks = per_sm * sms;
    const double us = per_call_us([&] { launch(Wait::Before, weight(), bytes, out, blocks, s); });
    std::printf("  one 8 MiB read, %d blocks of %d threads: %.2f us (%.0f GB/s)\n", blocks, kThreads, us, gbs / us);
    if (us < best_one) best_one = us, best_blocks = blocks;
  }
  const double copy = per_call_us([&] {
    check_cuda(cudaMemcpyAsync(copy_dst, weight(), bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  });
  std::printf("  cudaMemcpyAsync 8 MiB device to device: %.2f us (%.0f GB/s read + write)\n", copy, 2 * gbs / copy);

  // Two reads, the second waiting for the first before its reads (h) or after them (weights).
  const double pair_before = per_call_us([&] {
    launch(Wait::Before, weight(), bytes, out, best_blocks, s);
    launch(Wait::Before, weight(), bytes, out, best_blocks, s);
  });
  const double pair_after = per_call_us([&] {
    launch(Wait::Before, weight(), bytes, out, best_blocks, s);
    launch(Wait::After, weight(), bytes, out, best_blocks, s);
  });

  // The pair as one CUDA graph, weights fixed (L2-warm), each replay timed alone.
  auto graph_alone_us = [&](Wait second) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    check_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
    launch(Wait::Before, w[0], bytes, out, best_blocks, s);
    launch(second, w[1], bytes, out, best_blocks, s);
    check_cuda(cudaStreamEndCapture(s, &g), "capture end");
    check_cuda(cudaGraphInstantiate(&exec, g, 0), "instantiate");
    const double us = kiln::bench::median_alone_us([&] { check_cuda(cudaGraphLaunch(exec, s), "graph launch"); }, s);
    check_cuda(cudaGraphExecDestroy(exec), "graph exec");
    check_cuda(cudaGraphDestroy(g), "graph");
    return us;
  };
  const double graph_before = graph_alone_us(Wait::Before), graph_after = graph_alone_us(Wait::After);
  check_cuda(cudaStreamSynchronize(s), "sync");
  check_cuda(cudaGetLastError(), "last error");

  std::printf("  two 8 MiB reads back to back, the second waiting before its reads: %.2f us per pair\n", pair_before);
  std::printf("  two 8 MiB reads back to back, the second reading before its wait: %.2f us per pair\n", pair_after);
  std::printf("  the pair as one CUDA graph (L2-warm), a replay timed alone: %.2f us (waiting before), %.2f us (after)\n",
              graph_before, graph_after);
  std::printf("floor: one 8 MiB weight read %.2f us; the MLP block's two weights, back to back %.2f us, "
              "as a graph replay %.2f us\n",
              best_one, std::min(pair_before, pair_after), std::min(graph_before, graph_after));
  for (void* p : w) check_cuda(cudaFree(p), "cudaFree");
  check_cuda(cudaFree(copy_dst), "cudaFree");
  check_cuda(cudaFree(out), "cudaFree");
  check_cuda(cudaStreamDestroy(s), "stream");
  return 0;
}
