// CUDA bodies of the binary ops (arithmetic and comparisons) and where(). A number operand
// arrives as a 0-dim CPU tensor broadcast to the output's shape (PyTorch's rule for numbers
// next to GPU tensors): its value is read on the host and passed to the kernel by value, so
// `x + 1` reads x once and nothing else. Integer arithmetic wraps (wrapping.h), bit for bit
// as the CPU's does.
#include "../tensor/dtype_dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "gelu_math.h"
#include "int_pow.h"
#include "kernels.h"
#include "wrapping.h"

namespace kiln::cuda_kernels {

namespace {

// The op on widened values; Out is T, or bool for comparisons.
template <typename T, BinaryOp Op>
struct BinaryMath {
  using A = acc_t<T>;
  static constexpr bool kCompare = Op >= BinaryOp::Eq;
  using Out = std::conditional_t<kCompare, bool, T>;
  A alpha;
  __device__ __forceinline__ Out operator()(A x, A y) const {
    if constexpr (Op == BinaryOp::Add) return narrow<T>(wrapping_add(x, wrapping_mul(alpha, y)));
    else if constexpr (Op == BinaryOp::Sub) return narrow<T>(wrapping_sub(x, wrapping_mul(alpha, y)));
    else if constexpr (Op == BinaryOp::Mul) return narrow<T>(wrapping_mul(x, y));
    else if constexpr (Op == BinaryOp::Div) return narrow<T>(x / y);
    else if constexpr (Op == BinaryOp::Pow) {
      if constexpr (std::is_floating_point_v<A>) return narrow<T>(pow(x, y));
      else return narrow<T>(int_pow<A>(x, y));
    } else if constexpr (Op == BinaryOp::GeluBackward) return narrow<T>(x * math::gelu_derivative(y));
    else if constexpr (Op == BinaryOp::GeluTanhBackward) return narrow<T>(x * math::gelu_tanh_derivative(y));
    else if constexpr (Op == BinaryOp::Eq) return x == y;
    else if constexpr (Op == BinaryOp::Ne) return x != y;
    else if constexpr (Op == BinaryOp::Lt) return x < y;
    else if constexpr (Op == BinaryOp::Le) return x <= y;
    else if constexpr (Op == BinaryOp::Gt) return x > y;
    else return x >= y;
  }
};

template <typename T, BinaryOp Op>
struct BothTensors {
  BinaryMath<T, Op> m;
  __device__ typename BinaryMath<T, Op>::Out operator()(T a, T b) const { return m(widen(a), widen(b)); }
};

// One operand is a number: `scalar_on_left` says which side it takes.
template <typename T, BinaryOp Op>
struct WithNumber {
  BinaryMath<T, Op> m;
  acc_t<T> number;
  bool scalar_on_left;
  __device__ typename BinaryMath<T, Op>::Out operator()(T t) const {
    return scalar_on_left ? m(number, widen(t)) : m(widen(t), number);
  }
};

// The value of a 0-dim CPU tensor (broadcast or not) in arithmetic type.
template <typename K>
auto host_value(const Tensor& t) {
  const K v = *static_cast<const K*>(t.data_ptr());
  using T = device_t<K>;
  if constexpr (std::is_same_v<K, Half> || std::is_same_v<K, BFloat16>) return static_cast<acc_t<T>>(static_cast<float>(v));
  else return static_cast<acc_t<T>>(v);
}

template <typename K, BinaryOp Op>
void run(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  using T = device_t<K>;
  using Math = BinaryMath<T, Op>;
  using OutK = std::conditional_t<Math::kCompare, bool, K>;
  const Math m{alpha.to<acc_t<T>>()};
  const bool a_number = a.device().is_cpu(), b_number = b.device().is_cpu();
  KILN_INTERNAL_ASSERT(!(a_number && b_number), "binary: both operands are numbers");
  if (b_number) return map<OutK, K>("binary", out, WithNumber<T, Op>{m, host_value<K>(b), false}, a);
  if (a_number) return map<OutK, K>("binary", out, WithNumber<T, Op>{m, host_value<K>(a), true}, b);
  map<OutK, K, K>("binary", out, BothTensors<T, Op>{m}, a, b);
}

template <typename K>
void binary_typed(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  switch (op) {
    case BinaryOp::Add: return run<K, BinaryOp::Add>(out, a, b, alpha);
    case BinaryOp::Sub: return run<K, BinaryOp::Sub>(out, a, b, alpha);
    case BinaryOp::Mul: return run<K, BinaryOp::Mul>(out, a, b, alpha);
    case BinaryOp::Eq: return run<K, BinaryOp::Eq>(out, a, b, alpha);
    case BinaryOp::Ne: return run<K, BinaryOp::Ne>(out, a, b, alpha);
    case BinaryOp::Lt: return run<K, BinaryOp::Lt>(out, a, b, alpha);
    case BinaryOp::Le: return run<K, BinaryOp::Le>(out, a, b, alpha);
    case BinaryOp::Gt: return run<K, BinaryOp::Gt>(out, a, b, alpha);
    case BinaryOp::Ge: return run<K, BinaryOp::Ge>(out, a, b, alpha);
    default: break;
  }
  if constexpr (!std::is_same_v<K, bool>) {
    if (op == BinaryOp::Pow) return run<K, BinaryOp::Pow>(out, a, b, alpha);
    if constexpr (!std::is_integral_v<K>) {
      if (op == BinaryOp::Div) return run<K, BinaryOp::Div>(out, a, b, alpha);
      if (op == BinaryOp::GeluBackward) return run<K, BinaryOp::GeluBackward>(out, a, b, alpha);
      if (op == BinaryOp::GeluTanhBackward) return run<K, BinaryOp::GeluTanhBackward>(out, a, b, alpha);
    }
  }
  KILN_INTERNAL_ASSERT(false, "binary op {} reached the CUDA kernel with dtype {}", static_cast<int>(op), a.dtype());
}

void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  const DType t = a.device().is_cpu() ? b.dtype() : a.dtype();
  dispatch_all(t, "binary", [&]<typename K>() { binary_typed<K>(op, out, a, b, alpha); });
}

template <typename T>
struct WhereFn {
  __device__ T operator()(bool c, T x, T y) const { return c ? x : y; }
};

void where_cuda(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_all(out.dtype(), "where", [&]<typename K>() {
    map<K, bool, K, K>("where", out, WhereFn<device_t<K>>{}, cond, a, b);
  });
}

}  // namespace

void register_binary_kernels() {
  dispatch::binary_kernels.set(DeviceType::CUDA, &binary_cuda);
  dispatch::where_kernels.set(DeviceType::CUDA, &where_cuda);
}

}  // namespace kiln::cuda_kernels
