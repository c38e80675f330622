// gelu_fast (ops/cuda/gelu_fast.cuh) on every one of the 65536 inputs of bfloat16 and float16,
// against float64, on the GPU: the same criteria as tests/cuda/test_cuda_basics.cpp's check of
// the unary op (correctly rounded or one unit in the last place off; a true value below the
// type's smallest normal may be flushed), for the shipped fits, the scaled bfloat16 one, v8-v12's (V9), v5-v7's degree-5 one and
// Numerical Recipes' degree-9 one, plus the worst relative error of the float result. Part of
// the sm_90a benchmark harness (bench/sm90_linear_gelu_check.cu, mode `gelu`), which needs no
// Kiln build; the conversions are the explicit intrinsics (round to nearest), so nothing but
// gelu_fast is under test.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "../ops/cuda/gelu_fast.cuh"

namespace kiln_bench {

/// out[i] = gelu_fast<T, F>(in[i]) rounded to T (bit patterns), wide[i] the float result.
template <typename T, kiln::cuda_kernels::GeluFit F>
__global__ void gelu_every_value_kernel(const uint16_t* in, uint16_t* out, float* wide) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= 65536) return;
  float g;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    g = kiln::cuda_kernels::gelu_fast<T, F>(__bfloat162float(__ushort_as_bfloat16(in[i])));
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(g));
  } else {
    g = kiln::cuda_kernels::gelu_fast<T, F>(__half2float(__ushort_as_half(in[i])));
    out[i] = __half_as_ushort(__float2half_rn(g));
  }
  wide[i] = g;
}

/// The value of the 16-bit pattern `bits` of T.
template <typename T>
double value_of(uint16_t bits) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(__ushort_as_bfloat16(bits));
  else return __half2float(__ushort_as_half(bits));
}

/// The bit pattern of v rounded to T.
template <typename T>
uint16_t bits_of(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  else return __half_as_ushort(__float2half_rn(v));
}

/// Checks gelu_fast<T, F> on all inputs of T; prints one RESULT line; 0 when none is off by
/// more than one unit in the last place (or, below the smallest normal, above it), 1 otherwise.
template <typename T, kiln::cuda_kernels::GeluFit F>
int gelu_every_value_of() {
  const char* name = std::is_same_v<T, __nv_bfloat16> ? "bf16" : "f16";
  using kiln::cuda_kernels::GeluFit;
  const char* fit = F == GeluFit::Shipped   ? "shipped"
                    : F == GeluFit::Scaled  ? "scaled"
                    : F == GeluFit::V9      ? "v9"
                    : F == GeluFit::Degree5 ? "degree 5"
                                            : "degree 9";
  std::vector<uint16_t> in(65536), out(65536);
  std::vector<float> wide(65536);
  for (uint32_t b = 0; b < 65536; ++b) in[b] = static_cast<uint16_t>(b);
  uint16_t *din = nullptr, *dout = nullptr;
  float* dwide = nullptr;
  bool ok = cudaMalloc(&din, 2 * 65536) == cudaSuccess && cudaMalloc(&dout, 2 * 65536) == cudaSuccess &&
            cudaMalloc(&dwide, 4 * 65536) == cudaSuccess &&
            cudaMemcpy(din, in.data(), 2 * 65536, cudaMemcpyHostToDevice) == cudaSuccess;
  if (ok) {
    gelu_every_value_kernel<T, F><<<256, 256>>>(din, dout, dwide);
    ok = cudaGetLastError() == cudaSuccess &&
         cudaMemcpy(out.data(), dout, 2 * 65536, cudaMemcpyDeviceToHost) == cudaSuccess &&
         cudaMemcpy(wide.data(), dwide, 4 * 65536, cudaMemcpyDeviceToHost) == cudaSuccess;
  }
  cudaFree(din);
  cudaFree(dout);
  cudaFree(dwide);
  if (!ok) {
    std::printf("RESULT gelu (%s fit) %s: CUDA error\n", fit, name);
    return 1;
  }
  const double smallest_normal = std::is_same_v<T, __nv_bfloat16> ? 0x1p-126 : 0x1p-14;
  int64_t off_by_one = 0, bad = 0, below_normal_inexact = 0, tail_flushed = 0;
  double worst_rel = 0, worst_at = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const double v = value_of<T>(in[b]);
    const double want = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    const double got = value_of<T>(out[b]);
    if (std::isnan(want)) {  // NaN in, or -inf * 0
      bad += std::isnan(got) ? 0 : 1;
      continue;
    }
    if (std::fabs(want) >= std::max(0x1p-122, smallest_normal) && std::isfinite(want)) {
      const double rel = std::fabs(static_cast<double>(wide[b]) - want) / std::fabs(want);
      if (rel > worst_rel) worst_rel = rel, worst_at = v;
    }
    const uint16_t want_bits = bits_of<T>(static_cast<float>(want));
    if (std::fabs(want) < smallest_normal) {
      const bool fine = std::fabs(got) <= smallest_normal;
      bad += fine ? 0 : 1;
      below_normal_inexact += (fine && out[b] != want_bits) ? 1 : 0;
      continue;
    }
    const int d = std::abs(static_cast<int>(want_bits) - static_cast<int>(out[b]));
    // bfloat16 results in [2^-126, 2^-122) flushed to a zero of the right sign: counted apart
    // (the shipped fit's exp2 flushes h below 2^-126 there; gelu_fast.cuh).
    if (d > 1 && got == 0 && std::signbit(got) == std::signbit(want) && std::fabs(want) < 0x1p-122 &&
        std::is_same_v<T, __nv_bfloat16>) {
      ++tail_flushed;
      continue;
    }
    if (d > 1) {
      if (bad < 5)
        std::printf("  %s gelu(%.9g) = %.9g (float %.9g), want %.9g\n", name, v, got, static_cast<double>(wide[b]),
                    want);
      ++bad;
    }
    off_by_one += d == 1 ? 1 : 0;
  }
  std::printf("RESULT gelu (%s fit) %s: %lld of 65536 more than 1 ulp off, %lld one ulp off, %lld true values "
              "below the smallest normal not correctly rounded, %lld in [2^-126, 2^-122) flushed to zero; worst float "
              "relative error %.2e at x = %.6g (of results above 2^-122 and normal)\n",
              fit, name, static_cast<long long>(bad), static_cast<long long>(off_by_one),
              static_cast<long long>(below_normal_inexact), static_cast<long long>(tail_flushed), worst_rel, worst_at);
  return bad == 0 ? 0 : 1;
}

/// Both types, every fit; 0 when every check passes.
inline int gelu_fast_every_value() {
  using kiln::cuda_kernels::GeluFit;
  return gelu_every_value_of<__nv_bfloat16, GeluFit::Shipped>() | gelu_every_value_of<__half, GeluFit::Shipped>() |
         gelu_every_value_of<__nv_bfloat16, GeluFit::Scaled>() | gelu_every_value_of<__nv_bfloat16, GeluFit::V9>() |
         gelu_every_value_of<__half, GeluFit::V9>() |
         gelu_every_value_of<__nv_bfloat16, GeluFit::Degree5>() | gelu_every_value_of<__half, GeluFit::Degree5>() |
         gelu_every_value_of<__nv_bfloat16, GeluFit::Nr9>() | gelu_every_value_of<__half, GeluFit::Nr9>();
}

}  // namespace kiln_bench
