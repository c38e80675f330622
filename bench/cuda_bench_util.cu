// GPU timing helpers for the CUDA benchmarks (see cuda_bench_util.h).
#include "cuda_bench_util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace kiln::bench {

namespace {

__global__ void empty_kernel() {}

struct Functor {
  float alpha;
};
__global__ void empty_kernel_with_args(long long, Functor, float*, const float*, const float*) {}

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

void bare_launch(cudaStream_t stream) { empty_kernel<<<1, 1, 0, stream>>>(); }

void bare_launch_with_args(cudaStream_t stream, const void* a, const void* b, void* out) {
  empty_kernel_with_args<<<1, 1, 0, stream>>>(1, Functor{1.0f}, static_cast<float*>(out), static_cast<const float*>(a),
                                              static_cast<const float*>(b));
}

void gpu_sleep(cudaStream_t stream, double ms) {
  int device = 0, khz = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device), "cudaDeviceGetAttribute(clock rate)");
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<long long>(ms * khz));
  check_cuda(cudaGetLastError(), "spin kernel launch");
}

double median_gpu_ms(const std::function<void()>& f, cudaStream_t stream, int iters, int repeats, int warmup) {
  for (int i = 0; i < warmup; ++i) f();
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> per_call;
  for (int r = 0; r < repeats; ++r) {
    gpu_sleep(stream, 5.0);  // the host queues the calls while this runs
    check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) f();
    check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    per_call.push_back(static_cast<double>(ms) / iters);
  }
  check_cuda(cudaEventDestroy(start), "cudaEventDestroy");
  check_cuda(cudaEventDestroy(stop), "cudaEventDestroy");
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

double median_alone_us(const std::function<void()>& f, cudaStream_t stream, int calls, int warmup) {
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> us;
  for (int i = 0; i < warmup + calls; ++i) {
    check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
    f();
    check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (i >= warmup) us.push_back(static_cast<double>(ms) * 1e3);
  }
  check_cuda(cudaEventDestroy(start), "cudaEventDestroy");
  check_cuda(cudaEventDestroy(stop), "cudaEventDestroy");
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace kiln::bench
