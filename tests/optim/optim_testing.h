// Float64 references of the optimizers' update rules, written here from PyTorch's documented
// algorithms (torch.optim.SGD / Adam / AdamW) without calling Kiln's kernels, plus helpers
// shared by the optim suites (and the CUDA suite): random parameters with gradients set by
// hand, and bitwise comparison.
#pragma once

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "testing.h"

namespace kiln::testing {

/// SGD's hyperparameters, as the reference reads them.
struct RefSgd {
  double lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};

/// One parameter's float64 SGD state.
struct RefSgdParam {
  std::vector<double> p, buf;
  bool has_buf = false;
  /// A parameter starting at `initial`.
  explicit RefSgdParam(std::vector<double> initial = {}) : p(std::move(initial)) {}
  /// One step with gradient g (PyTorch's _single_tensor_sgd).
  void step(const std::vector<double>& grad, const RefSgd& o) {
    std::vector<double> g = grad;
    for (size_t i = 0; i < g.size(); ++i) {
      if (o.maximize) g[i] = -g[i];
      if (o.weight_decay != 0) g[i] += o.weight_decay * p[i];
    }
    if (o.momentum != 0) {
      if (!has_buf) {
        buf = g;
        has_buf = true;
      } else {
        for (size_t i = 0; i < g.size(); ++i) buf[i] = o.momentum * buf[i] + (1 - o.dampening) * g[i];
      }
      for (size_t i = 0; i < g.size(); ++i) g[i] = o.nesterov ? g[i] + o.momentum * buf[i] : buf[i];
    }
    for (size_t i = 0; i < g.size(); ++i) p[i] -= o.lr * g[i];
  }
};

/// Adam's and AdamW's hyperparameters, as the reference reads them.
struct RefAdam {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false, maximize = false, decoupled = false;
};

/// One parameter's float64 Adam state.
struct RefAdamParam {
  std::vector<double> p, m, v, vmax;
  double step_count = 0;
  /// A parameter starting at `initial`.
  explicit RefAdamParam(std::vector<double> initial = {}) : p(std::move(initial)) {}
  /// One step with gradient g (PyTorch's _single_tensor_adam with capturable=False).
  void step(const std::vector<double>& grad, const RefAdam& o) {
    if (m.empty()) m = v = vmax = std::vector<double>(p.size(), 0.0);
    step_count += 1;
    const double bc1 = 1 - std::pow(o.beta1, step_count);
    const double bc2 = 1 - std::pow(o.beta2, step_count);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = o.maximize ? -grad[i] : grad[i];
      if (o.weight_decay != 0) {
        if (o.decoupled)
          p[i] *= 1 - o.lr * o.weight_decay;
        else
          g += o.weight_decay * p[i];
      }
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
      double second = v[i];
      if (o.amsgrad) {
        vmax[i] = std::max(vmax[i], v[i]);
        second = vmax[i];
      }
      const double denom = std::sqrt(second) / std::sqrt(bc2) + o.eps;
      p[i] -= o.lr / bc1 * m[i] / denom;
    }
  }
};

/// A parameter of `shape` and `dtype` with random values (not requiring grad: the
/// optimizers do not ask).
inline Tensor random_param(const Shape& shape, DType dtype = kFloat32) { return random(shape, dtype, -1.0, 1.0); }

/// Sets a random gradient of p's shape, dtype and device, and returns its float64 values.
inline std::vector<double> set_random_grad(Tensor& p) {
  Tensor g = random(p.sizes(), p.dtype(), -2.0, 2.0).to(p.device());
  p.mutable_grad() = g;
  return values(g);
}

/// True when two tensors have the same shape, dtype and bytes.
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.cpu().contiguous(), cb = b.cpu().contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

}  // namespace kiln::testing
