// gradcheck (gradcheck.h): analytical gradients from autograd::grad, numerical ones from
// central differences evaluated without recording.
#include "gradcheck.h"

#include <cmath>
#include <random>

#include "../ops/grad_mode.h"
#include "../ops/ops.h"
#include "../tensor/shape.h"
#include "engine.h"

namespace kiln::autograd {

namespace {

// sum(v * fn(inputs)) as a double.
double projected(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                 const Tensor& v) {
  const Tensor out = fn(inputs);
  return sum(mul(out.to(DType::Float64), v)).item().to_double();
}

}  // namespace

void gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
               const GradcheckOptions& options) {
  std::vector<Tensor> checked;
  std::vector<size_t> checked_index;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    KILN_CHECK(inputs[i].dtype() == DType::Float64, "gradcheck: input {} is {}; gradcheck needs float64 inputs", i,
               inputs[i].dtype());
    checked.push_back(inputs[i]);
    checked_index.push_back(i);
  }
  KILN_CHECK(!checked.empty(), "gradcheck: no input requires grad");
  std::mt19937_64 rng(options.seed);
  std::normal_distribution<double> normal;
  for (int p = 0; p < options.projections; ++p) {
    const Tensor out = fn(inputs);
    KILN_CHECK(out.defined() && out.is_floating_point(), "gradcheck: fn must return a floating tensor");
    std::vector<double> vv(static_cast<size_t>(out.numel()));
    for (double& x : vv) x = normal(rng);
    const Tensor v = from_vector(vv, out.sizes()).to(out.device());
    const Tensor s = sum(mul(out.to(DType::Float64), v));
    std::vector<Tensor> analytical = s.requires_grad()
                                         ? grad({s}, checked, {}, false, false, /*allow_unused=*/true)
                                         : std::vector<Tensor>(checked.size());
    NoGradGuard no_grad;
    for (size_t c = 0; c < checked.size(); ++c) {
      const size_t i = checked_index[c];
      const Tensor& x = inputs[i];
      const std::vector<double> base = x.to_vector<double>();
      const std::vector<double> a = analytical[c].defined() ? analytical[c].to_vector<double>()
                                                            : std::vector<double>(base.size(), 0.0);
      KILN_CHECK(a.size() == base.size(), "gradcheck: input {} got a gradient of {} elements for {}", i, a.size(),
                 base.size());
      for (size_t k = 0; k < base.size(); ++k) {
        std::vector<Tensor> args = inputs;
        std::vector<double> moved = base;
        moved[k] = base[k] + options.eps;
        args[i] = from_vector(moved, x.sizes()).to(x.device());
        const double plus = projected(fn, args, v);
        moved[k] = base[k] - options.eps;
        args[i] = from_vector(moved, x.sizes()).to(x.device());
        const double minus = projected(fn, args, v);
        const double numerical = (plus - minus) / (2 * options.eps);
        const bool both_nan = std::isnan(numerical) && std::isnan(a[k]);
        KILN_CHECK(both_nan || std::abs(a[k] - numerical) <= options.atol + options.rtol * std::abs(numerical),
                   "gradcheck: input {} (shape {}) element {}: analytical gradient {} but numerical {} (projection {})",
                   i, shape_str(x.sizes()), k, a[k], numerical, p);
      }
    }
  }
}

}  // namespace kiln::autograd
