// CPU GEMM through Eigen. Each matrix operand is mapped in place when one of its strides is
// 1 (row-major, or transposed/column-major as t() produces), so linear's weight.t() costs
// no copy; other layouts are packed into a dense buffer first. float16/bfloat16 operands
// are widened to float, multiplied, and rounded once; integer GEMMs use an exact loop that
// wraps modulo 2^64 (as the CUDA tiled kernel does, and PyTorch's results do). A
// bias vector (the CUDA kernel's cuBLASLt epilogue) is copied into out first and added as
// the beta = 1 term, which rounds the same way.
#include <Eigen/Core>
#include <vector>

#include "../tensor/convert.h"
#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "kernels.h"
#include "wrapping.h"

namespace kiln::cpu {

namespace {

// A strided R x C matrix (strides in elements).
template <typename T>
struct MatrixRef {
  const T* data;
  int64_t rows, cols, row_stride, col_stride;
};

template <typename T>
using ColMajorMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>, 0,
                               Eigen::OuterStride<>>;

// `m` itself when Eigen can map it in place (one of its strides is 1, the other spans a
// row or column), else a column-major copy in `scratch`.
template <typename T>
MatrixRef<T> mappable(const MatrixRef<T>& m, std::vector<T>& scratch) {
  const bool row_major = (m.col_stride == 1 || m.cols == 1) && (m.rows == 1 || m.row_stride >= m.cols);
  const bool col_major = (m.row_stride == 1 || m.rows == 1) && (m.cols == 1 || m.col_stride >= m.rows);
  if (row_major || col_major) return m;
  scratch.resize(static_cast<size_t>(m.rows * m.cols));
  for (int64_t c = 0; c < m.cols; ++c)
    for (int64_t r = 0; r < m.rows; ++r) scratch[c * m.rows + r] = m.data[r * m.row_stride + c * m.col_stride];
  return {scratch.data(), m.rows, m.cols, 1, std::max<int64_t>(m.rows, 1)};
}

// Runs f(eigen_expression) with a mappable `m` as an Eigen expression: a column-major map
// of its transpose (row-major data) or of itself (column-major data).
template <typename T, typename F>
void with_eigen(const MatrixRef<T>& m, F&& f) {
  if ((m.col_stride == 1 || m.cols == 1) && (m.rows == 1 || m.row_stride >= m.cols)) {
    const int64_t ld = m.rows == 1 ? std::max<int64_t>(m.cols, 1) : m.row_stride;
    f(ColMajorMap<T>(m.data, m.cols, m.rows, Eigen::OuterStride<>(ld)).transpose());
  } else {
    const int64_t ld = m.cols == 1 ? std::max<int64_t>(m.rows, 1) : m.col_stride;
    f(ColMajorMap<T>(m.data, m.rows, m.cols, Eigen::OuterStride<>(ld)));
  }
}

// The longest run of the inner dimension K that Eigen's GEMM keeps in one block whatever
// the thread count. Eigen splits K into blocks of kc and adds each block's products into
// the output, and picks kc by a cache heuristic that differs between one thread and
// several (products/GeneralBlockPanelKernel.h: with threads it caps kc at 320), so the
// same GEMM rounded differently under OMP_NUM_THREADS=1 (README's checksum moved in the
// sixth digit). Fed chunks of K no longer than both heuristics' kc, Eigen never splits
// them further, and every output element is summed in one order: chunk by chunk, each
// chunk's dot product in registers. Sized once from the heuristic itself.
template <typename T>
int64_t thread_independent_kc() {
  static const int64_t kc = [] {
    Eigen::Index k1 = Eigen::Index{1} << 30, m1 = 4096, n1 = 4096;
    Eigen::Index k2 = k1, m2 = m1, n2 = n1;
    Eigen::internal::computeProductBlockingSizes<T, T>(k1, m1, n1, Eigen::Index{1});
    Eigen::internal::computeProductBlockingSizes<T, T>(k2, m2, n2, Eigen::Index{2});
    // Both are multiples of 8 already (Eigen's peeling); stay one.
    return std::max<int64_t>(8, std::min<int64_t>(k1, k2) / 8 * 8);
  }();
  return kc;
}

// out (dense row-major M x N) = beta * out + alpha * a @ b, for float and double.
template <typename T>
void gemm_eigen(T* out, const MatrixRef<T>& a_in, const MatrixRef<T>& b_in, T alpha, T beta) {
  using RowMajorOut = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  RowMajorOut o(out, a_in.rows, b_in.cols);
  if (beta == T(0)) o.setZero();
  else if (beta != T(1)) o *= beta;
  const int64_t K = a_in.cols;
  if (K == 0) return;
  std::vector<T> scratch_a, scratch_b;
  const MatrixRef<T> a = mappable(a_in, scratch_a), b = mappable(b_in, scratch_b);
  // Equal chunks (a function of K and kc only, never of the thread count), so the last one
  // is not a short remainder.
  const int64_t limit = thread_independent_kc<T>();
  const int64_t chunks = (K + limit - 1) / limit;
  const int64_t chunk = ((K + chunks - 1) / chunks + 7) / 8 * 8;
  for (int64_t k0 = 0; k0 < K; k0 += chunk) {
    const int64_t kc = std::min(chunk, K - k0);
    const MatrixRef<T> ak{a.data + k0 * a.col_stride, a.rows, kc, a.row_stride, a.col_stride};
    const MatrixRef<T> bk{b.data + k0 * b.row_stride, kc, b.cols, b.row_stride, b.col_stride};
    with_eigen(ak, [&](const auto& ea) { with_eigen(bk, [&](const auto& eb) { o.noalias() += alpha * (ea * eb); }); });
  }
}

// Dense float copy of a strided matrix of 16-bit floats.
template <typename T>
std::vector<float> widen(const MatrixRef<T>& m) {
  std::vector<float> v(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c) v[r * m.cols + c] = static_cast<float>(m.data[r * m.row_stride + c * m.col_stride]);
  return v;
}

template <typename T>
void gemm_one(T* out, const MatrixRef<T>& a, const MatrixRef<T>& b, double alpha, double beta) {
  const int64_t M = a.rows, N = b.cols, K = a.cols;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    gemm_eigen<T>(out, a, b, static_cast<T>(alpha), static_cast<T>(beta));
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    const std::vector<float> wa = widen(a), wb = widen(b);
    std::vector<float> wo(static_cast<size_t>(M * N));
    for (int64_t i = 0; i < M * N; ++i) wo[i] = beta == 0.0 ? 0.0f : static_cast<float>(out[i]);
    gemm_eigen<float>(wo.data(), MatrixRef<float>{wa.data(), M, K, K, 1}, MatrixRef<float>{wb.data(), K, N, N, 1},
                      static_cast<float>(alpha), static_cast<float>(beta));
    for (int64_t i = 0; i < M * N; ++i) out[i] = T(wo[i]);
  } else {
    // Integers: exact, i-k-j order so the inner loop streams rows of b and out. The int64
    // arithmetic wraps (wrapping.h) where it would overflow; its low bits are the int32
    // result too, so this matches the CUDA tiled kernel bit for bit.
    const int64_t ia = convert<int64_t>(alpha), ib = convert<int64_t>(beta);
    std::vector<int64_t> acc(static_cast<size_t>(N));
    for (int64_t i = 0; i < M; ++i) {
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t k = 0; k < K; ++k) {
        const int64_t av = a.data[i * a.row_stride + k * a.col_stride];
        const T* brow = b.data + k * b.row_stride;
        for (int64_t j = 0; j < N; ++j)
          acc[j] = wrapping_add(acc[j], wrapping_mul(av, static_cast<int64_t>(brow[j * b.col_stride])));
      }
      for (int64_t j = 0; j < N; ++j) {
        const int64_t prev = ib == 0 ? 0 : wrapping_mul(ib, static_cast<int64_t>(out[i * N + j]));
        out[i * N + j] = static_cast<T>(wrapping_add(prev, wrapping_mul(ia, acc[j])));
      }
    }
  }
}

void gemm_cpu(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta, const Tensor& bias) {
  const int64_t nd = out.dim();
  if (bias.defined()) {
    // out = alpha * a @ b + bias: the bias, broadcast over the rows, becomes the beta = 1 term.
    dispatch::copy_kernels.get("matmul", out.device())(out, broadcast_view(bias, out.sizes()));
    beta = 1.0;
  }
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
                    MatrixRef<T>{reinterpret_cast<const T*>(p[2] + i * s[2]), K, N, sb0, sb1}, alpha, beta);
      }
    });
  });
}

}  // namespace

void register_gemm_kernels() { dispatch::gemm_kernels.set(DeviceType::CPU, &gemm_cpu); }

}  // namespace kiln::cpu
