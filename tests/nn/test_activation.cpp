// The parameter-free layers GELU, ReLU, Tanh and Dropout: forward against float64 formulas
// written here, PyTorch's reprs, argument checks, and Dropout following train()/eval().
#include <cmath>
#include <sstream>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

void check_module(nn::Module& m, const std::function<double(double)>& ref) {
  for (DType dt : kFloatTypes)
    for (Layout l : kLayouts) {
      const Tensor x = random_with_layout({6, 9}, l, dt, -4, 4);
      INFO(m.name(), " ", dt, " ", layout_name(l));
      const Tensor y = m(x);
      CHECK(y.dtype() == dt);
      check_close(y, reference_unary(x, ref), {6, 9});
    }
}

}  // namespace

TEST_CASE("GELU, ReLU and Tanh modules compute their functions") {
  manual_seed(71);
  nn::GELU gelu;
  CHECK(gelu.approximate == "none");
  check_module(gelu, gelu_erf);
  nn::GELU gelu_t("tanh");
  check_module(gelu_t, gelu_tanh);
  nn::ReLU relu;
  check_module(relu, [](double v) { return v > 0 ? v : 0.0; });
  nn::Tanh tanh_m;
  check_module(tanh_m, [](double v) { return std::tanh(v); });
  // The two GELUs really differ (by up to ~5e-4 near |x| ~ 2), so the check above can tell them apart.
  const Tensor x = from_vector<double>({-2.0, -1.5, 1.5, 2.0, 3.0}, {5});
  const std::vector<double> a = gelu(x).to_vector<double>(), b = gelu_t(x).to_vector<double>();
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::abs(a[i] - b[i]));
  CHECK(max_diff > 1e-4);
}

TEST_CASE("activation modules have no parameters and print like PyTorch") {
  nn::GELU gelu;
  nn::GELU gelu_t("tanh");
  nn::ReLU relu;
  nn::Tanh tanh_m;
  nn::Dropout drop(0.1);
  nn::Dropout drop_default;
  CHECK(gelu.repr() == "GELU(approximate='none')");
  CHECK(gelu_t.repr() == "GELU(approximate='tanh')");
  CHECK(relu.repr() == "ReLU()");
  CHECK(tanh_m.repr() == "Tanh()");
  CHECK(drop.repr() == "Dropout(p=0.1, inplace=False)");
  CHECK(drop_default.repr() == "Dropout(p=0.5, inplace=False)");
  // Python prints float p with a decimal point.
  CHECK(nn::Dropout(0.0).repr() == "Dropout(p=0.0, inplace=False)");
  CHECK(nn::Dropout(1.0).repr() == "Dropout(p=1.0, inplace=False)");
  CHECK(nn::Dropout(0.25).repr() == "Dropout(p=0.25, inplace=False)");
  std::ostringstream os;
  os << relu;
  CHECK(os.str() == "ReLU()");
  for (nn::Module* m : std::vector<nn::Module*>{&gelu, &relu, &tanh_m, &drop}) {
    CHECK(m->parameters().empty());
    CHECK(m->buffers().empty());
    CHECK(m->children().empty());
  }
  CHECK(gelu.name() == "GELU");
  CHECK(drop.name() == "Dropout");
  CHECK(drop.p == 0.1);
}

TEST_CASE("GELU and Dropout check their arguments") {
  CHECK_THROWS_WITH_AS(nn::GELU("exact"),
                       doctest::Contains("GELU: approximate must be \"none\" or \"tanh\", got \"exact\""), kiln::Error);
  CHECK_THROWS_WITH_AS(nn::Dropout(1.5),
                       doctest::Contains("Dropout: probability has to be between 0 and 1, but got 1.5"), kiln::Error);
  CHECK_THROWS_WITH_AS(nn::Dropout(-0.5),
                       doctest::Contains("Dropout: probability has to be between 0 and 1, but got -0.5"), kiln::Error);
}

TEST_CASE("Dropout drops in training mode and is the identity in eval mode") {
  manual_seed(72);
  nn::Dropout drop(0.5);
  CHECK(drop.is_training());                               // modules start in training mode, as in PyTorch
  const Tensor x = random({100, 50}, kFloat32, 0.5, 2.0);  // no zeros
  const std::vector<double> vx = values(x);
  const std::vector<double> y = values(drop(x));
  int64_t zeros = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0.0) {
      ++zeros;
      continue;
    }
    CHECK(std::abs(y[i] - 2 * vx[i]) <= 1e-6 * std::abs(y[i]));  // kept values scaled by 1/(1-p)
  }
  // 5000 draws at p = 0.5: sd ~ 35, so +-300 is ~8.5 sd.
  CHECK(std::abs(zeros - 2500) < 300);
  drop.eval();
  CHECK_FALSE(drop.is_training());
  CHECK(drop(x).is_same(x));
  drop.train();
  CHECK(drop.is_training());
  CHECK_FALSE(drop(x).is_same(x));
  // p = 0 is the identity even while training.
  nn::Dropout none(0.0);
  CHECK(none(x).is_same(x));
}
