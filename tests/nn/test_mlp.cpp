// nn::MLP: the layer list its options produce (every activation, bias on/off, dropout after
// each activation but never after the last Linear), forward against a float64 reference,
// train/eval with dropout, the option checks, and the short form nn::MLP({sizes}, activation).
#include <cmath>
#include <memory>
#include <type_traits>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

double act_ref(nn::Activation a, double x) {
  switch (a) {
    case nn::Activation::ReLU: return x > 0 ? x : 0.0;
    case nn::Activation::GELU: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case nn::Activation::GELUTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case nn::Activation::Tanh: return std::tanh(x);
  }
  return 0;
}

// Runs rows of x through the MLP's Linear layers (in order) in float64, applying `act`
// between them.
std::vector<double> mlp_ref(const nn::MLP& mlp, const Tensor& x, nn::Activation act) {
  std::vector<std::shared_ptr<nn::Linear>> linears;
  for (const auto& m : mlp.children())
    if (auto l = std::dynamic_pointer_cast<nn::Linear>(m)) linears.push_back(l);
  const int64_t rows = x.sizes()[0];
  std::vector<double> h = values(x);
  for (size_t li = 0; li < linears.size(); ++li) {
    const nn::Linear& l = *linears[li];
    const std::vector<double> w = values(l.weight);
    const std::vector<double> b = l.bias.defined() ? values(l.bias) : std::vector<double>();
    std::vector<double> next(static_cast<size_t>(rows * l.out_features));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < l.out_features; ++o) {
        double acc = b.empty() ? 0.0 : b[o];
        for (int64_t k = 0; k < l.in_features; ++k) acc += h[r * l.in_features + k] * w[o * l.in_features + k];
        next[r * l.out_features + o] = li + 1 < linears.size() ? act_ref(act, acc) : acc;
      }
    h = std::move(next);
  }
  return h;
}

std::vector<std::string> layer_names(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& c : m.children()) out.push_back(c->name());
  return out;
}

}  // namespace

TEST_CASE("MLP builds Linear -> activation -> ... -> Linear") {
  manual_seed(91);
  nn::MLP mlp({.sizes = {6, 8, 5, 3}});
  CHECK(mlp.name() == "MLP");
  CHECK(layer_names(mlp) == std::vector<std::string>{"Linear", "ReLU", "Linear", "ReLU", "Linear"});
  const std::vector<std::pair<int64_t, int64_t>> dims = {{6, 8}, {8, 5}, {5, 3}};
  size_t li = 0;
  for (const auto& c : mlp.children())
    if (auto l = std::dynamic_pointer_cast<nn::Linear>(c)) {
      REQUIRE(li < dims.size());
      CHECK(l->in_features == dims[li].first);
      CHECK(l->out_features == dims[li].second);
      CHECK(l->bias.defined());
      ++li;
    }
  CHECK(li == 3);
  CHECK(mlp.options().sizes == std::vector<int64_t>{6, 8, 5, 3});
  CHECK(mlp.options().activation == nn::Activation::ReLU);
  // Two sizes: a single Linear, no activation.
  nn::MLP one({.sizes = {4, 2}, .activation = nn::Activation::GELU});
  CHECK(layer_names(one) == std::vector<std::string>{"Linear"});
}

TEST_CASE("MLP activations: each enum value gives its layer and its function") {
  manual_seed(92);
  struct Case {
    nn::Activation act;
    std::string repr;
  };
  const std::vector<Case> cases = {{nn::Activation::ReLU, "ReLU()"},
                                   {nn::Activation::GELU, "GELU(approximate='none')"},
                                   {nn::Activation::GELUTanh, "GELU(approximate='tanh')"},
                                   {nn::Activation::Tanh, "Tanh()"}};
  for (const Case& c : cases) {
    nn::MLP mlp({.sizes = {5, 7, 4}, .activation = c.act});
    INFO(c.repr);
    REQUIRE(mlp.size() == 3);
    CHECK(mlp[1]->repr() == c.repr);
    mlp.to(kFloat64);
    // Inputs large enough that every activation differs from the others.
    const Tensor x = random({6, 5}, kFloat64, -4, 4);
    check_close(mlp(x), mlp_ref(mlp, x, c.act), {6, 4});
  }
}

TEST_CASE("MLP without bias") {
  manual_seed(93);
  nn::MLP mlp({.sizes = {3, 4, 2}, .activation = nn::Activation::Tanh, .bias = false});
  std::vector<std::string> names;
  for (const auto& [n, p] : mlp.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "2.weight"});
  mlp.to(kFloat64);
  const Tensor x = random({5, 3}, kFloat64);
  check_close(mlp(x), mlp_ref(mlp, x, nn::Activation::Tanh), {5, 2});
  CHECK(mlp.repr() ==
        "MLP(\n"
        "  (0): Linear(in_features=3, out_features=4, bias=False)\n"
        "  (1): Tanh()\n"
        "  (2): Linear(in_features=4, out_features=2, bias=False)\n"
        ")");
}

TEST_CASE("MLP with dropout adds Dropout after each activation, not after the last Linear") {
  manual_seed(94);
  nn::MLP mlp({.sizes = {8, 16, 16, 4}, .activation = nn::Activation::GELU, .dropout = 0.25});
  CHECK(layer_names(mlp) ==
        std::vector<std::string>{"Linear", "GELU", "Dropout", "Linear", "GELU", "Dropout", "Linear"});
  for (size_t i : {2u, 5u}) {
    auto d = std::dynamic_pointer_cast<nn::Dropout>(mlp[i]);
    REQUIRE(d != nullptr);
    CHECK(d->p == 0.25);
  }
  CHECK(mlp.repr() ==
        "MLP(\n"
        "  (0): Linear(in_features=8, out_features=16, bias=True)\n"
        "  (1): GELU(approximate='none')\n"
        "  (2): Dropout(p=0.25, inplace=False)\n"
        "  (3): Linear(in_features=16, out_features=16, bias=True)\n"
        "  (4): GELU(approximate='none')\n"
        "  (5): Dropout(p=0.25, inplace=False)\n"
        "  (6): Linear(in_features=16, out_features=4, bias=True)\n"
        ")");
  std::vector<std::string> names;
  for (const auto& [n, p] : mlp.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias", "6.weight", "6.bias"});

  mlp.to(kFloat64);
  const Tensor x = random({32, 8}, kFloat64);
  // Eval: dropout is off, the result is the plain composition and is deterministic.
  mlp.eval();
  for (const auto& c : mlp.children()) CHECK_FALSE(c->is_training());
  const std::vector<double> ref = mlp_ref(mlp, x, nn::Activation::GELU);
  check_close(mlp(x), ref, {32, 4});
  // Train: dropout perturbs the output (2 * 16 hidden units per row are dropped at 0.25).
  mlp.train();
  for (const auto& c : mlp.children()) CHECK(c->is_training());
  const std::vector<double> noisy = values(mlp(x));
  double max_diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) max_diff = std::max(max_diff, std::abs(noisy[i] - ref[i]));
  CHECK(max_diff > 1e-3);
}

TEST_CASE("MLP option errors") {
  CHECK_THROWS_WITH_AS(nn::MLP({.sizes = {4}}),
                       doctest::Contains("MLP: sizes needs at least an input and an output size, got [4]"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(nn::MLP({.sizes = {}}),
                       doctest::Contains("MLP: sizes needs at least an input and an output size, got []"), kiln::Error);
  CHECK_THROWS_WITH_AS(nn::MLP({.sizes = {4, 0, 2}}),
                       doctest::Contains("MLP: every size must be positive, got [4, 0, 2]"), kiln::Error);
  CHECK_THROWS_WITH_AS(nn::MLP({.sizes = {4, -3}}), doctest::Contains("MLP: every size must be positive, got [4, -3]"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(nn::MLP({.sizes = {4, 2}, .dropout = 1.5}),
                       doctest::Contains("MLP: dropout has to be between 0 and 1, but got 1.5"), kiln::Error);
  CHECK_THROWS_WITH_AS(nn::MLP({.sizes = {4, 2}, .dropout = -0.1}),
                       doctest::Contains("MLP: dropout has to be between 0 and 1, but got -0.1"), kiln::Error);
  nn::MLP mlp({.sizes = {4, 2}});
  CHECK_THROWS_WITH_AS(mlp[1], doctest::Contains("MLP: index 1 is out of range for 1 modules"), kiln::Error);
  CHECK_THROWS_WITH_AS(mlp(random({3, 5})),
                       doctest::Contains("linear: input's last dimension (5) does not match in_features (4)"),
                       kiln::Error);
}

TEST_CASE("MLP short form: nn::MLP({sizes}) and nn::MLP({sizes}, activation) build what the options build") {
  // Every spelling compiles beside the designated-initialiser one (Note [MLP's two forms]);
  // a single size is rejected at compile time by the short form.
  static_assert(std::is_constructible_v<nn::MLP, const int64_t (&)[3]>);
  static_assert(std::is_constructible_v<nn::MLP, const int64_t (&)[2], nn::Activation>);
  static_assert(!std::is_constructible_v<nn::MLP, const int64_t (&)[1]>);
  static_assert(std::is_constructible_v<nn::MLP, std::vector<int64_t>>);
  static_assert(std::is_constructible_v<nn::MLP, const std::vector<int64_t>&, nn::Activation>);
  static_assert(std::is_constructible_v<nn::MLP, nn::MLPOptions>);
  manual_seed(95);
  nn::MLP short_form({6, 8, 3}, nn::Activation::GELU);
  manual_seed(95);
  nn::MLP long_form({.sizes = {6, 8, 3}, .activation = nn::Activation::GELU});
  CHECK(short_form.repr() == long_form.repr());
  CHECK(short_form.options().sizes == std::vector<int64_t>{6, 8, 3});
  CHECK(short_form.options().activation == nn::Activation::GELU);
  CHECK(short_form.options().bias);
  CHECK(short_form.options().dropout == 0.0);
  short_form.to(kFloat64);
  long_form.to(kFloat64);
  const Tensor x = random({4, 6}, kFloat64);
  // Same seed, same layers: the same weights and the same function.
  CHECK(equal(short_form(x), long_form(x)));
  check_close(short_form(x), mlp_ref(short_form, x, nn::Activation::GELU), {4, 3});

  nn::MLP relu({5, 7, 2});  // the default activation is ReLU, as in MLPOptions
  CHECK(layer_names(relu) == std::vector<std::string>{"Linear", "ReLU", "Linear"});
  CHECK(relu.options().activation == nn::Activation::ReLU);
  const int64_t hidden = 9;
  nn::MLP mixed({5, hidden, 2}, nn::Activation::Tanh);  // literals and int64_t variables together
  CHECK(mixed.options().sizes == std::vector<int64_t>{5, 9, 2});
  const std::vector<int64_t> sizes = {3, 4, 4, 1};  // sizes known at run time
  nn::MLP from_vector(sizes, nn::Activation::GELUTanh);
  CHECK(from_vector.options().sizes == sizes);
  CHECK(layer_names(from_vector) ==
        std::vector<std::string>{"Linear", "GELU", "Linear", "GELU", "Linear"});
  CHECK_THROWS_WITH_AS(nn::MLP({4, -1, 2}, nn::Activation::Tanh),
                       doctest::Contains("MLP: every size must be positive, got [4, -1, 2]"), kiln::Error);
  CHECK_THROWS_WITH_AS(nn::MLP(std::vector<int64_t>{4}),
                       doctest::Contains("MLP: sizes needs at least an input and an output size, got [4]"),
                       kiln::Error);
}
