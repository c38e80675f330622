// The article's MLP block (Linear 1024->4096, GELU, Linear 4096->1024), forward, Kiln and
// LibTorch's C++ API in one process on one GPU, in turns: Kiln eager, Kiln fused (captured,
// graph::fuse_linear_gelu, interpreter), Kiln fused + CUDA graph; LibTorch eager, LibTorch with
// _addmm_activation (cuBLASLt's tanh-GELU epilogue) and LibTorch's eager block as a CUDA graph.
// Issue 15's targets read from this table: at batch 64 bf16 Kiln fused + CUDA graph <= 12 us, at
// batch 4096 bf16 Kiln fused <= 0.8x LibTorch eager.
//
// Method (the tool library's METHOD.md): each round queues `calls` calls of one variant back to
// back, rotating through `sets` weight sets and inputs (16 sets: 256 MB of bf16 weights, so the
// 50 MB L2 never holds the set a call reads), timed with CUDA events on the default stream
// (host and device both: a call is over when the device drains); medians of the rounds.
// The floor printed: reading both weight matrices once at the device's memory bandwidth, and
// the GEMM FLOPs at the dense tensor-core peak (989 TFLOP/s bf16 on an H200, 494 TF32).
//
//   side_by_side_fused_mlp [--dtype bfloat16|float32|tf32|all] [--batch N ...] [--rounds 15]
//                          [--calls 32] [--sets 16]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "side_by_side_fused_mlp.h"

namespace {

using kiln::bench::median;

// Microseconds per call for `calls` queued calls (call i on set i % sets), device drained.
double time_calls(const std::function<void(int)>& call, int calls, int sets) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaDeviceSynchronize();
  cudaEventRecord(start);
  for (int i = 0; i < calls; ++i) call(i % sets);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1e3 * ms / calls;
}

}  // namespace

int main(int argc, char** argv) {
  namespace m = side_by_side::mlp;
  std::vector<std::string> dtypes = {"bfloat16", "float32", "tf32"};
  std::vector<int64_t> batches;
  int rounds = 15, calls = 32, sets = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--dtype")) {
      if (std::strcmp(argv[i + 1], "all")) dtypes = {argv[i + 1]};
    } else if (!std::strcmp(argv[i], "--batch")) batches.push_back(std::atoll(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--calls")) calls = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--sets")) sets = std::atoi(argv[i + 1]);
  }
  if (batches.empty()) batches = {64, 4096};
  if (rounds < 1 || calls < 1 || sets < 1) {
    std::fprintf(stderr, "side_by_side_fused_mlp: --rounds, --calls and --sets must be positive\n");
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int bus_bits = 0, mem_khz = 0;
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0);
  const double bandwidth = 2.0 * mem_khz * 1e3 * bus_bits / 8;  // bytes/s, double data rate
  std::printf("side_by_side_fused_mlp: MLP 1024 -> 4096 (exact GELU) -> 1024, forward; %s (%.2f TB/s), LibTorch %s; "
              "%d rounds x %d calls over %d weight sets\n",
              prop.name, bandwidth / 1e12, m::torch_version_string(), rounds, calls, sets);
  std::printf("%-9s %6s %9s %9s %9s | %9s %9s %9s | %8s %8s %8s %8s | %9s %8s\n", "dtype", "batch", "kiln eag",
              "kiln fus", "kiln f+g", "lt eager", "lt addact", "lt graph", "fus/lt", "f+g/ltg", "floor us", "rel.err",
              "fus noPDL", "nPDL/lt");
  for (const std::string& dtype : dtypes) {
    const double element = dtype == "bfloat16" ? 2 : 4;
    for (int64_t batch : batches) {
      m::kiln_setup(dtype, batch, sets);
      m::torch_setup(dtype, batch, sets);
      const double err = m::kiln_check();
      const std::vector<std::function<void(int)>> variants = {
          [](int s) { m::kiln_call(m::KilnVariant::Eager, s); },
          [](int s) { m::kiln_call(m::KilnVariant::Fused, s); },
          [](int s) { m::kiln_call(m::KilnVariant::FusedCudaGraph, s); },
          [](int s) { m::torch_call(m::TorchVariant::Eager, s); },
          [](int s) { m::torch_call(m::TorchVariant::AddmmActivation, s); },
          [](int s) { m::torch_call(m::TorchVariant::CudaGraph, s); },
          [](int s) { m::kiln_call(m::KilnVariant::FusedNoPdl, s); }};
      for (const auto& v : variants) (void)time_calls(v, calls, sets);  // warm-up: caches, plans
      std::vector<std::vector<double>> us(variants.size());
      for (int r = 0; r < rounds; ++r)
        for (size_t v = 0; v < variants.size(); ++v) us[v].push_back(time_calls(variants[v], calls, sets));
      std::vector<double> med;
      for (const auto& u : us) med.push_back(median(u));
      const double weight_bytes = 2.0 * 4096 * 1024 * element;
      const double floor_us = 1e6 * (weight_bytes + element * batch * (1024 + 1024)) / bandwidth;
      std::printf("%-9s %6lld %9.1f %9.1f %9.1f | %9.1f %9.1f %9.1f | %8.3f %8.2f %8.1f %8.1e | %9.1f %8.3f\n",
                  dtype.c_str(), static_cast<long long>(batch), med[0], med[1], med[2], med[3], med[4], med[5],
                  med[1] / med[3], med[2] / med[5], floor_us, err, med[6], med[6] / med[3]);
      const char* names[] = {"kiln_eager",     "kiln_fused",         "kiln_fused_graph", "libtorch_eager",
                             "libtorch_addmm_act", "libtorch_graph", "kiln_fused_no_pdl"};
      for (size_t v = 0; v < med.size(); ++v)
        std::printf("RESULT mlp_%s_b%lld_%s_us %.2f\n", dtype.c_str(), static_cast<long long>(batch), names[v], med[v]);
      std::fflush(stdout);
      m::kiln_teardown();
      m::torch_teardown();
    }
  }
  std::printf("(fus/lt: Kiln fused / LibTorch eager; f+g/ltg: Kiln fused + CUDA graph / LibTorch CUDA graph; "
              "below 1 is Kiln faster. lt addact: _addmm_activation, tanh GELU. fus noPDL: Kiln fused with the sm_90a "
              "linear+GELU kernel launched without programmatic dependent launch)\n");
  return 0;
}
