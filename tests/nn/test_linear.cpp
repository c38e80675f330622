// nn::Linear: its parameters and their registration, PyTorch's default initialisation
// (checked by bounds and by the empirical variance of a large layer), forward against
// x @ W^T + b computed here in float64, in-place dtype conversion and re-initialisation.
#include <cmath>
#include <limits>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Random multiples of 1/8 in [-2, 2) as `dtype`: products and sums are exact in float32.
Tensor grid(const Shape& shape, DType dtype = kFloat32) {
  std::vector<double> v = random(shape, kInt64, -16, 16).to_vector<double>();
  for (double& x : v) x *= 0.125;
  return from_vector(v, shape).to(dtype);
}

}  // namespace

TEST_CASE("Linear registers weight [out, in] and bias [out] as trainable parameters") {
  manual_seed(61);
  nn::Linear layer(5, 3);
  CHECK(layer.in_features == 5);
  CHECK(layer.out_features == 3);
  CHECK(layer.weight.sizes() == Shape{3, 5});
  CHECK(layer.bias.sizes() == Shape{3});
  CHECK(layer.weight.dtype() == kFloat32);
  CHECK(layer.weight.device() == Device::cpu());
  const auto named = layer.named_parameters();
  REQUIRE(named.size() == 2);
  CHECK(named[0].first == "weight");
  CHECK(named[1].first == "bias");
  // The registered tensors are the members themselves, not copies.
  CHECK(named[0].second.is_same(layer.weight));
  CHECK(named[1].second.is_same(layer.bias));
  CHECK(layer.weight.requires_grad());
  CHECK(layer.bias.requires_grad());
  CHECK(layer.buffers().empty());
  CHECK(layer.children().empty());
  CHECK(layer.name() == "Linear");
  CHECK(layer.repr() == "Linear(in_features=5, out_features=3, bias=True)");
}

TEST_CASE("Linear without bias") {
  manual_seed(62);
  nn::Linear layer(4, 6, false);
  CHECK_FALSE(layer.bias.defined());
  const auto named = layer.named_parameters();
  REQUIRE(named.size() == 1);
  CHECK(named[0].first == "weight");
  CHECK(layer.repr() == "Linear(in_features=4, out_features=6, bias=False)");
  layer.to(kFloat64);
  const Tensor x = random({3, 4}, kFloat64);
  check_close(layer(x), reference_linear(x, layer.weight, Tensor()), {3, 6});
}

TEST_CASE("Linear's default initialisation is U(-1/sqrt(in), 1/sqrt(in))") {
  manual_seed(63);
  for (auto [in, out] : std::vector<std::pair<int64_t, int64_t>>{{3, 2}, {17, 5}, {100, 30}}) {
    nn::Linear layer(in, out);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    INFO("in ", in, " out ", out);
    for (const Tensor& p : {layer.weight, layer.bias})
      for (double v : values(p)) {
        CHECK(v >= -bound);
        CHECK(v <= bound);
      }
  }
  // A large layer: 512 * 256 weights. U(-b, b) has mean 0 and variance b^2 / 3; the sample
  // variance has a relative sd of sqrt(4/45 / n) / (1/3) ~ 0.25%, so 2% is ~8 sd, while
  // kaiming with a = 0 (b = sqrt(6 / in)) would be 6x too wide.
  nn::Linear big(256, 512);
  const double b = 1.0 / 16.0;
  const std::vector<double> w = values(big.weight);
  double mean = 0, sq = 0, lo = 1, hi = -1;
  for (double v : w) {
    mean += v;
    sq += v * v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  mean /= static_cast<double>(w.size());
  const double var = sq / static_cast<double>(w.size()) - mean * mean;
  CHECK(std::abs(mean) < 0.01 * b);  // sd of the mean ~ 0.0016 b
  CHECK(std::abs(var / (b * b / 3) - 1) < 0.02);
  CHECK(lo >= -b);
  CHECK(hi <= b);
  CHECK(lo < -0.999 * b);  // the whole interval is used
  CHECK(hi > 0.999 * b);
  // The bias uses the same bound.
  const std::vector<double> bias = values(big.bias);
  double bmax = 0;
  for (double v : bias) bmax = std::max(bmax, std::abs(v));
  CHECK(bmax <= b);
  CHECK(bmax > 0.9 * b);  // 512 draws: P(all inside 0.9 b) = 0.9^512
}

TEST_CASE("Linear forward equals x @ W^T + b") {
  manual_seed(64);
  // float64: any values, reference in float64.
  nn::Linear layer(7, 4);
  layer.to(kFloat64);
  for (const Shape& xs : std::vector<Shape>{{7}, {5, 7}, {2, 3, 7}}) {
    const Tensor x = random(xs, kFloat64);
    Shape out_shape = xs;
    out_shape.back() = 4;
    INFO(shape_str(xs));
    const Tensor y = layer(x);
    CHECK(y.dtype() == kFloat64);
    check_close(y, reference_linear(x, layer.weight, layer.bias), out_shape);
    // operator() is forward().
    check_close(layer.forward(x), values(y), out_shape, Tolerance{0, 0});
  }
  // float32 with parameters overwritten in place (grid values: exact products), which the
  // forward pass must see through the registered handles.
  nn::Linear f32(9, 3);
  {
    NoGradGuard no_grad;  // parameters are leaves that require grad: writes go under no_grad, as in PyTorch
    f32.weight.copy_(grid({3, 9}));
    f32.bias.copy_(grid({3}));
  }
  const Tensor x = grid({4, 9});
  check_close(f32(x), reference_linear(x, f32.weight, f32.bias), {4, 3});
  // A transposed (non-contiguous) input.
  const Tensor xt = grid({9, 4}).t();
  check_close(f32(xt), reference_linear(xt, f32.weight, f32.bias), {4, 3});
}

TEST_CASE("Linear rejects an input with the wrong last dimension") {
  manual_seed(65);
  nn::Linear layer(1024, 16);
  CHECK_THROWS_WITH_AS(layer(random({8, 512})),
                       doctest::Contains("linear: input's last dimension (512) does not match in_features (1024)"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(layer(random({1024, 8})),
                       doctest::Contains("linear: input's last dimension (8) does not match in_features (1024)"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(
      layer(random({8, 1024}, kFloat64)),
      doctest::Contains("linear: expected input and weight to have the same dtype, but got float64 and "
                        "float32"),
      kiln::Error);
  CHECK_THROWS_WITH_AS(nn::Linear(-1, 3),
                       doctest::Contains("Linear: in_features and out_features must be non-negative, got -1 and 3"),
                       kiln::Error);
}

TEST_CASE("Linear.to(dtype) converts the parameters in place") {
  manual_seed(66);
  for (DType dt : {kFloat64, kBFloat16, kFloat16}) {
    nn::Linear layer(6, 3);
    Tensor w = layer.weight;  // handles taken before the conversion
    Tensor b = layer.bias;
    const std::vector<double> w_before = values(w), b_before = values(b);
    nn::Module& ret = layer.to(dt);
    CHECK(&ret == &layer);
    INFO(dt);
    CHECK(w.dtype() == dt);
    CHECK(b.dtype() == dt);
    CHECK(layer.weight.dtype() == dt);
    for (const auto& [name, p] : layer.named_parameters()) {
      CHECK(p.dtype() == dt);
      CHECK(p.requires_grad());
    }
    CHECK(w.is_same(layer.weight));
    // Values are the old ones, rounded to the new dtype.
    std::vector<double> w_rounded, b_rounded;
    for (double v : w_before) w_rounded.push_back(round_to(v, dt));
    for (double v : b_before) b_rounded.push_back(round_to(v, dt));
    check_close(w, w_rounded, {3, 6}, Tolerance{0, 0});
    check_close(b, b_rounded, {3}, Tolerance{0, 0});
    // And the layer runs in the new dtype.
    const Tensor x = random({2, 6}, dt);
    const Tensor y = layer(x);
    CHECK(y.dtype() == dt);
    check_close(y, reference_linear(x, w, b), {2, 3});
  }
  // Back to float32 and integer targets refused.
  nn::Linear layer(2, 2);
  layer.to(kFloat64).to(kFloat32);
  CHECK(layer.weight.dtype() == kFloat32);
  CHECK_THROWS_WITH_AS(layer.to(kInt64), doctest::Contains("Module::to: only floating dtypes are allowed, got int64"),
                       kiln::Error);
  CHECK(layer.weight.dtype() == kFloat32);
}

TEST_CASE("Linear.reset_parameters redraws from the default distribution") {
  manual_seed(67);
  nn::Linear layer(20, 10);
  Tensor w = layer.weight;
  const std::vector<double> w0 = values(layer.weight), b0 = values(layer.bias);
  layer.reset_parameters();
  CHECK(w.is_same(layer.weight));  // in place
  const std::vector<double> w1 = values(layer.weight), b1 = values(layer.bias);
  CHECK(w0 != w1);
  CHECK(b0 != b1);
  const double bound = 1.0 / std::sqrt(20.0);
  for (double v : w1) CHECK(std::abs(v) <= bound);
  for (double v : b1) CHECK(std::abs(v) <= bound);
  // Initialisation draws from the default generator: the same seed gives the same layer.
  manual_seed(99);
  nn::Linear a(20, 10);
  manual_seed(99);
  nn::Linear b(20, 10);
  CHECK(values(a.weight) == values(b.weight));
  CHECK(values(a.bias) == values(b.bias));
  manual_seed(99);
  layer.reset_parameters();
  CHECK(values(layer.weight) == values(a.weight));
}
