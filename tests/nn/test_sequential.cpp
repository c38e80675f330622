// nn::Sequential: building from modules by value and by push_back, indexing, running the
// children in order (checked with order-sensitive probes and a float64 reference), dotted
// parameter names through nesting, and PyTorch's nested repr.
#include <memory>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Logs its tag when run and computes 2 * x + add: two probes in the wrong order give a
// different result (2 (2x + a) + b != 2 (2x + b) + a for a != b).
struct Probe : nn::Module {
  Probe(std::string t, std::vector<std::string>* l, double a) : Module("Probe"), tag(std::move(t)), log(l), add(a) {}
  Tensor forward(const Tensor& x) override {
    log->push_back(tag);
    return x * 2.0 + add;
  }
  std::string extra_repr() const override { return "tag=" + tag; }
  std::string tag;
  std::vector<std::string>* log;
  double add;
};

// Modules can't be copied: only temporaries (or moved modules) build a Sequential by value.
static_assert(std::is_constructible_v<nn::Sequential, nn::Linear, nn::ReLU>);
static_assert(!std::is_constructible_v<nn::Sequential, nn::Linear&>);
static_assert(!std::is_constructible_v<nn::Sequential, nn::Sequential&>);
static_assert(!std::is_constructible_v<nn::Sequential, const nn::ReLU&, nn::Tanh>);

}  // namespace

TEST_CASE("Sequential from modules by value runs them in order") {
  manual_seed(81);
  std::vector<std::string> log;
  nn::Sequential seq(Probe("a", &log, 1), Probe("b", &log, 3), Probe("c", &log, -5));
  REQUIRE(seq.size() == 3);
  const Tensor x = random({4, 3});
  const Tensor y = seq(x);
  CHECK(log == std::vector<std::string>{"a", "b", "c"});
  // 2 (2 (2x + 1) + 3) - 5 = 8x + 5, exact in float32 for these inputs.
  check_close(y, reference_unary(x, [](double v) { return 8 * v + 5; }), {4, 3});
  // Names are the positions.
  const auto& named = seq.named_children();
  REQUIRE(named.size() == 3);
  CHECK(named[0].first == "0");
  CHECK(named[2].first == "2");
  CHECK(std::dynamic_pointer_cast<Probe>(seq[1])->tag == "b");
}

TEST_CASE("Sequential of Linear and activation layers equals the composition") {
  manual_seed(82);
  nn::Sequential seq(nn::Linear(5, 4), nn::Tanh(), nn::Linear(4, 2));
  seq.to(kFloat64);
  auto l0 = std::dynamic_pointer_cast<nn::Linear>(seq[0]);
  auto l2 = std::dynamic_pointer_cast<nn::Linear>(seq[2]);
  REQUIRE(l0 != nullptr);
  REQUIRE(std::dynamic_pointer_cast<nn::Tanh>(seq[1]) != nullptr);
  REQUIRE(l2 != nullptr);
  const Tensor x = random({3, 5}, kFloat64);
  const std::vector<double> vx = values(x), w0 = values(l0->weight), b0 = values(l0->bias);
  const std::vector<double> w2 = values(l2->weight), b2 = values(l2->bias);
  std::vector<double> expect;
  for (int r = 0; r < 3; ++r) {
    std::vector<double> h(4);
    for (int o = 0; o < 4; ++o) {
      double acc = b0[o];
      for (int k = 0; k < 5; ++k) acc += vx[r * 5 + k] * w0[o * 5 + k];
      h[o] = std::tanh(acc);
    }
    for (int o = 0; o < 2; ++o) {
      double acc = b2[o];
      for (int k = 0; k < 4; ++k) acc += h[k] * w2[o * 4 + k];
      expect.push_back(acc);
    }
  }
  check_close(seq(x), expect, {3, 2});
  // The by-value modules were moved in: their parameters are the Sequential's.
  std::vector<std::string> names;
  for (const auto& [n, p] : seq.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(seq.named_parameters()[0].second.is_same(l0->weight));
}

TEST_CASE("Sequential push_back and indexing") {
  manual_seed(83);
  std::vector<std::string> log;
  nn::Sequential seq;
  CHECK(seq.size() == 0);
  // An empty Sequential passes its input through.
  const Tensor x = random({2, 2});
  CHECK(seq(x).is_same(x));
  auto first = std::make_shared<Probe>("first", &log, 1);
  nn::Sequential& ret = seq.push_back(first).push_back(std::make_shared<Probe>("second", &log, 2));
  CHECK(&ret == &seq);
  REQUIRE(seq.size() == 2);
  CHECK(seq[0] == first);  // the same object, shared
  CHECK(seq.named_children()[1].first == "1");
  seq.push_back(std::make_shared<nn::ReLU>());
  CHECK(seq.named_children()[2].first == "2");
  seq(x);
  CHECK(log == std::vector<std::string>{"first", "second"});
  CHECK_THROWS_WITH_AS(seq[3], doctest::Contains("Sequential: index 3 is out of range for 3 modules"), kiln::Error);
  CHECK_THROWS_WITH_AS(nn::Sequential()[0], doctest::Contains("Sequential: index 0 is out of range for 0 modules"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(seq.push_back(nullptr), doctest::Contains("register_module: child \"3\" of Sequential is null"),
                       kiln::Error);
  CHECK(seq.size() == 3);
}

TEST_CASE("Sequential prints nested modules indented like PyTorch") {
  manual_seed(84);
  CHECK(nn::Sequential().repr() == "Sequential()");
  nn::Sequential seq(nn::Linear(2, 3), nn::Sequential(nn::ReLU(), nn::Linear(3, 1, false)), nn::Dropout(0.1));
  CHECK(seq.repr() ==
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): Sequential(\n"
        "    (0): ReLU()\n"
        "    (1): Linear(in_features=3, out_features=1, bias=False)\n"
        "  )\n"
        "  (2): Dropout(p=0.1, inplace=False)\n"
        ")");
  std::vector<std::string> names;
  for (const auto& [n, p] : seq.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "1.1.weight"});
  // Three levels: indentation accumulates two spaces per level.
  std::vector<std::string> log;
  // (A single Sequential temporary would initialise `deep` itself, by C++'s copy elision,
  // so the middle level is added with push_back.)
  nn::Sequential deep;
  deep.push_back(std::make_shared<nn::Sequential>(nn::Sequential(Probe("x", &log, 0), nn::Tanh()), nn::GELU("tanh")));
  CHECK(deep.repr() ==
        "Sequential(\n"
        "  (0): Sequential(\n"
        "    (0): Sequential(\n"
        "      (0): Probe(tag=x)\n"
        "      (1): Tanh()\n"
        "    )\n"
        "    (1): GELU(approximate='tanh')\n"
        "  )\n"
        ")");
}
