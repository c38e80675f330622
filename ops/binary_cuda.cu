// CUDA bodies of the binary ops (arithmetic and comparisons) and where(). A number operand
// arrives as a 0-dim CPU tensor broadcast to the output's shape (PyTorch's rule for numbers
// next to GPU tensors): its value is read on the host and passed to the kernel by value, so
// `x + 1` reads x once and nothing else. The per-element formulas are binary_math.h's, the
// same functors the CPU kernels call: integer arithmetic wraps bit for bit as the CPU's does.
#include "../tensor/dtype_dispatch.h"
#include "binary_math.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

// Formula F on two elements of type T, widened to the accumulation type; Out is T, or bool
// for the comparisons.
template <typename T, typename F>
struct BothTensors {
  using Out = math::binary_out_t<F, acc_t<T>, T>;
  F formula;
  __device__ Out operator()(T a, T b) const { return narrow<Out>(formula(widen(a), widen(b))); }
};

// One operand is a number: `scalar_on_left` says which side it takes.
template <typename T, typename F>
struct WithNumber {
  using Out = math::binary_out_t<F, acc_t<T>, T>;
  F formula;
  acc_t<T> number;
  bool scalar_on_left;
  __device__ Out operator()(T t) const {
    return scalar_on_left ? narrow<Out>(formula(number, widen(t))) : narrow<Out>(formula(widen(t), number));
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

template <typename K, typename F>
void run(const Tensor& out, const Tensor& a, const Tensor& b, F formula) {
  using T = device_t<K>;
  using OutK = math::binary_out_t<F, acc_t<T>, K>;
  const bool a_number = a.device().is_cpu(), b_number = b.device().is_cpu();
  KILN_INTERNAL_ASSERT(!(a_number && b_number), "binary: both operands are numbers");
  if (b_number) return map<OutK, K>("binary", out, WithNumber<T, F>{formula, host_value<K>(b), false}, a);
  if (a_number) return map<OutK, K>("binary", out, WithNumber<T, F>{formula, host_value<K>(a), true}, b);
  map<OutK, K, K>("binary", out, BothTensors<T, F>{formula}, a, b);
}

template <typename K>
void binary_typed(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  using A = acc_t<device_t<K>>;
  const bool done = math::with_binary_formula<A>(op, alpha.to<A>(), [&](auto formula) { run<K>(out, a, b, formula); });
  KILN_INTERNAL_ASSERT(done, "binary op {} reached the CUDA kernel with dtype {}", static_cast<int>(op), a.dtype());
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
