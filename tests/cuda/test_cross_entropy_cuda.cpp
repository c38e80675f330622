// cross_entropy and nll_loss on the GPU: the fused forward (loss, logsumexp, count) and both
// backward kernels against the CPU's (which tests/ops checks against float64 references and
// central differences), over every row layout the kernels choose (4 lanes, a warp, a block
// per row; one launch or two), odd class counts and rows that start off a 16-byte boundary;
// bad class indices raised at the next synchronisation and not before, once, with the
// context usable after; and calls that return while the stream is held back, so none of
// them waits for the GPU.
#ifdef KILN_WITH_CUDA

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cuda/cuda_testing.h"
#include "cuda/differential.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Shapes that reach every path: 4 lanes per row (C <= 32), a warp (C <= 1024), a block
// (C > 1024); one block (few rows) and a grid with the combine launch; [C] and spatial.
const std::vector<Shape> kShapes = {{256, 10}, {1, 3},    {7},       {300, 32},   {300, 33}, {33, 37},
                                    {64, 1000}, {5, 1027}, {3, 5000}, {2048, 10}, {4, 6, 3}, {2, 4, 3, 5},
                                    {0, 5},     {600, 1},  {1500, 64}};

Shape target_shape(const Shape& input) {
  Shape s = input;
  s.erase(s.begin() + (input.size() == 1 ? 0 : 1));
  return s;
}

int64_t classes_of(const Shape& s) { return s.size() == 1 ? s[0] : s[1]; }

// Random targets with about a fifth of them ignore_index.
Tensor targets_with_ignored(const Shape& shape, int64_t classes, int64_t ignore_index) {
  std::vector<int64_t> v = random(shape, kInt64, 0, static_cast<double>(classes)).to_vector<int64_t>();
  for (size_t i = 3; i < v.size(); i += 5) v[i] = ignore_index;
  return from_vector(v, shape);
}

// `t` on the GPU as a contiguous view whose data starts `offset` elements into its storage
// (off the 16-byte boundary the allocator gives).
Tensor on_gpu_at_offset(const Tensor& t, int64_t offset) {
  const Tensor flat = t.contiguous().reshape({-1});
  const Tensor padded = cat({zeros({offset}, t.dtype()), flat}).to(kGpu);
  return padded.narrow(0, offset, t.numel()).view(t.sizes());
}

// The forward and both gradients of one case on the CPU inputs and on `gpu_logits` (the
// same values on the GPU, in any layout), compared.
void compare(const std::string& what, const Tensor& logits, const Tensor& gpu_logits, const Tensor& target,
             int64_t ignore_index) {
  INFO(what);
  const Tensor gpu_target = target.to(kGpu);
  const CrossEntropyForward want = _cross_entropy_forward(logits, target, ignore_index);
  const CrossEntropyForward got = _cross_entropy_forward(gpu_logits, gpu_target, ignore_index);
  REQUIRE(got.loss.device() == kGpu);
  check_close(got.loss.cpu(), values(want.loss), {}, gpu_tolerance(logits.dtype()), "loss");
  check_close(got.logsumexp.cpu(), values(want.logsumexp), want.logsumexp.sizes(),
              gpu_tolerance(want.logsumexp.dtype()), "logsumexp");
  CHECK(got.count.item<int64_t>() == want.count.item<int64_t>());
  check_close(cross_entropy(gpu_logits, gpu_target, ignore_index).cpu(), values(got.loss), {}, Tolerance{0, 0},
              "cross_entropy is _cross_entropy_forward's loss");  // (NaN matches NaN)

  const Tensor g = full({}, 0.75, logits.dtype());
  const Tensor want_grad = _cross_entropy_backward(g, logits, target, want.logsumexp, want.count, ignore_index);
  const Tensor got_grad =
      _cross_entropy_backward(g.to(kGpu), gpu_logits, gpu_target, got.logsumexp, got.count, ignore_index);
  check_close(got_grad.cpu(), values(want_grad), logits.sizes(), gpu_tolerance(logits.dtype()), "cross_entropy grad");

  const NllLossForward want_nll = _nll_loss_forward(logits, target, ignore_index);
  const NllLossForward got_nll = _nll_loss_forward(gpu_logits, gpu_target, ignore_index);
  check_close(got_nll.loss.cpu(), values(want_nll.loss), {}, gpu_tolerance(logits.dtype()), "nll_loss");
  CHECK(got_nll.count.item<int64_t>() == want_nll.count.item<int64_t>());
  const Tensor want_nll_grad = _nll_loss_backward(g, logits, target, want_nll.count, ignore_index);
  const Tensor got_nll_grad = _nll_loss_backward(g.to(kGpu), gpu_logits, gpu_target, got_nll.count, ignore_index);
  check_close(got_nll_grad.cpu(), values(want_nll_grad), logits.sizes(), gpu_tolerance(logits.dtype()), "nll grad");
}

}  // namespace

TEST_CASE("cuda: cross_entropy and nll_loss, forward and backward, agree with the CPU") {
  manual_seed(71);
  for (DType dt : kFloatDtypes)
    for (const Shape& s : kShapes)
      for (int64_t ignore_index : {int64_t{-100}, int64_t{0}}) {
        const Tensor logits = random(s, dt, -4, 4);
        const Tensor target = targets_with_ignored(target_shape(s), classes_of(s), ignore_index);
        compare(fmt::format("{} {} ignore_index {}", dtype_name(dt), shape_str(s), ignore_index), logits,
                logits.to(kGpu), target, ignore_index);
      }
}

TEST_CASE("cuda: rows off a 16-byte boundary, strided logits, int32 targets") {
  manual_seed(72);
  for (DType dt : kFloatDtypes)
    for (const Shape& s : std::vector<Shape>{{256, 10}, {33, 37}, {64, 1000}, {5, 1027}, {3, 5000}}) {
      const Tensor logits = random(s, dt, -4, 4);
      const Tensor target = targets_with_ignored(target_shape(s), classes_of(s), -100);
      // Offset 1: every row's head is peeled; the gradient (aligned) and the logits differ
      // in phase, so the backward moves elements one at a time.
      compare(fmt::format("{} {} at offset 1", dtype_name(dt), shape_str(s)), logits, on_gpu_at_offset(logits, 1),
              target, -100);
      compare(fmt::format("{} {} transposed", dtype_name(dt), shape_str(s)), logits.t().contiguous().t(),
              same_layout_on(logits.t().contiguous().t(), kGpu), target, -100);
    }
  const Tensor logits = random({40, 12});
  const Tensor t32 = random({40}, kInt32, 0, 12);
  check_close(cross_entropy(logits.to(kGpu), t32.to(kGpu)).cpu(), values(cross_entropy(logits, t32)), {},
              gpu_tolerance(kFloat32));
}

TEST_CASE("cuda: special values follow the CPU (NaN, infinities, large logits)") {
  const double inf = kInf, nan = kNaN;
  // Rows: ordinary, all -inf (lse -inf, loss NaN), one -inf, +inf (NaN), NaN (NaN), huge.
  const Tensor logits =
      from_vector<double>({1, 2, 3, -inf, -inf, -inf, -inf, 0, 1, inf, 0, 1, nan, 0, 1, 1000, 999, 1001}, {6, 3});
  const Tensor target = from_vector<int64_t>({2, 0, 0, 1, 1, 2});
  for (DType dt : kFloatDtypes) {
    const Tensor x = logits.to(dt);
    compare(fmt::format("{} special values", dtype_name(dt)), x, x.to(kGpu), target, -100);
    // Without the rows that make the mean NaN, the mean itself is compared too.
    const Tensor t = from_vector<int64_t>({2, -100, 1, -100, -100, 2});
    compare(fmt::format("{} special values, NaN rows ignored", dtype_name(dt)), x, x.to(kGpu), t, -100);
  }
}

TEST_CASE("cuda: the target and the backward's tensors must be on the logits' device") {
  const Tensor logits = randn({5}, kGpu);
  // A 0-dim CPU target would pass as a "CPU number" elsewhere; here the kernel reads it.
  CHECK_THROWS_WITH_AS(cross_entropy(logits, from_vector<int64_t>({1}, {})),
                       doctest::Contains("cross_entropy: expected target on cuda:0 (the input's device), got cpu"),
                       Error);
  CHECK_THROWS_WITH_AS(nll_loss(logits, from_vector<int64_t>({1}, {})),
                       doctest::Contains("nll_loss: expected target on cuda:0 (the input's device), got cpu"), Error);
  const Tensor x = randn({4, 5}, kGpu), t = from_vector<int64_t>({0, 1, 2, 3}).to(kGpu);
  const CrossEntropyForward f = _cross_entropy_forward(x, t);
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(ones({}), x, t, f.logsumexp, f.count),
                       doctest::Contains("cross_entropy_backward: expected grad_output on cuda:0"), Error);
  CHECK_THROWS_WITH_AS(_cross_entropy_backward(ones({}, kGpu), x, t, f.logsumexp.cpu(), f.count),
                       doctest::Contains("cross_entropy_backward: expected logsumexp on cuda:0"), Error);
  CHECK_THROWS_WITH_AS(_nll_loss_backward(ones({}, kGpu), x, t, f.count.cpu()),
                       doctest::Contains("nll_loss_backward: expected count on cuda:0"), Error);
}

TEST_CASE("cuda: a bad class index is raised at the next synchronization, once, and the context stays usable") {
  const Tensor logits = randn({6, 4}, kGpu);
  const Tensor bad = from_vector<int64_t>({0, 1, 9, 2, -1, 3}).to(kGpu);  // rows 2 and 4 are bad
  const Tensor good = from_vector<int64_t>({0, 1, 3, 2, -100, 3});
  REQUIRE_NOTHROW(cuda::synchronize(kGpu));  // nothing pending from earlier cases

  // The call returns; the error waits for the synchronisation, which names the op, the
  // value, the class count and the first bad row.
  Tensor loss;
  CHECK_NOTHROW(loss = cross_entropy(logits, bad));
  CHECK_THROWS_WITH_AS(cuda::synchronize(kGpu),
                       doctest::Contains("cross_entropy: target 9 is out of bounds for 4 classes (at row 2)"), Error);
  CHECK_NOTHROW(cuda::synchronize(kGpu));    // raised once
  CHECK(std::isnan(loss.item<double>()));  // the loss of a bad batch is NaN, nothing was read out of bounds

  // Correct calls work after it, and give the CPU's values.
  check_close(cross_entropy(logits, good.to(kGpu)).cpu(), values(cross_entropy(logits.cpu(), good)), {},
              gpu_tolerance(kFloat32), "cross_entropy after a raised error");

  // Every synchronisation point raises it: item(), a copy to the host, Stream::synchronize,
  // Event::synchronize.
  CHECK_THROWS_WITH_AS(cross_entropy(logits, bad).item<double>(), doctest::Contains("cross_entropy: target 9"), Error);
  CHECK_THROWS_WITH_AS(nll_loss(log_softmax(logits, 1), bad).cpu(),
                       doctest::Contains("nll_loss: target 9 is out of bounds for 4 classes (at row 2)"), Error);
  (void)cross_entropy(logits, bad);
  CHECK_THROWS_WITH_AS(cuda::current_stream(kGpu).synchronize(), doctest::Contains("cross_entropy: target 9"), Error);
  (void)cross_entropy(logits, bad);
  Event done(kGpu);
  done.record(cuda::current_stream(kGpu));
  CHECK_THROWS_WITH_AS(done.synchronize(), doctest::Contains("cross_entropy: target 9"), Error);

  // The first error since the last synchronisation wins.
  (void)nll_loss(log_softmax(logits, 1), from_vector<int64_t>({0, 0, 0, 0, 7, 0}).to(kGpu));
  (void)cross_entropy(logits, bad);
  CHECK_THROWS_WITH_AS(cuda::synchronize(kGpu),
                       doctest::Contains("nll_loss: target 7 is out of bounds for 4 classes (at row 4)"), Error);
  CHECK_NOTHROW(cuda::synchronize(kGpu));

  // The backward kernels: the bad row's gradient is NaN, the others are the CPU's.
  const Tensor one_bad = from_vector<int64_t>({0, 1, 3, 2, 5, 3});  // `good`, but row 4 is class 5
  const CrossEntropyForward f = _cross_entropy_forward(logits, good.to(kGpu));
  const Tensor grad = _cross_entropy_backward(ones({}, kGpu), logits, one_bad.to(kGpu), f.logsumexp, f.count);
  CHECK_THROWS_WITH_AS(cuda::synchronize(kGpu),
                       doctest::Contains("cross_entropy_backward: target 5 is out of bounds for 4 classes (at row 4)"),
                       Error);
  const std::vector<double> g = values(grad);
  const std::vector<double> want =
      values(_cross_entropy_backward(ones({}), logits.cpu(), good, f.logsumexp.cpu(), f.count.cpu()));
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("grad element " << i);
    if (i / 4 == 4) CHECK(std::isnan(g[i]));
    else CHECK(std::abs(g[i] - want[i]) <= 1e-6);
  }
  (void)_nll_loss_backward(ones({}, kGpu), logits, one_bad.to(kGpu), f.count);
  CHECK_THROWS_WITH_AS(cuda::synchronize(kGpu),
                       doctest::Contains("nll_loss_backward: target 5 is out of bounds for 4 classes (at row 4)"),
                       Error);
  CHECK_NOTHROW(cuda::synchronize(kGpu));
}

namespace {

// Runs `fn` on a worker thread, with `stream` current there, while a gate holds the stream
// back; true when fn returned before the gate opened. A call that waited for the GPU would
// wait for the gate: after `patience` the gate opens anyway, so the test fails instead of
// hanging. Errors fn throws land in `error`.
bool returns_while_held(const Stream& stream, const std::function<void()>& fn, std::chrono::milliseconds patience,
                        std::string& error) {
  std::atomic<bool> returned{false};
  bool held = false;
  {
    Gate gate(stream);
    std::thread worker([&] {
      try {
        cuda::StreamGuard guard(stream);  // current streams are per thread
        fn();
      } catch (const std::exception& e) {
        error = e.what();
      }
      returned.store(true);
    });
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (!returned.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    held = returned.load() && !stream.query();  // returned, and the stream had not run
    gate.open();
    worker.join();
  }
  return held;
}

}  // namespace

TEST_CASE("cuda: cross_entropy, nll_loss and their backward calls return while the GPU is held back") {
  const Stream stream = Stream::create(kGpu);
  cuda::StreamGuard guard(stream);
  manual_seed(73);
  // First a plain kernel launch: under a tool that serialises launches (compute-sanitizer
  // may) nothing can return while the stream is held, and the case says so and stops.
  const Tensor probe = zeros({4}, kGpu);
  (void)add(probe, probe);
  stream.synchronize();
  std::string error;
  if (!returns_while_held(stream, [&] { (void)add(probe, probe); }, std::chrono::seconds(2), error)) {
    MESSAGE("skipped: a plain kernel launch waits for the GPU in this process (" << error << ")");
    return;
  }
  struct Inputs {
    Tensor logits, target, target32, grad;
  };
  std::vector<Inputs> inputs;
  for (const Shape& s : std::vector<Shape>{{256, 10}, {4096, 1000}, {64, 5000}, {4, 6, 3}}) {
    const Tensor target = targets_with_ignored(target_shape(s), classes_of(s), -100);
    inputs.push_back({random(s).to(kGpu), target.to(kGpu), target.to(kInt32).to(kGpu), full({}, 0.5, kGpu)});
  }
  const auto run_all = [&inputs] {
    std::vector<Tensor> out;
    for (const Inputs& in : inputs) {
      out.push_back(cross_entropy(in.logits, in.target));
      out.push_back(cross_entropy(in.logits, in.target32));
      const CrossEntropyForward f = _cross_entropy_forward(in.logits, in.target);
      out.push_back(_cross_entropy_backward(in.grad, in.logits, in.target, f.logsumexp, f.count));
      const NllLossForward n = _nll_loss_forward(in.logits, in.target);
      out.push_back(n.loss);
      out.push_back(_nll_loss_backward(in.grad, in.logits, in.target, n.count));
    }
    return out;
  };
  // Warm-up: creates the device's error record and fills the allocator's cache for this
  // stream, so nothing under the gate calls cudaMalloc (which may wait for the device): the
  // second run's blocks, freed, are what the gated run takes while `warm` is alive.
  const std::vector<Tensor> warm = run_all();
  (void)run_all();
  stream.synchronize();

  std::vector<Tensor> results;
  CHECK(returns_while_held(stream, [&] { results = run_all(); }, std::chrono::seconds(10), error));
  CHECK(error.empty());
  stream.synchronize();
  // What ran behind the gate is what ran without it.
  REQUIRE(results.size() == warm.size());
  for (size_t i = 0; i < results.size(); ++i) {
    INFO("result " << i);
    CHECK(equal(results[i].cpu(), warm[i].cpu()));
  }
}

#endif  // KILN_WITH_CUDA
