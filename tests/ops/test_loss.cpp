// Losses with mean reduction: cross_entropy ([N, C], [C] with a 0-dim target, [N, C, d...])
// and nll_loss against a float64 log-sum-exp reference, ignore_index, integer target dtypes,
// mse_loss, and the error paths (target dtype, shape and range, mse shape mismatch). The
// forward/backward pieces autograd calls are in test_loss_backward.cpp.
#include <cmath>
#include <limits>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Random class indices in [0, classes) of `dtype`.
Tensor random_targets(const Shape& shape, int64_t classes, DType dtype = kInt64) {
  return random(shape, dtype, 0, static_cast<double>(classes));
}

// Per-position scores: for input [N, C, d...] (or [C]) returns score(row values over C,
// target) averaged over positions whose target is not ignore_index (NaN when none is).
double mean_over_positions(const Tensor& input, const Tensor& target, int64_t ignore_index, bool log_softmax) {
  const std::vector<double> vx = values(input), vt = values(target);
  const Shape& s = input.sizes();
  const int64_t C = s.size() == 1 ? s[0] : s[1];
  const int64_t N = s.size() == 1 ? 1 : s[0];
  int64_t inner = 1;
  for (size_t d = 2; d < s.size(); ++d) inner *= s[d];
  double total = 0;
  int64_t counted = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < inner; ++j) {
      const auto t = static_cast<int64_t>(vt[n * inner + j]);
      if (t == ignore_index) continue;
      auto at = [&](int64_t c) { return vx[(n * C + c) * inner + j]; };
      double lp = at(t);
      if (log_softmax) {
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t c = 0; c < C; ++c) m = std::max(m, at(c));
        double sum = 0;
        for (int64_t c = 0; c < C; ++c) sum += std::exp(at(c) - m);
        lp = at(t) - (m + std::log(sum));
      }
      total -= lp;
      ++counted;
    }
  return counted == 0 ? kNaN : total / static_cast<double>(counted);
}

double cross_entropy_ref(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100) {
  return mean_over_positions(logits, target, ignore_index, true);
}
double nll_ref(const Tensor& logp, const Tensor& target, int64_t ignore_index = -100) {
  return mean_over_positions(logp, target, ignore_index, false);
}

// target with the given flat positions set to `value`.
Tensor with_values_at(const Tensor& target, const std::vector<int64_t>& positions, int64_t value) {
  std::vector<int64_t> v = target.to_vector<int64_t>();
  for (int64_t p : positions) v[p] = value;
  return from_vector(v, target.sizes()).to(target.dtype());
}

// doctest::Contains of a built message.
doctest::Contains has(const std::string& s) { return doctest::Contains(s.c_str()); }

}  // namespace

TEST_CASE("cross_entropy of [N, C], [C] and [N, C, d...] logits") {
  manual_seed(51);
  struct Case {
    Shape input, target;
  };
  const std::vector<Case> cases = {
      {{8, 5}, {8}}, {{1, 3}, {1}}, {{5}, {}}, {{4, 6, 3}, {4, 3}}, {{2, 4, 3, 5}, {2, 3, 5}}, {{64, 11}, {64}}};
  for (DType dt : kFloatTypes)
    for (const Case& c : cases) {
      const int64_t classes = c.input.size() == 1 ? c.input[0] : c.input[1];
      const Tensor logits = random(c.input, dt, -4, 4);
      const Tensor target = random_targets(c.target, classes);
      INFO(dt, " input ", shape_str(c.input));
      const Tensor loss = cross_entropy(logits, target);
      CHECK(loss.dtype() == dt);
      check_close(loss, {cross_entropy_ref(logits, target)}, {});
    }
}

TEST_CASE("cross_entropy reads strided logits and int32 targets") {
  manual_seed(52);
  for (DType dt : kFloatTypes)
    for (Layout l : kLayouts) {
      const Tensor logits = random_with_layout({6, 9}, l, dt, -3, 3);
      const Tensor t64 = random_targets({6}, 9), t32 = t64.to(kInt32);
      INFO(dt, " ", layout_name(l));
      check_close(cross_entropy(logits, t64), {cross_entropy_ref(logits, t64)}, {});
      check_close(cross_entropy(logits, t32), {cross_entropy_ref(logits, t32)}, {});
      const Tensor sliced_target = random_with_layout({6}, Layout::Sliced, kInt32, 0, 9);
      check_close(cross_entropy(logits, sliced_target), {cross_entropy_ref(logits, sliced_target)}, {});
    }
  // Class dim in the middle with a transposed (non-contiguous) spatial layout.
  const Tensor x = random_with_layout({3, 4, 5, 6}, Layout::Transposed, kFloat64);
  const Tensor t = random_targets({3, 5, 6}, 4, kInt32);
  check_close(cross_entropy(x, t), {cross_entropy_ref(x, t)}, {});
}

TEST_CASE("cross_entropy is stable for large logits") {
  manual_seed(53);
  // exp(1000) overflows; log-sum-exp must subtract the row maximum first.
  const Tensor logits = random({4, 5}, kFloat32, 995, 1005);
  const Tensor target = random_targets({4}, 5);
  const Tensor loss = cross_entropy(logits, target);
  CHECK(std::isfinite(loss.item<double>()));
  check_close(loss, {cross_entropy_ref(logits, target)}, {});
}

TEST_CASE("cross_entropy and nll_loss skip ignore_index targets") {
  manual_seed(54);
  for (DType dt : kFloatTypes) {
    INFO(dt);
    const Tensor logits = random({10, 4}, dt, -3, 3);
    const Tensor target = with_values_at(random_targets({10}, 4), {1, 4, 5}, -100);
    // The reference averages over the 7 kept rows (counting ignored rows as zero-loss rows
    // would give 7/10 of it).
    check_close(cross_entropy(logits, target), {cross_entropy_ref(logits, target)}, {});
    // A custom ignore_index that is a valid class skips that class's rows.
    const Tensor t2 = random_targets({10}, 4);
    check_close(cross_entropy(logits, t2, 2), {cross_entropy_ref(logits, t2, 2)}, {});
    check_close(nll_loss(logits, t2, 3), {nll_ref(logits, t2, 3)}, {});
    // All ignored: 0 / 0, NaN as in PyTorch.
    const Tensor all = full({10}, -100, kInt64);
    CHECK(std::isnan(cross_entropy(logits, all).item<double>()));
    CHECK(std::isnan(nll_loss(logits, all).item<double>()));
    // Spatial targets with ignored positions.
    const Tensor x3 = random({2, 4, 3}, dt);
    const Tensor t3 = with_values_at(random_targets({2, 3}, 4), {0, 5}, 7);
    check_close(cross_entropy(x3, t3, 7), {cross_entropy_ref(x3, t3, 7)}, {});
  }
}

TEST_CASE("nll_loss on log-probabilities") {
  manual_seed(55);
  for (DType dt : kFloatTypes) {
    INFO(dt);
    for (const Shape& s : std::vector<Shape>{{7, 5}, {5}, {3, 5, 4}}) {
      // Any values work as log-probabilities for the gather; use log-softmax-like negatives.
      const Tensor logp = random(s, dt, -6, 0);
      const Shape ts = s.size() == 1 ? Shape{} : s.size() == 2 ? Shape{s[0]} : Shape{s[0], s[2]};
      const Tensor target = random_targets(ts, 5, kInt32);
      const Tensor loss = nll_loss(logp, target);
      CHECK(loss.dtype() == dt);
      check_close(loss, {nll_ref(logp, target)}, {});
    }
    const Tensor sliced = random_with_layout({6, 5}, Layout::Sliced, dt, -6, 0);
    const Tensor t = random_targets({6}, 5);
    check_close(nll_loss(sliced, t), {nll_ref(sliced, t)}, {});
  }
}

TEST_CASE("mse_loss is the mean squared difference") {
  manual_seed(56);
  for (DType dt : kFloatTypes)
    for (Layout la : kLayouts)
      for (Layout lb : {Layout::Contiguous, Layout::Transposed}) {
        const Tensor a = random_with_layout({6, 7}, la, dt), b = random_with_layout({6, 7}, lb, dt);
        const std::vector<double> va = values(a), vb = values(b);
        double sum = 0;
        for (size_t i = 0; i < va.size(); ++i) sum += (va[i] - vb[i]) * (va[i] - vb[i]);
        INFO(dt, " ", layout_name(la), " ", layout_name(lb));
        const Tensor loss = mse_loss(a, b);
        CHECK(loss.dtype() == dt);
        check_close(loss, {sum / static_cast<double>(va.size())}, {});
      }
  // 0-dim and 3-D inputs; identical inputs give exactly 0.
  const Tensor s = random({}), u = random({});
  check_close(mse_loss(s, u), {std::pow(values(s)[0] - values(u)[0], 2)}, {});
  const Tensor x = random({2, 3, 4}, kFloat64);
  check_close(mse_loss(x, x), {0.0}, {}, Tolerance{0, 0});
}

TEST_CASE("loss errors") {
  manual_seed(57);
  const Tensor logits = random({4, 5});
  const Tensor target = random_targets({4}, 5);
  for (const char* op : {"cross_entropy", "nll_loss"}) {
    auto call = [&](const Tensor& x, const Tensor& t) {
      return std::string(op) == "cross_entropy" ? cross_entropy(x, t) : nll_loss(x, t);
    };
    const std::string p = std::string(op) + ": ";
    CHECK_THROWS_WITH_AS(call(logits, random({4})),
                         has(p + "expected target of integer dtype (class indices), got float32"), kiln::Error);
    CHECK_THROWS_WITH_AS(call(logits, random({4}, kBool)),
                         has(p + "expected target of integer dtype (class indices), got bool"), kiln::Error);
    CHECK_THROWS_WITH_AS(call(logits, random_targets({5}, 5)),
                         has(p + "expected target of shape [4] for input of shape [4, 5], got [5]"), kiln::Error);
    CHECK_THROWS_WITH_AS(call(logits, random_targets({4, 1}, 5)),
                         has(p + "expected target of shape [4] for input of shape [4, 5], got [4, 1]"), kiln::Error);
    CHECK_THROWS_WITH_AS(call(random({5}), random_targets({1}, 5)),
                         has(p + "expected target of shape [] for input of shape [5], got [1]"), kiln::Error);
    CHECK_THROWS_WITH_AS(call(random({2, 5, 3}), random_targets({2, 5}, 5)),
                         has(p + "expected target of shape [2, 3] for input of shape [2, 5, 3], got [2, 5]"),
                         kiln::Error);
    CHECK_THROWS_WITH_AS(call(random({4, 5}, kInt64), target), has(p + "unsupported input dtype int64"), kiln::Error);
    CHECK_THROWS_WITH_AS(call(random({}), random_targets({}, 1)), has(p + "input must have at least 1 dimension"),
                         kiln::Error);
    CHECK_THROWS_WITH_AS(call(logits, Tensor()), has(p + "argument 'target' is an undefined tensor"), kiln::Error);
    // Out-of-range targets (too large, or negative but not ignore_index) name the op, the
    // target, the class count and the first bad row (flattened over [N, d...]).
    const std::string& chain = p;
    CHECK_THROWS_WITH_AS(call(logits, with_values_at(target, {2}, 5)),
                         (chain + "target 5 is out of bounds for 5 classes (at row 2)").c_str(), kiln::Error);
    CHECK_THROWS_WITH_AS(call(logits, with_values_at(target, {0}, -1)),
                         (chain + "target -1 is out of bounds for 5 classes (at row 0)").c_str(), kiln::Error);
    CHECK_THROWS_WITH_AS(call(random({5}), from_vector<int64_t>({9}, {})),
                         (chain + "target 9 is out of bounds for 5 classes (at row 0)").c_str(), kiln::Error);
    CHECK_THROWS_WITH_AS(call(random({2, 5, 3}), with_values_at(random_targets({2, 3}, 5), {4, 1}, 5)),
                         (chain + "target 5 is out of bounds for 5 classes (at row 1)").c_str(), kiln::Error);
  }
  CHECK_THROWS_WITH_AS(mse_loss(random({3}), random({3, 1})),
                       doctest::Contains("mse_loss: input shape [3] and target shape [3, 1] differ"), kiln::Error);
  CHECK_THROWS_WITH_AS(mse_loss(random({2, 3}), random({3})),
                       doctest::Contains("mse_loss: input shape [2, 3] and target shape [3] differ"), kiln::Error);
  CHECK_THROWS_WITH_AS(mse_loss(random({3}, kInt64), random({3}, kInt64)),
                       doctest::Contains("mse_loss: unsupported dtypes int64 and int64"), kiln::Error);
  CHECK_THROWS_WITH_AS(mse_loss(random({3}), Tensor()),
                       doctest::Contains("mse_loss: argument 'target' is an undefined"), kiln::Error);
}
