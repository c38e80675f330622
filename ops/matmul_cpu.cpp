// The CPU GEMM kernel: dtype dispatch and batching. float and double go to gemm_tiled
// (ops/cpu/gemm_tiled.h: Eigen's kernel on fixed output tiles, OpenMP threads taking whole
// tiles, the bias written into each tile by its thread). float16/bfloat16 operands are
// widened to float (rows in parallel), multiplied there, and rounded once; integer GEMMs use
// an exact loop that wraps modulo 2^64 (as the CUDA tiled kernel does, and PyTorch's results
// do), its output rows split across threads. Every path gives the same bits whatever the
// thread count.
#include <vector>

#include "../tensor/convert.h"
#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "cpu/gemm_tiled.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "kernels.h"
#include "wrapping.h"

namespace kiln::cpu {

namespace {

// Below this many elements a copy is not worth forking threads for.
constexpr int64_t kParallelCopy = int64_t{1} << 16;

// An uninitialised float scratch buffer of n elements from Kiln's CPU allocator (no zero
// fill, and reused memory rather than fresh pages on every call when the allocator caches).
float* scratch(Tensor& holder, int64_t n) {
  holder = new_contiguous({n}, kFloat32, Device::cpu(), "matmul");
  return holder.data_ptr<float>();
}

// Dense float copy of a strided matrix of 16-bit floats, in the source's orientation (a
// transposed weight stays column-major, so both the read and the write stream).
template <typename T>
MatrixRef<float> widen(const MatrixRef<T>& m, Tensor& holder) {
  float* dst = scratch(holder, m.rows * m.cols);
  const bool col_major = m.row_stride == 1 && m.rows > 1 && m.cols > 1;
  const int64_t outer = col_major ? m.cols : m.rows, inner = col_major ? m.rows : m.cols;
  const int64_t so = col_major ? m.col_stride : m.row_stride, si = col_major ? m.row_stride : m.col_stride;
#pragma omp parallel for schedule(static) if (outer * inner >= kParallelCopy)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) dst[o * inner + i] = static_cast<float>(m.data[o * so + i * si]);
  return col_major ? MatrixRef<float>{dst, m.rows, m.cols, 1, m.rows} : MatrixRef<float>{dst, m.rows, m.cols, m.cols, 1};
}

template <typename T>
void gemm_one(T* out, const MatrixRef<T>& a, const MatrixRef<T>& b, double alpha, double beta, const T* bias) {
  const int64_t M = a.rows, N = b.cols, K = a.cols;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    gemm_tiled<T>(out, a, b, static_cast<T>(alpha), static_cast<T>(beta), bias);
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    Tensor ha, hb, ho, hbias;
    const MatrixRef<float> wa = widen(a, ha), wb = widen(b, hb);
    float* vo = scratch(ho, M * N);
    float* vbias = nullptr;
    if (bias) {
      vbias = scratch(hbias, N);
      for (int64_t j = 0; j < N; ++j) vbias[j] = static_cast<float>(bias[j]);
    } else if (beta != 0.0) {
      // beta == 0 leaves vo unread (gemm_tiled ignores it), as BLAS ignores out.
      for (int64_t i = 0; i < M * N; ++i) vo[i] = static_cast<float>(out[i]);
    }
    gemm_tiled<float>(vo, wa, wb, static_cast<float>(alpha), static_cast<float>(beta), vbias);
    const float* src = vo;
#pragma omp parallel for schedule(static) if (M * N >= kParallelCopy)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) out[i * N + j] = T(src[i * N + j]);
  } else {
    // Integers: exact, i-k-j order so the inner loop streams rows of b and out, rows split
    // across threads (each row's sums are the same on any thread). The int64 arithmetic
    // wraps (wrapping.h) where it would overflow; its low bits are the int32 result too, so
    // this matches the CUDA tiled kernel bit for bit.
    const int64_t ia = convert<int64_t>(alpha), ib = convert<int64_t>(beta);
#pragma omp parallel if (static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) >= 1e6)
    {
      std::vector<int64_t> acc(static_cast<size_t>(N));
#pragma omp for schedule(static)
      for (int64_t i = 0; i < M; ++i) {
        std::fill(acc.begin(), acc.end(), 0);
        for (int64_t k = 0; k < K; ++k) {
          const int64_t av = a.data[i * a.row_stride + k * a.col_stride];
          const T* brow = b.data + k * b.row_stride;
          for (int64_t j = 0; j < N; ++j)
            acc[j] = wrapping_add(acc[j], wrapping_mul(av, static_cast<int64_t>(brow[j * b.col_stride])));
        }
        for (int64_t j = 0; j < N; ++j) {
          const int64_t prev = bias     ? static_cast<int64_t>(bias[j])
                               : ib == 0 ? 0
                                         : wrapping_mul(ib, static_cast<int64_t>(out[i * N + j]));
          out[i * N + j] = static_cast<T>(wrapping_add(prev, wrapping_mul(ia, acc[j])));
        }
      }
    }
  }
}

void gemm_cpu(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta, const Tensor& bias) {
  const int64_t nd = out.dim();
  // A defined bias (dense [N]) is written into each output tile by the thread computing it.
  const int64_t M = out.sizes()[nd - 2], N = out.sizes()[nd - 1], K = a.sizes()[nd - 1];
  const Shape batch(out.sizes().begin(), out.sizes().end() - 2);
  auto batch_operand = [&](const Tensor& t) {
    const WalkOperand whole = operand(t);
    return WalkOperand{whole.data, leading(whole.byte_strides, static_cast<size_t>(nd - 2))};
  };
  dispatch_numeric(out.dtype(), "matmul", [&]<typename T>() {
    const int64_t sa0 = a.strides()[nd - 2], sa1 = a.strides()[nd - 1];
    const int64_t sb0 = b.strides()[nd - 2], sb1 = b.strides()[nd - 1];
    walk<3>(batch, {batch_operand(out), batch_operand(a), batch_operand(b)}, [&](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        gemm_one<T>(reinterpret_cast<T*>(p[0] + i * s[0]),
                    MatrixRef<T>{reinterpret_cast<const T*>(p[1] + i * s[1]), M, K, sa0, sa1},
                    MatrixRef<T>{reinterpret_cast<const T*>(p[2] + i * s[2]), K, N, sb0, sb1}, alpha, beta,
                    bias.defined() ? bias.data_ptr<T>() : nullptr);
      }
    });
  });
}

}  // namespace

void register_gemm_kernels() { dispatch::gemm_kernels.set(DeviceType::CPU, &gemm_cpu); }

}  // namespace kiln::cpu
