// CPU bodies of the fused optimizer steps: one walk over the parameter's shape with every
// operand's strides (ops/cpu/loops.h), loading each element into the arithmetic type,
// calling the shared functor of optimizer_math.h and storing the written operands back.
// The build compiles this file with -ffp-contract=off so the compiler fuses no multiply-add
// the CUDA build (--fmad=false) would round separately: both devices give the same bits
// (and with -fno-math-errno, so that sqrt is one instruction the SIMD loop can use).
#include <tuple>

#include "../tensor/dtype_dispatch.h"
#include "cpu/loops.h"
#include "cpu/parallel.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {

// Runs `f` over N operands of one shape: f(i, ptr...) updates element i of each operand's
// pointer (operand 1, the gradient, is read only). Contiguous runs call it with the run's base
// pointers and i = 0.. in an explicit SIMD loop; strided ones with each element's own pointers
// and i = 0. Every operation in `f` is an IEEE one (this file is built without contraction
// and math errno, sqrt and division are correctly rounded in vector form too), so vector
// lanes give the scalar loop's bits. `f` must not throw.
template <typename T, size_t N, typename F>
void update_elements(const std::array<const Tensor*, N>& operands, const F& f) {
  std::array<WalkOperand, N> ops;
  for (size_t k = 0; k < N; ++k) ops[k] = operand(*operands[k]);
  // Split over the OpenMP threads above a grain (each element is updated on its own, so the
  // bits do not depend on the split).
  parallel_walk<N>(operands[0]->sizes(), ops, kGrainTranscendental, [&](char** p, const int64_t* s, int64_t n) {
    bool dense = true;
    for (size_t k = 0; k < N; ++k) dense = dense && s[k] == static_cast<int64_t>(sizeof(T));
    if (dense) {
      std::array<T*, N> q;
      for (size_t k = 0; k < N; ++k) q[k] = reinterpret_cast<T*>(p[k]);
      // The functor and the pointers as a lambda's own copies, so the loop keeps them in registers.
      std::apply(
          [f, n](auto*... ptr) {
#ifdef _OPENMP
#pragma omp simd
#endif
            for (int64_t i = 0; i < n; ++i) f(i, ptr...);
          },
          q);
      return;
    }
    std::array<int64_t, N> step;
    for (size_t k = 0; k < N; ++k) step[k] = s[k];
    for (int64_t i = 0; i < n; ++i)
      [&]<size_t... K>(std::index_sequence<K...>) {
        f(0, reinterpret_cast<T*>(p[K] + i * step[K])...);
      }(std::make_index_sequence<N>{});
  });
}

void sgd_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdConfig& config,
                  bool first_step) {
  dispatch_floating(param.dtype(), "_fused_sgd_", [&]<typename T>() {
    using A = acc_t<T>;
    const SgdFunctor<A> f = SgdFunctor<A>::make(config, first_step);
    if (momentum_buffer.defined()) {
      update_elements<T, 3>({&param, &grad, &momentum_buffer}, [f](int64_t i, T* p, T* g, T* buf) {
        A pv = p[i], bv = buf[i];
        f(pv, static_cast<A>(g[i]), bv);
        p[i] = static_cast<T>(pv);
        buf[i] = static_cast<T>(bv);
      });
    } else {
      update_elements<T, 2>({&param, &grad}, [f](int64_t i, T* p, T* g) {
        A pv = p[i], unused = 0;
        f(pv, static_cast<A>(g[i]), unused);
        p[i] = static_cast<T>(pv);
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
                            [f](int64_t i, T* p, T* g, T* m, T* v, T* vmax) {
                              A pv = p[i], mv = m[i], vv = v[i], xv = vmax[i];
                              f(pv, static_cast<A>(g[i]), mv, vv, xv);
                              p[i] = static_cast<T>(pv);
                              m[i] = static_cast<T>(mv);
                              v[i] = static_cast<T>(vv);
                              vmax[i] = static_cast<T>(xv);
                            });
    } else {
      update_elements<T, 4>({&param, &grad, &exp_avg, &exp_avg_sq}, [f](int64_t i, T* p, T* g, T* m, T* v) {
        A pv = p[i], mv = m[i], vv = v[i], unused = 0;
        f(pv, static_cast<A>(g[i]), mv, vv, unused);
        p[i] = static_cast<T>(pv);
        m[i] = static_cast<T>(mv);
        v[i] = static_cast<T>(vv);
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
