// CPU bodies of the fused optimizer steps: one walk over the parameter's shape with every
// operand's strides (ops/cpu/loops.h), loading each element into the arithmetic type,
// calling the shared functor of optimizer_math.h and storing the written operands back.
// The build compiles this file with -ffp-contract=off so the compiler fuses no multiply-add
// the CUDA build (--fmad=false) would round separately: both devices give the same bits.
#include "../tensor/dtype_dispatch.h"
#include "cpu/loops.h"
#include "cpu/parallel.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {

// Runs f(values...) over N operands of one shape: operand 1 (the gradient) is read only,
// every other operand is read and written back. `f` takes A& for each operand.
template <typename T, size_t N, typename F>
void update_elements(const std::array<const Tensor*, N>& operands, F&& f) {
  using A = acc_t<T>;
  std::array<WalkOperand, N> ops;
  for (size_t k = 0; k < N; ++k) ops[k] = operand(*operands[k]);
  // Split over the OpenMP threads above a grain (each element is updated on its own, so the
  // bits do not depend on the split); `f` must not throw.
  parallel_walk<N>(operands[0]->sizes(), ops, kGrainTranscendental, [&](char** p, const int64_t* s, int64_t n) {
    bool dense = true;
    for (size_t k = 0; k < N; ++k) dense = dense && s[k] == static_cast<int64_t>(sizeof(T));
    std::array<int64_t, N> step;
    for (size_t k = 0; k < N; ++k) step[k] = dense ? static_cast<int64_t>(sizeof(T)) : s[k];
    for (int64_t i = 0; i < n; ++i) {
      std::array<A, N> v;
      for (size_t k = 0; k < N; ++k) v[k] = static_cast<A>(*reinterpret_cast<const T*>(p[k] + i * step[k]));
      f(v);
      for (size_t k = 0; k < N; ++k)
        if (k != 1) *reinterpret_cast<T*>(p[k] + i * step[k]) = static_cast<T>(v[k]);
    }
  });
}

void sgd_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdConfig& config,
                  bool first_step) {
  dispatch_floating(param.dtype(), "_fused_sgd_", [&]<typename T>() {
    using A = acc_t<T>;
    const SgdFunctor<A> f = SgdFunctor<A>::make(config, first_step);
    if (momentum_buffer.defined()) {
      update_elements<T, 3>({&param, &grad, &momentum_buffer}, [&](std::array<A, 3>& v) { f(v[0], v[1], v[2]); });
    } else {
      update_elements<T, 2>({&param, &grad}, [&](std::array<A, 2>& v) {
        A unused = 0;
        f(v[0], v[1], unused);
      });
    }
  });
}

void adam_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const Tensor& max_exp_avg_sq, double step, const AdamConfig& config, bool decoupled) {
  dispatch_floating(param.dtype(), decoupled ? "_fused_adamw_" : "_fused_adam_", [&]<typename T>() {
    using A = acc_t<T>;
    const AdamFunctor<A> f = AdamFunctor<A>::make(config, decoupled, step);
    if (max_exp_avg_sq.defined()) {
      update_elements<T, 5>({&param, &grad, &exp_avg, &exp_avg_sq, &max_exp_avg_sq},
                            [&](std::array<A, 5>& v) { f(v[0], v[1], v[2], v[3], v[4]); });
    } else {
      update_elements<T, 4>({&param, &grad, &exp_avg, &exp_avg_sq}, [&](std::array<A, 4>& v) {
        A unused = 0;
        f(v[0], v[1], v[2], v[3], unused);
      });
    }
  });
}

}  // namespace

void register_optimizer_step_kernels() {
  dispatch::sgd_step_kernels.set(DeviceType::CPU, &sgd_step_cpu);
  dispatch::adam_step_kernels.set(DeviceType::CPU, &adam_step_cpu);
}

}  // namespace kiln::cpu
