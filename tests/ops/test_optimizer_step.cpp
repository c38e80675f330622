// The fused optimizer-step ops (_fused_sgd_, _fused_adam_, _fused_adamw_) on the CPU: one
// step against a float64 reference computed from the operands' values, in every floating
// dtype and with transposed, sliced and expanded (read-only) operands; the list forms give
// the same bits as the single forms; every validation error.
#include <cmath>
#include <cstring>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Float64 Adam/AdamW step of one element (PyTorch's rule).
void ref_adam(double& p, double g, double& m, double& v, double& vmax, double step, const AdamConfig& c,
              bool decoupled) {
  if (c.maximize) g = -g;
  if (c.weight_decay != 0) {
    if (decoupled)
      p *= 1 - c.lr * c.weight_decay;
    else
      g += c.weight_decay * p;
  }
  m = c.beta1 * m + (1 - c.beta1) * g;
  v = c.beta2 * v + (1 - c.beta2) * g * g;
  if (c.amsgrad) vmax = std::max(vmax, v);
  const double second = c.amsgrad ? vmax : v;
  const double denom = std::sqrt(second) / std::sqrt(1 - std::pow(c.beta2, step)) + c.eps;
  p -= c.lr / (1 - std::pow(c.beta1, step)) * m / denom;
}

// Float64 SGD step of one element.
void ref_sgd(double& p, double g, double& buf, const SgdConfig& c, bool first) {
  if (c.maximize) g = -g;
  if (c.weight_decay != 0) g += c.weight_decay * p;
  if (c.momentum != 0) {
    buf = first ? g : c.momentum * buf + (1 - c.dampening) * g;
    g = c.nesterov ? g + c.momentum * buf : buf;
  }
  p -= c.lr * g;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.sizes() == cb.sizes() && ca.dtype() == cb.dtype() &&
         (ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0);
}

// A random state tensor with non-negative values (second moments), laid out as `layout`.
Tensor positive(const Shape& shape, Layout layout, DType dtype) {
  return random_with_layout(shape, layout, dtype, 0.0, 2.0);
}

const AdamConfig kAdam{
    .lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-3, .weight_decay = 0.1, .amsgrad = true, .maximize = false};

}  // namespace

TEST_CASE("_fused_adam_ and _fused_adamw_ match the float64 reference in every dtype and layout") {
  manual_seed(1481);
  const Shape shape{5, 7};
  for (DType dtype : kFloatTypes)
    for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Sliced})
      for (bool decoupled : {false, true})
        for (bool amsgrad : {false, true})
          for (bool maximize : {false, true}) {
            INFO(dtype_name(dtype) << " " << layout_name(layout) << (decoupled ? " adamw" : " adam")
                                   << (amsgrad ? " amsgrad" : "") << (maximize ? " maximize" : ""));
            AdamConfig c = kAdam;
            c.amsgrad = amsgrad;
            c.maximize = maximize;
            Tensor p = random_with_layout(shape, layout, dtype, -1, 1), g = random_with_layout(shape, layout, dtype);
            Tensor m = random_with_layout(shape, layout, dtype, -1, 1), v = positive(shape, layout, dtype);
            Tensor vmax = amsgrad ? positive(shape, layout, dtype) : Tensor();
            std::vector<double> rp = values(p), rg = values(g), rm = values(m), rv = values(v);
            std::vector<double> rvmax = amsgrad ? values(vmax) : std::vector<double>(rp.size());
            const double step = 3;
            for (size_t i = 0; i < rp.size(); ++i) ref_adam(rp[i], rg[i], rm[i], rv[i], rvmax[i], step, c, decoupled);
            if (decoupled)
              _fused_adamw_(p, g, m, v, vmax, step, c);
            else
              _fused_adam_(p, g, m, v, vmax, step, c);
            check_close(p, rp, shape, "param");
            check_close(m, rm, shape, "exp_avg");
            check_close(v, rv, shape, "exp_avg_sq");
            if (amsgrad) check_close(vmax, rvmax, shape, "max_exp_avg_sq");
          }
}

TEST_CASE("_fused_sgd_ matches the float64 reference in every dtype and layout") {
  manual_seed(1482);
  const Shape shape{6, 3};
  const std::vector<SgdConfig> configs = {
      {.lr = 0.1},
      {.lr = 0.1, .momentum = 0.9, .dampening = 0.2, .weight_decay = 0.05},
      {.lr = 0.05, .momentum = 0.8, .weight_decay = 0.01, .nesterov = true, .maximize = true},
  };
  for (DType dtype : kFloatTypes)
    for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Sliced})
      for (size_t k = 0; k < configs.size(); ++k)
        for (bool first : {false, true}) {
          const SgdConfig& c = configs[k];
          INFO(dtype_name(dtype) << " " << layout_name(layout) << " config " << k << (first ? " first" : ""));
          Tensor p = random_with_layout(shape, layout, dtype, -1, 1), g = random_with_layout(shape, layout, dtype);
          Tensor buf = c.momentum != 0 ? random_with_layout(shape, layout, dtype) : Tensor();
          std::vector<double> rp = values(p), rg = values(g);
          std::vector<double> rb = buf.defined() ? values(buf) : std::vector<double>(rp.size());
          for (size_t i = 0; i < rp.size(); ++i) ref_sgd(rp[i], rg[i], rb[i], c, first);
          _fused_sgd_(p, g, buf, c, first);
          check_close(p, rp, shape, "param");
          if (buf.defined()) check_close(buf, rb, shape, "momentum_buffer");
        }
}

TEST_CASE("The fused steps read an expanded gradient") {
  manual_seed(1483);
  Tensor p = random({4, 3}), g = random_with_layout({4, 3}, Layout::Expanded);
  Tensor m = zeros({4, 3}), v = zeros({4, 3});
  AdamConfig c = kAdam;
  c.amsgrad = false;
  std::vector<double> rp = values(p), rg = values(g), rm(12, 0.0), rv(12, 0.0), unused(12, 0.0);
  for (size_t i = 0; i < 12; ++i) ref_adam(rp[i], rg[i], rm[i], rv[i], unused[i], 1, c, true);
  _fused_adamw_(p, g, m, v, Tensor(), 1, c);
  check_close(p, rp, {4, 3});
  check_close(v, rv, {4, 3});
}

TEST_CASE("The list forms give the same bits as the single forms on the CPU") {
  manual_seed(1484);
  const std::vector<Shape> shapes = {{3, 4}, {7}, {0}, {2, 2, 2}};
  for (bool decoupled : {false, true}) {
    std::vector<Tensor> p, g, m, v, vmax, p2, m2, v2, vmax2;
    std::vector<double> steps;
    for (size_t i = 0; i < shapes.size(); ++i) {
      p.push_back(random(shapes[i]));
      g.push_back(random(shapes[i]));
      m.push_back(random(shapes[i]));
      v.push_back(random(shapes[i], kFloat32, 0, 1));
      vmax.push_back(random(shapes[i], kFloat32, 0, 1));
      p2.push_back(p.back().clone());
      m2.push_back(m.back().clone());
      v2.push_back(v.back().clone());
      vmax2.push_back(vmax.back().clone());
      steps.push_back(static_cast<double>(i + 1));
    }
    if (decoupled)
      _fused_adamw_(p, g, m, v, vmax, steps, kAdam);
    else
      _fused_adam_(p, g, m, v, vmax, steps, kAdam);
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (decoupled)
        _fused_adamw_(p2[i], g[i], m2[i], v2[i], vmax2[i], steps[i], kAdam);
      else
        _fused_adam_(p2[i], g[i], m2[i], v2[i], vmax2[i], steps[i], kAdam);
      CHECK(same_bits(p[i], p2[i]));
      CHECK(same_bits(m[i], m2[i]));
      CHECK(same_bits(v[i], v2[i]));
      CHECK(same_bits(vmax[i], vmax2[i]));
    }
  }
  std::vector<Tensor> p = {random({5}), random({2, 3})}, g = {random({5}), random({2, 3})};
  std::vector<Tensor> buf = {random({5}), random({2, 3})};
  std::vector<Tensor> q = {p[0].clone(), p[1].clone()}, buf2 = {buf[0].clone(), buf[1].clone()};
  const bool first[] = {true, false};
  const SgdConfig c{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true};
  _fused_sgd_(p, g, buf, c, first);
  for (size_t i = 0; i < 2; ++i) {
    _fused_sgd_(q[i], g[i], buf2[i], c, first[i]);
    CHECK(same_bits(p[i], q[i]));
    CHECK(same_bits(buf[i], buf2[i]));
  }
  CHECK_FALSE(fused_step_uses_multi_tensor({p, g, buf}));  // CPU tensors: per parameter
}

TEST_CASE("The fused steps bump the version counters of what they write") {
  Tensor p = random({3}), g = random({3}), m = zeros({3}), v = zeros({3});
  const uint32_t pv = p._version(), gv = g._version(), mv = m._version();
  AdamConfig c = kAdam;
  c.amsgrad = false;
  _fused_adam_(p, g, m, v, Tensor(), 1, c);
  CHECK(p._version() == pv + 1);
  CHECK(m._version() == mv + 1);
  CHECK(g._version() == gv);
}

TEST_CASE("The fused steps refuse bad operands") {
  const Tensor p = random({2, 3}), g = random({2, 3}), m = zeros({2, 3}), v = zeros({2, 3});
  AdamConfig c = kAdam;
  c.amsgrad = false;
  CHECK_THROWS_WITH_AS(_fused_adam_(Tensor(), g, m, v, Tensor(), 1, c),
                       doctest::Contains("_fused_adam_: argument 'param' is an undefined tensor"), Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(arange(6).view({2, 3}), g, m, v, Tensor(), 1, c),
                       doctest::Contains("_fused_adam_: the parameter must be floating point, got dtype int64"), Error);
  CHECK_THROWS_WITH_AS(_fused_adamw_(p, random({3, 2}), m, v, Tensor(), 1, c),
                       doctest::Contains("_fused_adamw_: grad has shape [3, 2] but the parameter has shape [2, 3]"),
                       Error);
  CHECK_THROWS_WITH_AS(_fused_adamw_(p, g.to(kFloat64), m, v, Tensor(), 1, c),
                       doctest::Contains("_fused_adamw_: grad has dtype float64 but the parameter has dtype float32"),
                       Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(p, g, Tensor(), v, Tensor(), 1, c),
                       doctest::Contains("_fused_adam_: argument 'exp_avg' is an undefined tensor"), Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(p, g, m, zeros({6}), Tensor(), 1, c),
                       doctest::Contains("_fused_adam_: exp_avg_sq has shape [6] but the parameter has shape [2, 3]"),
                       Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(random({1, 3}).expand({2, 3}), g, m, v, Tensor(), 1, c),
                       doctest::Contains("_fused_adam_: the parameter (shape [2, 3], strides [0, 1]) has elements that "
                                         "share memory"),
                       Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(p, g, zeros({1, 3}).expand({2, 3}), v, Tensor(), 1, c),
                       doctest::Contains("_fused_adam_: exp_avg (shape [2, 3], strides [0, 1]) has elements that share "
                                         "memory"),
                       Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(p, g, p.view({2, 3}), v, Tensor(), 1, c),
                       doctest::Contains("_fused_adam_: exp_avg shares memory with the parameter"), Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(p, g, m, m, Tensor(), 1, c),
                       doctest::Contains("_fused_adam_: exp_avg and exp_avg_sq share memory"), Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(p, g, m, v, zeros({2, 3}), 1, c),
                       doctest::Contains("_fused_adam_: amsgrad is off, so no max_exp_avg_sq is used"), Error);
  AdamConfig ams = kAdam;
  CHECK_THROWS_WITH_AS(_fused_adam_(p, g, m, v, Tensor(), 1, ams),
                       doctest::Contains("_fused_adam_: argument 'max_exp_avg_sq' is an undefined tensor"), Error);
  CHECK_THROWS_WITH_AS(
      _fused_adam_(p, g, m, v, Tensor(), 0, c),
      doctest::Contains("_fused_adam_: step must be a finite count >= 1 (the count after this update), "
                        "got 0"),
      Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(p, g, m, v, Tensor(), kNaN, c),
                       doctest::Contains("_fused_adam_: step must be a finite count >= 1"), Error);
  const SgdConfig plain{.lr = 0.1};
  CHECK_THROWS_WITH_AS(_fused_sgd_(p, g, m, plain, false),
                       doctest::Contains("_fused_sgd_: momentum is 0, so no momentum_buffer is used"), Error);
  const SgdConfig momentum{.lr = 0.1, .momentum = 0.9};
  CHECK_THROWS_WITH_AS(_fused_sgd_(p, g, Tensor(), momentum, false),
                       doctest::Contains("_fused_sgd_: argument 'momentum_buffer' is an undefined tensor"), Error);
  CHECK_THROWS_WITH_AS(_fused_sgd_(p, g, zeros({2, 3}, kFloat64), momentum, false),
                       doctest::Contains("_fused_sgd_: momentum_buffer has dtype float64 but the parameter has dtype "
                                         "float32"),
                       Error);
}

TEST_CASE("The list forms refuse lists of different lengths and check every parameter before writing") {
  const std::vector<Tensor> p = {random({2}), random({3})}, g = {random({2}), random({3})};
  const std::vector<Tensor> m = {zeros({2}), zeros({3})}, v = {zeros({2}), zeros({3})};
  const std::vector<double> steps = {1, 1};
  AdamConfig c = kAdam;
  c.amsgrad = false;
  CHECK_THROWS_WITH_AS(_fused_adam_(p, std::vector<Tensor>{g[0]}, m, v, {}, steps, c),
                       doctest::Contains("_fused_adam_: grads lists 1 tensors for 2 parameters"), Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(p, g, m, v, {}, std::vector<double>{1}, c),
                       doctest::Contains("_fused_adam_: steps lists 1 tensors for 2 parameters"), Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(p, g, m, v, std::vector<Tensor>{zeros({2})}, steps, kAdam),
                       doctest::Contains("_fused_adam_: max_exp_avg_sqs lists 1 tensors for 2 parameters"), Error);
  CHECK_THROWS_WITH_AS(_fused_adam_(p, g, m, v, m, steps, c),
                       doctest::Contains("_fused_adam_: amsgrad is off, so max_exp_avg_sqs must be empty"), Error);
  const std::vector<double> p0 = values(p[0]);
  const std::vector<Tensor> bad_g = {g[0], random({4})};
  CHECK_THROWS_WITH_AS(_fused_adamw_(p, bad_g, m, v, {}, steps, c),
                       doctest::Contains("_fused_adamw_: grad has shape [4] but the parameter has shape [3]"), Error);
  CHECK(values(p[0]) == p0);
  const bool first[] = {true};
  CHECK_THROWS_WITH_AS(_fused_sgd_(p, g, {}, SgdConfig{.lr = 0.1}, first),
                       doctest::Contains("_fused_sgd_: first_steps lists 1 tensors for 2 parameters"), Error);
}
