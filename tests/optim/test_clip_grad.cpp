// nn::utils::clip_grad_norm_ against float64 references: the total norm of every order
// (1, 2, 3, infinity) over several gradients, the scaling by max_norm / (norm + 1e-6) clamped
// to 1, skipped parameters, mixed dtypes, the non-finite check and each error.
#include <cmath>

#include "optim_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// The norm of order p (infinity: largest magnitude) of all values taken together.
double reference_norm(const std::vector<std::vector<double>>& grads, double p) {
  double acc = 0;
  for (const auto& g : grads)
    for (double x : g) {
      if (std::isinf(p))
        acc = std::max(acc, std::abs(x));
      else
        acc += std::pow(std::abs(x), p);
    }
  return std::isinf(p) ? acc : std::pow(acc, 1.0 / p);
}

}  // namespace

TEST_CASE("clip_grad_norm_ returns the total norm and scales the gradients, for every norm order") {
  manual_seed(1461);
  for (double p : {2.0, 1.0, 3.0, kInf}) {
    INFO("norm_type " << p);
    std::vector<Tensor> params = {random_param({3, 4}), random_param({5}), random_param({2})};
    std::vector<std::vector<double>> grads;
    for (size_t i = 0; i < 2; ++i) grads.push_back(set_random_grad(params[i]));  // params[2] has none
    const double norm = reference_norm(grads, p);
    const double max_norm = norm / 3;  // clipping happens
    const Tensor total = nn::utils::clip_grad_norm_(params, max_norm, p);
    CHECK(total.dim() == 0);
    CHECK(total.dtype() == kFloat32);
    CHECK(total.item<double>() == doctest::Approx(norm).epsilon(1e-6));
    const double coef = max_norm / (norm + 1e-6);
    for (size_t i = 0; i < 2; ++i) {
      std::vector<double> expected = grads[i];
      for (double& x : expected) x *= coef;
      check_close(params[i].grad(), expected, params[i].sizes());
    }
    CHECK_FALSE(params[2].grad().defined());
    // Clipped gradients now have (almost exactly) max_norm.
    std::vector<std::vector<double>> after = {values(params[0].grad()), values(params[1].grad())};
    CHECK(reference_norm(after, p) == doctest::Approx(max_norm).epsilon(1e-5));
  }
}

TEST_CASE("clip_grad_norm_ leaves gradients below max_norm as they are (coefficient clamped to 1)") {
  manual_seed(1462);
  std::vector<Tensor> params = {random_param({6}, kFloat64), random_param({2, 2}, kFloat64)};
  std::vector<std::vector<double>> grads = {set_random_grad(params[0]), set_random_grad(params[1])};
  const double norm = reference_norm(grads, 2.0);
  const Tensor total = nn::utils::clip_grad_norm_(params, norm * 2);
  CHECK(total.dtype() == kFloat64);
  CHECK(total.item<double>() == doctest::Approx(norm).epsilon(1e-12));
  CHECK(values(params[0].grad()) == grads[0]);  // multiplied by exactly 1
  CHECK(values(params[1].grad()) == grads[1]);
}

TEST_CASE("clip_grad_norm_ over gradients of different dtypes computes the norm in the promoted dtype") {
  manual_seed(1463);
  std::vector<Tensor> params = {random_param({8}, kFloat16), random_param({4}, kFloat64)};
  std::vector<std::vector<double>> grads = {set_random_grad(params[0]), set_random_grad(params[1])};
  const double norm = reference_norm(grads, 2.0);
  const Tensor total = nn::utils::clip_grad_norm_(params, 0.5);
  CHECK(total.dtype() == kFloat64);
  // float16's own norm is rounded to float16 before it joins the total.
  CHECK(total.item<double>() == doctest::Approx(norm).epsilon(2e-3));
  CHECK(params[0].grad().dtype() == kFloat16);
  const double coef = 0.5 / (total.item<double>() + 1e-6);
  std::vector<double> expected = grads[1];
  for (double& x : expected) x *= coef;
  check_close(params[1].grad(), expected, {4});
  expected = grads[0];
  for (double& x : expected) x *= coef;
  check_close(params[0].grad(), expected, {8});
}

TEST_CASE("clip_grad_norm_ of float16 gradients whose squares overflow float16") {
  // 300^2 = 90000 is past float16's largest value (65504); the norm itself (about 424) is not.
  Tensor p = random_param({2}, kFloat16);
  p.mutable_grad() = from_vector<double>({300.0, -300.0}, {2}).to(kFloat16);
  const Tensor total = nn::utils::clip_grad_norm_({p}, 1000.0);
  CHECK(total.dtype() == kFloat16);
  CHECK(total.item<double>() == doctest::Approx(300.0 * std::sqrt(2.0)).epsilon(1e-3));
  CHECK(values(p.grad()) == std::vector<double>{300.0, -300.0});
}

TEST_CASE("clip_grad_norm_ with no gradients returns 0") {
  std::vector<Tensor> params = {random_param({3})};
  const Tensor total = nn::utils::clip_grad_norm_(params, 1.0);
  CHECK(total.dim() == 0);
  CHECK(total.item<double>() == 0.0);
  CHECK(nn::utils::clip_grad_norm_({}, 1.0).item<double>() == 0.0);
}

TEST_CASE("clip_grad_norm_ with a non-finite norm: an error on request, NaN gradients otherwise") {
  manual_seed(1464);
  Tensor p = random_param({4});
  std::vector<double> g = set_random_grad(p);
  g[2] = kNaN;
  p.mutable_grad() = from_vector(g, {4}).to(kFloat32);
  const std::vector<double> before = values(p.grad());
  CHECK_THROWS_WITH_AS(
      nn::utils::clip_grad_norm_({p}, 1.0, 2.0, true),
      doctest::Contains("clip_grad_norm_: the total norm of order 2 for gradients from `parameters` is "
                        "non-finite (nan), so it cannot be clipped"),
      Error);
  const std::vector<double> unchanged = values(p.grad());
  for (size_t i = 0; i < 4; ++i) CHECK((std::isnan(before[i]) ? std::isnan(unchanged[i]) : unchanged[i] == before[i]));
  const Tensor total = nn::utils::clip_grad_norm_({p}, 1.0);
  CHECK(std::isnan(total.item<double>()));
  for (double x : values(p.grad())) CHECK(std::isnan(x));
}

TEST_CASE("clip_grad_norm_ refuses bad arguments") {
  Tensor p = random_param({2});
  set_random_grad(p);
  CHECK_THROWS_WITH_AS(nn::utils::clip_grad_norm_({p}, 1.0, 0.0),
                       doctest::Contains("clip_grad_norm_: norm_type must be positive or infinity, got 0"), Error);
  CHECK_THROWS_WITH_AS(nn::utils::clip_grad_norm_({p}, -1.0),
                       doctest::Contains("clip_grad_norm_: max_norm must be >= 0, got -1"), Error);
  CHECK_THROWS_WITH_AS(nn::utils::clip_grad_norm_({p, Tensor()}, 1.0),
                       doctest::Contains("clip_grad_norm_: parameter 1 is an undefined tensor"), Error);
}
