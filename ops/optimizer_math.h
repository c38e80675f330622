// The per-element update formulas of the optimizers, written once: each is a small
// KILN_HOST_DEVICE functor that the CPU loop (optimizer_step_cpu.cpp), the per-parameter CUDA
// kernel and the multi-tensor CUDA kernel (optimizer_step_cuda.cu) all call, so every path
// runs the same arithmetic in the same order.
//
// Scalars that depend only on hyperparameters and the step count (1 - beta1, the bias
// corrections, lr / bias_correction1) are computed once per tensor on the host, in double,
// by make(), and rounded to the arithmetic type A (float for float32/float16/bfloat16
// parameters, double for float64). The step count itself is a host double per parameter
// (PyTorch's capturable=False behaviour), so no device memory is read for it.
//
// The formulas follow PyTorch's update rules (torch.optim.SGD / Adam / AdamW, as their fused
// CUDA kernels order the arithmetic):
//   SGD:  g = maximize ? -grad : grad;  g += weight_decay * p;
//         buf = first step ? g : momentum * buf + (1 - dampening) * g;
//         g = nesterov ? g + momentum * buf : buf;  p -= lr * g
//   Adam: g = maximize ? -grad : grad;  AdamW: p *= 1 - lr * weight_decay, Adam: g += weight_decay * p;
//         m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g;
//         (amsgrad: vmax = max(vmax, v), used for v below)
//         p -= (lr / (1 - beta1^step)) * (m / (sqrt(v) / sqrt(1 - beta2^step) + eps))
// The files that compile these (optimizer_step_cpu.cpp with -ffp-contract=off,
// optimizer_step_cuda.cu with --fmad=false) keep every multiply and add separately rounded,
// so the CPU and both CUDA paths give the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "../core/host_device.h"

namespace kiln {

/// Hyperparameters of one SGD step (torch.optim.SGD's, per parameter group).
struct SgdConfig {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

/// Hyperparameters of one Adam or AdamW step (per parameter group).
struct AdamConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
};

namespace optim_math {

/// Correctly rounded square root on the host and on the device.
KILN_HOST_DEVICE inline float sqrt_rn(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}
/// Correctly rounded square root on the host and on the device.
KILN_HOST_DEVICE inline double sqrt_rn(double x) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

}  // namespace optim_math

/// SGD's per-element update (see the file comment) in arithmetic type A.
template <typename A>
struct SgdFunctor {
  A lr, momentum, one_minus_dampening, weight_decay;
  bool nesterov, maximize, has_momentum;
  bool first_step;  ///< per parameter: its momentum buffer is being created by this step

  /// The functor for `c`; `first_step` when the parameter has no momentum buffer yet.
  static SgdFunctor make(const SgdConfig& c, bool first_step) {
    return {static_cast<A>(c.lr),
            static_cast<A>(c.momentum),
            static_cast<A>(1.0 - c.dampening),
            static_cast<A>(c.weight_decay),
            c.nesterov,
            c.maximize,
            c.momentum != 0.0,
            first_step};
  }
  /// The same functor for another parameter (the multi-tensor kernel's per-tensor values).
  KILN_HOST_DEVICE SgdFunctor for_tensor(A first, A /*unused*/) const {
    SgdFunctor f = *this;
    f.first_step = first != A(0);
    return f;
  }
  /// Updates one element: param p and momentum buffer buf in place, from gradient g.
  KILN_HOST_DEVICE void operator()(A& p, A g, A& buf) const {
    if (maximize) g = -g;
    if (weight_decay != A(0)) g = g + weight_decay * p;
    if (has_momentum) {
      buf = first_step ? g : momentum * buf + one_minus_dampening * g;
      g = nesterov ? g + momentum * buf : buf;
    }
    p = p - lr * g;
  }
};

/// Adam's and AdamW's per-element update (see the file comment) in arithmetic type A.
template <typename A>
struct AdamFunctor {
  A beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
  A decay;  ///< AdamW's 1 - lr * weight_decay
  bool decoupled, amsgrad, maximize;
  A step_size;              ///< per parameter: lr / (1 - beta1^step)
  A bias_correction2_sqrt;  ///< per parameter: sqrt(1 - beta2^step)

  /// lr / (1 - beta1^step) and sqrt(1 - beta2^step) in double, for a parameter at `step`
  /// (its count after this update, >= 1).
  static void step_scalars(const AdamConfig& c, double step, double& step_size, double& bc2_sqrt) {
    step_size = c.lr / (1.0 - std::pow(c.beta1, step));
    bc2_sqrt = std::sqrt(1.0 - std::pow(c.beta2, step));
  }
  /// The functor for `c` (decoupled: AdamW) at `step` (>= 1).
  static AdamFunctor make(const AdamConfig& c, bool decoupled, double step) {
    double step_size = 0, bc2_sqrt = 0;
    step_scalars(c, step, step_size, bc2_sqrt);
    return {static_cast<A>(c.beta1),
            static_cast<A>(1.0 - c.beta1),
            static_cast<A>(c.beta2),
            static_cast<A>(1.0 - c.beta2),
            static_cast<A>(c.eps),
            static_cast<A>(c.weight_decay),
            static_cast<A>(1.0 - c.lr * c.weight_decay),
            decoupled,
            c.amsgrad,
            c.maximize,
            static_cast<A>(step_size),
            static_cast<A>(bc2_sqrt)};
  }
  /// The same functor for another parameter (the multi-tensor kernel's per-tensor values).
  KILN_HOST_DEVICE AdamFunctor for_tensor(A step_size_t, A bc2_sqrt_t) const {
    AdamFunctor f = *this;
    f.step_size = step_size_t;
    f.bias_correction2_sqrt = bc2_sqrt_t;
    return f;
  }
  /// Updates one element: param p, moments m and v and (amsgrad) vmax in place, from g.
  KILN_HOST_DEVICE void operator()(A& p, A g, A& m, A& v, A& vmax) const {
    if (maximize) g = -g;
    if (weight_decay != A(0)) {
      if (decoupled)
        p = p * decay;
      else
        g = g + weight_decay * p;
    }
    m = beta1 * m + one_minus_beta1 * g;
    v = beta2 * v + one_minus_beta2 * g * g;
    A second = v;
    if (amsgrad) {
      // torch.maximum: a NaN on either side propagates.
      vmax = (vmax != vmax || vmax > v) ? vmax : v;
      second = vmax;
    }
    const A denom = optim_math::sqrt_rn(second) / bias_correction2_sqrt + eps;
    p = p - step_size * (m / denom);
  }
};

}  // namespace kiln
