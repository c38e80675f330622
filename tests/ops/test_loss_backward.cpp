// The pieces of cross_entropy and nll_loss that autograd's formulas call:
// _cross_entropy_forward's per-position logsumexp and count, and the gradients of
// _cross_entropy_backward and _nll_loss_backward, against float64 references written from
// the formulas, and against central differences of the forward in float64; ignore_index,
// all-ignored batches, every input rank, and every error path.
#include <cmath>
#include <limits>
#include <tuple>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// The positions of a loss input [C], [N, C] or [N, C, d...]: element (n, c, j) of position
// (n, j) sits at flat index (n * C + c) * inner + j; positions are numbered n * inner + j, as
// the target's elements.
struct Positions {
  int64_t n, classes, inner;
  explicit Positions(const Shape& s)
      : n(s.size() == 1 ? 1 : s[0]), classes(s.size() == 1 ? s[0] : s[1]), inner(1) {
    for (size_t d = 2; d < s.size(); ++d) inner *= s[d];
  }
  int64_t count() const { return n * inner; }
  int64_t at(int64_t pos, int64_t c) const { return (pos / inner * classes + c) * inner + pos % inner; }
};

// float64 log-sum-exp over the classes of every position.
std::vector<double> lse_ref(const Tensor& logits) {
  const Positions p(logits.sizes());
  const std::vector<double> x = values(logits);
  std::vector<double> r(static_cast<size_t>(p.count()));
  for (int64_t pos = 0; pos < p.count(); ++pos) {
    double m = -kInf;
    for (int64_t c = 0; c < p.classes; ++c) m = std::max(m, x[p.at(pos, c)]);
    double s = 0;
    for (int64_t c = 0; c < p.classes; ++c) s += std::exp(x[p.at(pos, c)] - m);
    r[pos] = m + std::log(s);
  }
  return r;
}

int64_t count_ref(const Tensor& target, int64_t ignore_index) {
  int64_t k = 0;
  for (double t : values(target)) k += static_cast<int64_t>(t) != ignore_index;
  return k;
}

// float64 gradient of the mean loss, scaled by g: softmax - onehot (cross_entropy) or
// -onehot (nll_loss), divided by the count, 0 on ignored positions.
std::vector<double> grad_ref(const Tensor& input, const Tensor& target, double g, int64_t ignore_index,
                             bool softmax) {
  const Positions p(input.sizes());
  const std::vector<double> x = values(input), t = values(target), lse = lse_ref(input);
  const auto k = static_cast<double>(count_ref(target, ignore_index));
  std::vector<double> r(x.size(), 0.0);
  for (int64_t pos = 0; pos < p.count(); ++pos) {
    const auto tp = static_cast<int64_t>(t[pos]);
    if (tp == ignore_index) continue;
    for (int64_t c = 0; c < p.classes; ++c) {
      const double prob = softmax ? std::exp(x[p.at(pos, c)] - lse[pos]) : 0.0;
      r[p.at(pos, c)] = g * (prob - (c == tp ? 1.0 : 0.0)) / k;
    }
  }
  return r;
}

Tensor random_targets(const Shape& shape, int64_t classes) {
  return random(shape, kInt64, 0, static_cast<double>(classes));
}

Tensor with_values_at(const Tensor& target, const std::vector<int64_t>& positions, int64_t value) {
  std::vector<int64_t> v = target.to_vector<int64_t>();
  for (int64_t p : positions) v[p] = value;
  return from_vector(v, target.sizes()).to(target.dtype());
}

// The target shape for an input shape: without the class dim.
Shape target_shape(const Shape& input) {
  Shape s = input;
  s.erase(s.begin() + (input.size() == 1 ? 0 : 1));
  return s;
}

// Central differences of g * loss(x) in float64, one element at a time.
std::vector<double> central_differences(const std::function<Tensor(const Tensor&)>& loss, const Tensor& x, double g) {
  constexpr double h = 1e-6;
  std::vector<double> v = values(x), r(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + h;
    const double up = loss(from_vector(v, x.sizes())).item<double>();
    v[i] = keep - h;
    const double down = loss(from_vector(v, x.sizes())).item<double>();
    v[i] = keep;
    r[i] = g * (up - down) / (2 * h);
  }
  return r;
}

doctest::Contains has(const std::string& s) { return doctest::Contains(s.c_str()); }

const std::vector<Shape> kShapes = {{8, 5}, {1, 3}, {5}, {4, 6, 3}, {2, 4, 3, 5}, {64, 11}, {3, 40}};

}  // namespace

TEST_CASE("_cross_entropy_forward: the loss, the per-position logsumexp and the count") {
  manual_seed(61);
  for (DType dt : kFloatTypes)
    for (const Shape& s : kShapes) {
      const Positions p(s);
      const Tensor logits = random(s, dt, -4, 4);
      // A third of the positions ignored (at least one counted).
      Tensor target = random_targets(target_shape(s), p.classes);
      std::vector<int64_t> ignored;
      for (int64_t pos = 1; pos < p.count(); pos += 3) ignored.push_back(pos);
      target = with_values_at(target, ignored, -100);
      INFO(dt, " input ", shape_str(s));
      const CrossEntropyForward f = _cross_entropy_forward(logits, target);
      CHECK(f.loss.dtype() == dt);
      CHECK(f.loss.dim() == 0);
      CHECK(f.logsumexp.sizes() == target.sizes());
      CHECK(f.logsumexp.dtype() == (dt == kFloat64 ? kFloat64 : kFloat32));
      CHECK(f.count.dtype() == kInt64);
      CHECK(f.count.item<int64_t>() == count_ref(target, -100));
      // logsumexp is rounded once, to its own dtype.
      check_close(f.logsumexp, lse_ref(logits), target.sizes(), tolerance(f.logsumexp.dtype()), "logsumexp");
      // The loss is cross_entropy's, bit for bit (the same kernel).
      CHECK(equal(f.loss, cross_entropy(logits, target)));
      double total = 0;
      const std::vector<double> lse = lse_ref(logits), x = values(logits), t = values(target);
      for (int64_t pos = 0; pos < p.count(); ++pos)
        if (t[pos] != -100) total += lse[pos] - x[p.at(pos, static_cast<int64_t>(t[pos]))];
      check_close(f.loss, {total / static_cast<double>(count_ref(target, -100))}, {}, "loss");
    }
}

TEST_CASE("_cross_entropy_backward against the float64 formula") {
  manual_seed(62);
  for (DType dt : kFloatTypes)
    for (const Shape& s : kShapes)
      for (int64_t ignore_index : {int64_t{-100}, int64_t{1}}) {
        const Positions p(s);
        const Tensor logits = random(s, dt, -4, 4);
        const Tensor target = with_values_at(random_targets(target_shape(s), p.classes), {0}, 0);  // one counted
        const double g = 0.75;
        INFO(dt, " input ", shape_str(s), " ignore_index ", ignore_index);
        const CrossEntropyForward f = _cross_entropy_forward(logits, target, ignore_index);
        const Tensor grad =
            _cross_entropy_backward(full({}, g, dt), logits, target, f.logsumexp, f.count, ignore_index);
        CHECK(grad.dtype() == dt);
        CHECK(grad.is_contiguous());
        check_close(grad, grad_ref(logits, target, g, ignore_index, true), s, "grad");
      }
}

TEST_CASE("_cross_entropy_backward reads strided logits and int32 targets") {
  manual_seed(63);
  for (Layout l : kLayouts) {
    const Tensor logits = random_with_layout({6, 9}, l, kFloat64, -3, 3);
    const Tensor target = random_targets({6}, 9).to(kInt32);
    INFO(layout_name(l));
    const CrossEntropyForward f = _cross_entropy_forward(logits, target);
    const Tensor grad = _cross_entropy_backward(full({}, -1.5, kFloat64), logits, target, f.logsumexp, f.count);
    check_close(grad, grad_ref(logits, target, -1.5, -100, true), {6, 9});
  }
  // Spatial logits with the class dim in the middle, transposed in memory.
  const Tensor x = random_with_layout({3, 4, 5, 6}, Layout::Transposed, kFloat64);
  const Tensor t = random_targets({3, 5, 6}, 4);
  const CrossEntropyForward f = _cross_entropy_forward(x, t);
  check_close(_cross_entropy_backward(full({}, 2.0, kFloat64), x, t, f.logsumexp, f.count),
              grad_ref(x, t, 2.0, -100, true), x.sizes());
}

TEST_CASE("cross_entropy's gradient matches central differences (float64)") {
  manual_seed(64);
  const double g = 1.25;
  for (const Shape& s : std::vector<Shape>{{5, 7}, {6}, {2, 4, 3}}) {
    const Positions p(s);
    const Tensor logits = random(s, kFloat64, -3, 3);
    Tensor target = random_targets(target_shape(s), p.classes);
    if (p.count() > 2) target = with_values_at(target, {1}, -100);
    INFO("input ", shape_str(s));
    const CrossEntropyForward f = _cross_entropy_forward(logits, target);
    const Tensor grad = _cross_entropy_backward(full({}, g, kFloat64), logits, target, f.logsumexp, f.count);
    const auto loss = [&](const Tensor& x) { return cross_entropy(x, target); };
    // Central differences with h = 1e-6: truncation ~1e-12, rounding ~1e-10.
    check_close(grad, central_differences(loss, logits, g), s, Tolerance{1e-6, 1e-8});
  }
}

TEST_CASE("_nll_loss_forward and _nll_loss_backward") {
  manual_seed(65);
  for (DType dt : kFloatTypes)
    for (const Shape& s : kShapes) {
      const Positions p(s);
      const Tensor logp = random(s, dt, -6, 0);
      // Class 2 ignored; position 0 counted.
      const Tensor target = with_values_at(random_targets(target_shape(s), p.classes), {0}, 3 % p.classes);
      INFO(dt, " input ", shape_str(s));
      const NllLossForward f = _nll_loss_forward(logp, target, 2);
      CHECK(equal(f.loss, nll_loss(logp, target, 2)));
      CHECK(f.count.item<int64_t>() == count_ref(target, 2));
      const double g = -0.5;
      const Tensor grad = _nll_loss_backward(full({}, g, dt), logp, target, f.count, 2);
      CHECK(grad.dtype() == dt);
      check_close(grad, grad_ref(logp, target, g, 2, false), s, "grad");
    }
  // Against central differences in float64.
  const Tensor logp = random({4, 6}, kFloat64, -5, 0);
  const Tensor target = with_values_at(random_targets({4}, 6), {2}, -100);
  const NllLossForward f = _nll_loss_forward(logp, target);
  const Tensor grad = _nll_loss_backward(full({}, 3.0, kFloat64), logp, target, f.count);
  check_close(grad, central_differences([&](const Tensor& x) { return nll_loss(x, target); }, logp, 3.0), {4, 6},
              Tolerance{1e-6, 1e-8});
}

TEST_CASE("all targets ignored: NaN loss (0 / 0, as PyTorch) and a zero gradient") {
  for (DType dt : kFloatTypes) {
    INFO(dt);
    const Tensor logits = random({5, 4}, dt);
    const Tensor target = full({5}, -100, kInt64);
    const CrossEntropyForward f = _cross_entropy_forward(logits, target);
    CHECK(std::isnan(f.loss.item<double>()));
    CHECK(f.count.item<int64_t>() == 0);
    check_close(f.logsumexp, lse_ref(logits), {5}, tolerance(f.logsumexp.dtype()));
    const Tensor grad = _cross_entropy_backward(ones({}, dt), logits, target, f.logsumexp, f.count);
    check_close(grad, std::vector<double>(20, 0.0), {5, 4}, Tolerance{0, 0});
    const NllLossForward n = _nll_loss_forward(logits, target);
    CHECK(std::isnan(n.loss.item<double>()));
    CHECK(n.count.item<int64_t>() == 0);
    check_close(_nll_loss_backward(ones({}, dt), logits, target, n.count), std::vector<double>(20, 0.0), {5, 4},
                Tolerance{0, 0});
  }
  // No rows at all: the same.
  const CrossEntropyForward f = _cross_entropy_forward(random({0, 3}), zeros({0}, kInt64));
  CHECK(std::isnan(f.loss.item<double>()));
  CHECK(f.count.item<int64_t>() == 0);
  CHECK(_cross_entropy_backward(ones({}), random({0, 3}), zeros({0}, kInt64), f.logsumexp, f.count).sizes() ==
        Shape{0, 3});
}

TEST_CASE("cross_entropy's logsumexp and gradient are stable for large logits") {
  manual_seed(66);
  const Tensor logits = random({4, 5}, kFloat32, 995, 1005);
  const Tensor target = random_targets({4}, 5);
  const CrossEntropyForward f = _cross_entropy_forward(logits, target);
  check_close(f.logsumexp, lse_ref(logits), {4});
  const Tensor grad = _cross_entropy_backward(ones({}), logits, target, f.logsumexp, f.count);
  check_close(grad, grad_ref(logits, target, 1.0, -100, true), {4, 5});
}

TEST_CASE("loss backward errors") {
  manual_seed(67);
  const Tensor logits = random({4, 5});
  const Tensor target = random_targets({4}, 5);
  const CrossEntropyForward f = _cross_entropy_forward(logits, target);
  const Tensor g = ones({});
  const std::string ce = "cross_entropy_backward: ", nll = "nll_loss_backward: ";
  // Bad class indices are raised at once on the CPU, by the op that meets them.
  const Tensor bad = with_values_at(target, {1}, 7);
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(g, logits, bad, f.logsumexp, f.count),
                       (ce + "target 7 is out of bounds for 5 classes (at row 1)").c_str(), kiln::Error);
  CHECK_THROWS_WITH_AS(_nll_loss_backward(g, logits, with_values_at(target, {3}, -2), f.count),
                       (nll + "target -2 is out of bounds for 5 classes (at row 3)").c_str(), kiln::Error);
  CHECK_THROWS_WITH_AS(_cross_entropy_forward(logits, bad),
                       "cross_entropy: target 7 is out of bounds for 5 classes (at row 1)", kiln::Error);
  CHECK_THROWS_WITH_AS(_nll_loss_forward(logits, bad), "nll_loss: target 7 is out of bounds for 5 classes (at row 1)",
                       kiln::Error);
  // grad_output: 0-dim, the input's dtype.
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(ones({1}), logits, target, f.logsumexp, f.count),
                       has(ce + "expected a 0-dim grad_output (the loss is a scalar), got shape [1]"), kiln::Error);
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(ones({}, kFloat64), logits, target, f.logsumexp, f.count),
                       has(ce + "expected grad_output of dtype float32 (the input's), got float64"), kiln::Error);
  CHECK_THROWS_WITH_AS(_nll_loss_backward(ones({2}), logits, target, f.count),
                       has(nll + "expected a 0-dim grad_output"), kiln::Error);
  // count: 0-dim int64.
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(g, logits, target, f.logsumexp, ones({})),
                       has(ce + "expected count as a 0-dim int64 tensor (from the forward), got float32 of shape []"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(_nll_loss_backward(g, logits, target, full({1}, 4, kInt64)),
                       has(nll + "expected count as a 0-dim int64 tensor (from the forward), got int64 of shape [1]"),
                       kiln::Error);
  // logsumexp: the target's shape, float32 (float64 for float64 logits).
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(g, logits, target, ones({5}), f.count),
                       has(ce + "expected logsumexp of shape [4] and dtype float32 (from the forward), got shape [5] "
                                "and dtype float32"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(g, logits, target, ones({4}, kFloat64), f.count),
                       has(ce + "expected logsumexp of shape [4] and dtype float32"), kiln::Error);
  const Tensor x64 = random({4, 5}, kFloat64);
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(ones({}, kFloat64), x64, target, f.logsumexp, f.count),
                       has(ce + "expected logsumexp of shape [4] and dtype float64"), kiln::Error);
  // Undefined arguments and the forward's own checks.
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(Tensor(), logits, target, f.logsumexp, f.count),
                       has(ce + "argument 'grad_output' is an undefined tensor"), kiln::Error);
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(g, logits, target, Tensor(), f.count),
                       has(ce + "argument 'logsumexp' is an undefined tensor"), kiln::Error);
  CHECK_THROWS_WITH_AS(_nll_loss_backward(g, logits, target, Tensor()), has(nll + "argument 'count' is an undefined"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(g, logits, random_targets({5}, 5), f.logsumexp, f.count),
                       has(ce + "expected target of shape [4] for input of shape [4, 5], got [5]"), kiln::Error);
  CHECK_THROWS_WITH_AS(_nll_loss_backward(g, random({4, 5}, kInt32), target, f.count),
                       has(nll + "unsupported input dtype int32"), kiln::Error);
}

namespace {
// Records the end of each loss op (name, depth, output count); views and copies are left out.
struct LossOps : OpObserver {
  std::vector<std::tuple<std::string, int, size_t>> ends;
  void on_op_begin(const OpCall&) override {}
  void on_op_end(const OpCall& c) override {
    const std::string name = c.name;
    if (name.find("entropy") != std::string::npos || name.find("nll") != std::string::npos)
      ends.emplace_back(name, c.depth, c.outputs.size());
  }
};
}  // namespace

TEST_CASE("the loss pieces are ops: one scope each, with all their outputs; the losses wrap their _forward") {
  const Tensor logits = random({4, 5});
  const Tensor target = random_targets({4}, 5);
  const CrossEntropyForward f = _cross_entropy_forward(logits, target);
  const NllLossForward n = _nll_loss_forward(logits, target);
  const Tensor one = ones({});
  LossOps log;
  add_op_observer(&log);
  (void)cross_entropy(logits, target);
  (void)_cross_entropy_forward(logits, target);
  (void)_cross_entropy_backward(one, logits, target, f.logsumexp, f.count);
  (void)nll_loss(logits, target);
  (void)_nll_loss_forward(logits, target);
  (void)_nll_loss_backward(one, logits, target, n.count);
  remove_op_observer(&log);
  const std::vector<std::tuple<std::string, int, size_t>> want = {
      {"_cross_entropy_forward", 1, 3}, {"cross_entropy", 0, 1}, {"_cross_entropy_forward", 0, 3},
      {"_cross_entropy_backward", 0, 1}, {"_nll_loss_forward", 1, 2}, {"nll_loss", 0, 1},
      {"_nll_loss_forward", 0, 2},       {"_nll_loss_backward", 0, 1}};
  REQUIRE(log.ends.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("op end " << i);
    CHECK(std::get<0>(log.ends[i]) == std::get<0>(want[i]));
    CHECK(std::get<1>(log.ends[i]) == std::get<1>(want[i]));
    CHECK(std::get<2>(log.ends[i]) == std::get<2>(want[i]));
  }
}
