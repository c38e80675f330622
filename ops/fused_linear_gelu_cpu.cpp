// CPU bodies of fused_linear_gelu and its backward. Forward: the GEMM through the CPU GEMM
// kernel (Eigen, the same thread-independent summation order as linear), into the output
// itself for float32/float64 and into a float buffer for float16/bfloat16, then ONE pass over
// the output (rows split over the OpenMP threads) that adds the bias, stores the
// pre-activation when asked, and applies GELU (the vector formula of cpu/vec_math.h where
// there is one, as the unfused gelu does): the
// 16-bit types compute the bias and GELU on the float accumulator and round once (the
// unfused path rounds the GEMM's result first). GELU and its derivatives are unary_math.h's
// and binary_math.h's functors, the ones the unfused gelu and gelu_backward run.
//
// Backward: dH = grad * gelu'(h) in one pass (rounded to the dtype, as gelu_backward's result
// is), then grad input = dH @ W and grad weight = dH^T @ X through the GEMM kernel and the
// bias gradient as a column sum through the reduce kernel; each only when asked for.
#include <algorithm>
#include <array>
#include <type_traits>

#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "binary_math.h"
#include "cpu/loops.h"
#include "cpu/parallel.h"
#include "cpu/register.h"
#include "cpu/vec_blocks.h"
#include "kernels.h"
#include "unary_math.h"

namespace kiln::cpu {

namespace {

constexpr const char* kForward = "fused_linear_gelu";
constexpr const char* kBackward = "fused_linear_gelu_backward";

// `t` [R, C] as its transpose [C, R], a view.
Tensor transposed(const Tensor& t) {
  return new_view(t, {t.sizes()[1], t.sizes()[0]}, {t.strides()[1], t.strides()[0]}, t.storage_offset());
}

// `t` converted to a dense float32 tensor (the 16-bit GEMM's operands).
Tensor widened(const Tensor& t) {
  Tensor w = new_contiguous(t.sizes(), DType::Float32, t.device(), kForward);
  dispatch::copy_kernels.get(kForward, t.device())(w, t);
  return w;
}

template <typename T>
void forward_typed(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias,
                   UnaryOp gelu) {
  using A = acc_t<T>;
  constexpr bool kWide = std::is_same_v<T, A>;
  const int64_t M = out.sizes()[0], N = out.sizes()[1];
  // The GEMM's result in A: out itself for float32/float64.
  const Tensor acc = kWide ? out : new_contiguous({M, N}, DType::Float32, out.device(), kForward);
  const Tensor xa = kWide ? x : widened(x);
  const Tensor wa = kWide ? w : widened(w);
  dispatch::gemm_kernels.get(kForward, out.device())(acc, xa, transposed(wa), 1.0, 0.0, Tensor());

  const A* a = static_cast<const A*>(acc.data_ptr());
  const T* b = bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr;
  T* o = static_cast<T*>(out.data_ptr());
  T* p = pre.defined() ? static_cast<T*>(pre.data_ptr()) : nullptr;
  const bool done = math::with_unary_formula<A>(gelu, [&](auto formula) {
    using Formula = decltype(formula);
    // Rows split over the threads; each row in pieces of kGatherBlock values through a buffer.
    const int64_t grain_rows = std::max<int64_t>(1, kGrainTranscendental / std::max<int64_t>(N, 1));
    parallel_for(
        M, grain_rows,
        [&](int64_t first_row, int64_t end_row) {
          std::array<A, kGatherBlock> buf;
          for (int64_t i = first_row; i < end_row; ++i) {
            for (int64_t j0 = 0; j0 < N; j0 += kGatherBlock) {
              const int64_t at = i * N + j0, m = std::min(kGatherBlock, N - j0);
              for (int64_t j = 0; j < m; ++j) {
                A v = a[at + j];
                if (b != nullptr) v += static_cast<A>(b[j0 + j]);  // no bias: nothing added (keeps -0.0 as linear does)
                if (p != nullptr) p[at + j] = static_cast<T>(v);
                buf[j] = v;
              }
              if constexpr (vec::has_vec_unary<A, Formula>) {
                vec::apply_unary<A, Formula>(buf.data(), buf.data(), m);
              } else {
                for (int64_t j = 0; j < m; ++j) buf[j] = formula(buf[j]);
              }
              for (int64_t j = 0; j < m; ++j) o[at + j] = static_cast<T>(buf[j]);
            }
          }
        },
        1);
  });
  KILN_INTERNAL_ASSERT(done, "fused_linear_gelu: no GELU formula for dtype {}", out.dtype());
}

void fused_linear_gelu_cpu(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias,
                           UnaryOp gelu) {
  KILN_INTERNAL_ASSERT(out.is_contiguous() && (!pre.defined() || pre.is_contiguous()) &&
                           (!bias.defined() || bias.is_contiguous()),
                       "fused_linear_gelu: the CPU kernel wants contiguous out, pre and bias");
  dispatch_floating(out.dtype(), kForward, [&]<typename T>() { forward_typed<T>(out, pre, x, w, bias, gelu); });
}

template <typename T>
void dgelu_typed(const Tensor& dh, const Tensor& grad, const Tensor& pre, UnaryOp gelu) {
  using A = acc_t<T>;
  const BinaryOp op = gelu == UnaryOp::Gelu ? BinaryOp::GeluBackward : BinaryOp::GeluTanhBackward;
  const bool done = math::with_binary_formula<A>(op, A(1), [&](auto formula) {
    using Formula = decltype(formula);
    if constexpr (vec::has_vec_binary<A, Formula>) {
      map_blocks<T, T, T>(dh, vec_binary_block<T, Formula>, kGrainTranscendental, grad, pre);
    } else {
      map<T, T, T>(dh, [formula](T g, T h) { return static_cast<T>(formula(static_cast<A>(g), static_cast<A>(h))); },
                   grad, pre);
    }
  });
  KILN_INTERNAL_ASSERT(done, "fused_linear_gelu_backward: no GELU derivative for dtype {}", dh.dtype());
}

void fused_linear_gelu_backward_cpu(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                    const Tensor& grad, const Tensor& pre, const Tensor& x, const Tensor& w,
                                    UnaryOp gelu) {
  const Device device = grad.device();
  const Tensor dh = new_contiguous(grad.sizes(), grad.dtype(), device, kBackward);
  dispatch_floating(grad.dtype(), kBackward, [&]<typename T>() { dgelu_typed<T>(dh, grad, pre, gelu); });
  const GemmKernel gemm = dispatch::gemm_kernels.get(kBackward, device);
  if (grad_input.defined()) gemm(grad_input, dh, w, 1.0, 0.0, Tensor());
  if (grad_weight.defined()) gemm(grad_weight, transposed(dh), x, 1.0, 0.0, Tensor());
  if (grad_bias.defined()) dispatch::reduce_kernels.get(kBackward, device)(ReduceOp::Sum, grad_bias, transposed(dh), 1);
}

}  // namespace

void register_fused_linear_gelu_kernels() {
  dispatch::fused_linear_gelu_kernels.set(DeviceType::CPU, &fused_linear_gelu_cpu);
  dispatch::fused_linear_gelu_backward_kernels.set(DeviceType::CPU, &fused_linear_gelu_backward_cpu);
}

}  // namespace kiln::cpu
