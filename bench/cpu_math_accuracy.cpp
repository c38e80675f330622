// Accuracy of Kiln's float32 CPU transcendental ops (exp, tanh, sigmoid, silu, GELU exact and
// tanh, the GELU derivatives) against float64, over a dense sweep: every 1e-4 in [-10, 10]
// plus the tails (every 0.01 out to +-100, and a few huge values). Prints, per op, the worst
// error in float32 ulps of the reference, the worst relative error where |ref| >= 1e-6, and
// the worst absolute error, each with the input where it happens (GELU's negative tail loses
// its relative accuracy to cancellation in 1 + erf, in any float formula of this form); and the same for the
// formula computed in float with scalar libm calls (what the kernels did before the vector
// path), for comparison. Informational: the tests hold the ops to the suites' tolerances.
//
//   cpu_math_accuracy
#include <kiln/kiln.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct Worst {
  double ulp = 0, ulp_at = 0, ulp_mid = 0, rel = 0, rel_at = 0, abs = 0, abs_at = 0;
  int64_t mismatched_specials = 0;  // NaN/Inf where the float-rounded reference has none, or the other way

  void add(double x, double got, double ref) {
    const auto rf = static_cast<float>(ref);  // the reference rounded to float: +-inf above FLT_MAX
    if (!std::isfinite(rf) || !std::isfinite(got)) {
      if (!((std::isnan(rf) && std::isnan(got)) || static_cast<float>(got) == rf)) ++mismatched_specials;
      return;
    }
    const double err = std::fabs(got - ref);
    const float ra = std::fabs(rf);
    const double ulp = static_cast<double>(std::nextafter(ra, std::numeric_limits<float>::infinity())) - ra;
    if (std::fabs(ref) >= std::numeric_limits<float>::min()) {
      if (err / ulp > this->ulp) this->ulp = err / ulp, ulp_at = x;
      if (std::fabs(x) <= 3 && err / ulp > ulp_mid) ulp_mid = err / ulp;
    }
    if (std::fabs(ref) >= 1e-6 && err / std::fabs(ref) > rel) rel = err / std::fabs(ref), rel_at = x;
    if (err > abs) abs = err, abs_at = x;
  }
};

// The float64 references in forms that do not cancel in the negative tails (1 + erf and 1 + tanh
// lose everything below about x = -6 even in float64).
double gelu_ref(double x) { return 0.5 * x * std::erfc(-x / std::numbers::sqrt2); }
double tanh_u(double x) { return std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x); }
double gelu_tanh_ref(double x) { return x / (1.0 + std::exp(-2.0 * tanh_u(x))); }
double gelu_grad_ref(double x) {
  return 0.5 * std::erfc(-x / std::numbers::sqrt2) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
}
double gelu_tanh_grad_ref(double x) {
  const double b = std::sqrt(2.0 / std::numbers::pi), k = 0.044715;
  const double s = 1.0 / (1.0 + std::exp(-2.0 * tanh_u(x))), s_rest = 1.0 / (1.0 + std::exp(2.0 * tanh_u(x)));
  return s + 2.0 * x * s * s_rest * b * (1 + 3 * k * x * x);
}

// The old scalar float formulas (unary_math.h / gelu_math.h instantiated for float).
float gelu_f(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752440f)); }
float gelu_tanh_f(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}
float gelu_grad_f(float x) {
  const float cdf = 0.5f * (1.0f + std::erf(x * 0.70710678118654752440f));
  return cdf + x * (std::exp(-0.5f * x * x) * 0.39894228040143267794f);
}
float gelu_tanh_grad_f(float x) {
  const float b = 0.79788456080286535588f, k = 0.044715f, x_sq = x * x;
  const float t = std::tanh(b * (x + k * x_sq * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * b * (1.0f + 3.0f * k * x_sq);
}

}  // namespace

int main() {
  std::vector<float> xs;
  for (int64_t i = -100000; i <= 100000; ++i) xs.push_back(static_cast<float>(static_cast<double>(i) * 1e-4));
  for (int64_t i = 1000; i <= 10000; ++i) {
    xs.push_back(static_cast<float>(static_cast<double>(i) * 0.01));
    xs.push_back(static_cast<float>(static_cast<double>(-i) * 0.01));
  }
  for (float v : {1e3f, 1e6f, 1e30f, std::numeric_limits<float>::max()}) {
    xs.push_back(v);
    xs.push_back(-v);
  }
  const auto n = static_cast<int64_t>(xs.size());
  const Tensor x = from_vector(xs, {n});
  const Tensor grad = ones({n});

  struct Row {
    const char* name;
    std::function<Tensor()> kiln;
    std::function<double(double)> ref;
    std::function<float(float)> scalar;
  };
  const Row rows[] = {
      {"exp", [&] { return exp(x); }, [](double v) { return std::exp(v); }, [](float v) { return std::exp(v); }},
      {"tanh", [&] { return tanh(x); }, [](double v) { return std::tanh(v); }, [](float v) { return std::tanh(v); }},
      {"sigmoid", [&] { return sigmoid(x); }, [](double v) { return 1 / (1 + std::exp(-v)); },
       [](float v) { return 1.0f / (1.0f + std::exp(-v)); }},
      {"silu", [&] { return silu(x); }, [](double v) { return v / (1 + std::exp(-v)); },
       [](float v) { return v / (1.0f + std::exp(-v)); }},
      {"gelu", [&] { return gelu(x); }, gelu_ref, gelu_f},
      {"gelu_tanh", [&] { return gelu(x, "tanh"); }, gelu_tanh_ref, gelu_tanh_f},
      {"gelu_backward", [&] { return gelu_backward(grad, x); }, gelu_grad_ref, gelu_grad_f},
      {"gelu_tanh_backward", [&] { return gelu_backward(grad, x, "tanh"); }, gelu_tanh_grad_ref, gelu_tanh_grad_f},
  };
  fmt::print("float32 against float64 over {} inputs in [-100, 100] (every 1e-4 in [-10, 10]) and +-1e3..FLT_MAX\n",
             n);
  fmt::print("ulp: of the reference rounded to float, where |ref| >= FLT_MIN; ulp |x|<=3: the same on [-3, 3];\n"
             "rel: where |ref| >= 1e-6; specials: NaN/Inf where the float-rounded reference differs\n");
  fmt::print("{:<19} {:<5} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}\n", "op", "path", "max ulp", "at x",
             "ulp |x|<=3", "max rel", "at x", "max abs", "at x", "specials");
  for (const Row& r : rows) {
    const std::vector<float> got = r.kiln().to_vector<float>();
    Worst kiln_w, scalar_w;
    for (int64_t i = 0; i < n; ++i) {
      const double ref = r.ref(static_cast<double>(xs[i]));
      kiln_w.add(xs[i], got[i], ref);
      scalar_w.add(xs[i], r.scalar(xs[i]), ref);
    }
    for (const auto& [path, w] : {std::pair{"kiln", kiln_w}, std::pair{"libm", scalar_w}})
      fmt::print("{:<19} {:<5} {:>11.2f} {:>10.4g} {:>10.2f} {:>10.2e} {:>10.4g} {:>10.2e} {:>10.4g} {:>8}\n", r.name,
                 path, w.ulp, w.ulp_at, w.ulp_mid, w.rel, w.rel_at, w.abs, w.abs_at, w.mismatched_specials);
  }
  return 0;
}
