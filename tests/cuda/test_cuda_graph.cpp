// CudaGraph (graph/cuda_graph.h) on the GPU: a captured sequence of ops replays with the
// values its static input holds at replay time and equals the eager result; random ops draw
// new numbers on every replay, the very numbers eager calls would have drawn; a capture that
// waits for the GPU fails cleanly and leaves everything usable; the graph's memory is a
// private pool that memory_summary lists; the profiler shows a replay as one cudaGraphLaunch
// row with the graph's kernels under it.
#ifdef KILN_WITH_CUDA

#include <string>

#include "allocator/memory.h"
#include "cuda/cuda_testing.h"
#include "cuda/profiler_testing.h"
#include "graph/cuda_graph.h"
#include "graph/graph_api.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "profiler/profiler.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {
const Device kGpu = Device::cuda(0);

// The work under test: a GEMM, a bias, GELU and a reduction.
Tensor block(const Tensor& x, const Tensor& w, const Tensor& b) { return gelu(linear(x, w, b)).sum(1); }
}  // namespace

TEST_CASE("CudaGraph replays captured ops on the static input's current values") {
  manual_seed(11);
  const Tensor w = randn({48, 32}, TensorOptions().device(kGpu)), b = randn({48}, TensorOptions().device(kGpu));
  Tensor static_x = randn({16, 32}, TensorOptions().device(kGpu));
  graph::CudaGraph g(kGpu);
  {
    cuda::StreamGuard warm(g.capture_stream());
    (void)block(static_x, w, b);  // warm-up: cuBLASLt's plan and workspace for this stream
  }
  Tensor static_out;
  g.capture([&] { static_out = block(static_x, w, b); });
  CHECK(g.captured());
  CHECK(g.num_nodes() >= 3);
  CHECK(g.random_blocks() == 0);
  for (int round = 0; round < 3; ++round) {
    const Tensor x = randn({16, 32}, TensorOptions().device(kGpu));
    static_x.copy_(x);
    g.replay();
    const Tensor expected = block(x, w, b);  // eager, same kernels
    CHECK(equal(static_out, expected));
  }
  // Its memory is a private pool, listed by memory_summary.
  CHECK(memory_summary(kGpu).find(fmt::format("pool {}:", g.pool())) != std::string::npos);
}

TEST_CASE("dropout in a CUDA graph draws new numbers per replay, those eager calls would draw") {
  const Tensor x = randn({1000}, TensorOptions().device(kGpu)) + 3.0;  // no zeros: a zero marks a dropped element
  graph::CudaGraph g(kGpu);
  {
    cuda::StreamGuard warm(g.capture_stream());
    (void)dropout(x, 0.5, true);
  }
  Tensor out;
  const uint64_t offset_before = default_generator().offset();
  g.capture([&] { out = dropout(x, 0.5, true) * 2.0; });
  CHECK(default_generator().offset() == offset_before);  // capturing draws nothing
  CHECK(g.random_blocks() == 250);

  manual_seed(123);
  const Tensor eager1 = dropout(x, 0.5, true) * 2.0, eager2 = dropout(x, 0.5, true) * 2.0;
  CHECK_FALSE(equal(eager1, eager2));
  manual_seed(123);
  g.replay();
  const Tensor replay1 = out.clone();
  g.replay();
  CHECK(equal(replay1, eager1));
  CHECK(equal(out, eager2));
  CHECK(default_generator().offset() == 500);
}

TEST_CASE("a capture that waits for the GPU fails with a clear error and leaves everything usable") {
  const Tensor x = randn({64}, TensorOptions().device(kGpu));
  const Stream before = cuda::current_stream(kGpu);
  graph::CudaGraph g(kGpu);
  {
    cuda::StreamGuard warm(g.capture_stream());
    (void)(x * 2.0).sum();
  }
  CHECK_THROWS_WITH_AS(g.capture([&] { (void)(x * 2.0).sum().item(); }),
                       doctest::Contains("item: cannot wait for a GPU tensor on the host while a CUDA graph is being "
                                         "captured on its stream"),
                       Error);
  CHECK_FALSE(g.captured());
  CHECK_FALSE(g.capturing());
  // A blocking copy to the host is refused the same way, before it is queued.
  CHECK_THROWS_WITH_AS(g.capture([&] { (void)(x * 2.0).cpu(); }),
                       doctest::Contains("copy_ (device to host): cannot wait for a GPU tensor on the host"), Error);
  CHECK_FALSE(g.captured());
  CHECK_FALSE(g.capturing());
  CHECK(cuda::current_stream(kGpu) == before);
  CHECK_THROWS_WITH_AS(g.replay(), doctest::Contains("CudaGraph::replay: nothing was captured"), Error);
  // Eager work (allocations included) goes on as before.
  const Tensor y = (x * 2.0).sum();
  CHECK(y.item<float>() == doctest::Approx((x.cpu() * 2.0).sum().item<float>()).epsilon(1e-5));
  CHECK_THROWS_WITH_AS(g.capture_end(), doctest::Contains("CudaGraph::capture_end: no capture is under way"), Error);
}

TEST_CASE("the profiler shows a replay as one cudaGraphLaunch row with the graph's kernels under it") {
  const Tensor w = randn({64, 64}, TensorOptions().device(kGpu)), b = randn({64}, TensorOptions().device(kGpu));
  const Tensor x = randn({32, 64}, TensorOptions().device(kGpu));
  graph::CudaGraph g(kGpu);
  {
    cuda::StreamGuard warm(g.capture_stream());
    (void)block(x, w, b);
  }
  Tensor out;
  g.capture([&] { out = block(x, w, b); });
  g.replay();
  cuda::synchronize(kGpu);

  profiler::Profiler prof;
  prof.start();
  g.replay();
  cuda::synchronize(kGpu);
  prof.stop();
  if (!traced(prof)) return;
  const profiler::KeyAverages averages = prof.key_averages();
  const profiler::EventAverage* launch = nullptr;
  int64_t kernel_ns = 0;
  for (const profiler::EventAverage& r : averages.rows()) {
    if (r.key == "cudaGraphLaunch") launch = &r;
    if (r.key == "kiln::linear" || r.key == "kiln::gelu") FAIL("a replay runs no op: " << r.key);
  }
  for (const profiler::ProfileEvent& e : prof.events())
    if (e.kind == profiler::EventKind::Kernel) kernel_ns += e.duration_ns();
  REQUIRE(launch != nullptr);
  CHECK(launch->count == 1);
  CHECK(kernel_ns > 0);
  CHECK(launch->cuda_time_total_ns == kernel_ns);
}


namespace {

// The model, optimizer and schedule of a training run, made from the same seeds each time,
// and one training step: forward (dropout included), loss, backward, AdamW, scheduler.
struct Trainer {
  static nn::MLP make_model() {
    manual_seed(7);
    nn::MLP model({.sizes = {32, 64, 64, 10}, .activation = nn::Activation::GELU, .dropout = 0.1});
    model.to(kGpu);
    return model;
  }
  nn::MLP model = make_model();
  optim::AdamW opt{model.parameters(), {.lr = 1e-2, .weight_decay = 0.05}};
  optim::CosineAnnealingLR sched{opt, 8};

  Trainer() { manual_seed(99); }  // the dropout masks' seed
  Tensor step(const Tensor& x, const Tensor& y) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    sched.step();
    return loss;
  }
};

}  // namespace

TEST_CASE("a captured training step (dropout, AdamW, cosine schedule) replays bit for bit as eager steps") {
  constexpr int kSteps = 6;
  std::vector<Tensor> xs, ys;
  manual_seed(3);
  for (int i = 0; i < kSteps; ++i) {
    xs.push_back(randn({16, 32}, TensorOptions().device(kGpu)));
    std::vector<int64_t> labels(16);
    for (size_t k = 0; k < labels.size(); ++k)
      labels[k] = static_cast<int64_t>((k * 7 + static_cast<size_t>(i) * 3) % 10);
    ys.push_back(from_vector(labels, {16}).to(kGpu));
  }
  // Eager reference.
  std::vector<Tensor> eager_losses;
  std::vector<Tensor> eager_params;
  {
    Trainer eager;
    for (int i = 0; i < kSteps; ++i) eager_losses.push_back(eager.step(xs[i], ys[i]).detach().clone());
    for (const Tensor& p : eager.model.parameters()) eager_params.push_back(p.detach().clone());
  }
  // Step 0 eager on the capture stream (warm-up: optimizer state, plans), step 1 captured,
  // steps 1.. replayed with the static inputs refilled.
  Trainer t;
  graph::CudaGraph g(kGpu);
  std::vector<Tensor> losses;
  {
    cuda::StreamGuard warm(g.capture_stream());
    losses.push_back(t.step(xs[0], ys[0]).detach().clone());
    g.capture_stream().synchronize();
  }
  Tensor static_x = xs[1].clone(), static_y = ys[1].clone(), static_loss;
  g.capture([&] { static_loss = t.step(static_x, static_y); });
  for (int i = 1; i < kSteps; ++i) {
    static_x.copy_(xs[i]);
    static_y.copy_(ys[i]);
    g.replay();
    losses.push_back(static_loss.detach().clone());
  }
  for (int i = 0; i < kSteps; ++i) {
    INFO("step " << i);
    CHECK(equal(losses[i], eager_losses[i]));
  }
  const std::vector<Tensor> params = t.model.parameters();
  REQUIRE(params.size() == eager_params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i);
    CHECK(equal(params[i], eager_params[i]));
  }
  CHECK(t.opt.state(0).step == kSteps);
  CHECK(t.opt.lr(0) == t.sched.get_last_lr()[0]);
  CHECK(t.opt.lr(0) < 1e-2);  // the schedule moved the rate between replays
}

TEST_CASE("a second capture on the same thread is refused and changes nothing; the first goes on") {
  const Tensor x = randn({256}, TensorOptions().device(kGpu));
  graph::CudaGraph outer(kGpu), inner(kGpu);
  {
    cuda::StreamGuard warm(outer.capture_stream());
    (void)(x * 3.0);
  }
  Tensor out;
  outer.capture([&] {
    CHECK_THROWS_WITH_AS(inner.capture_begin(),
                         doctest::Contains("a CUDA graph capture is already drawing from this generator"), Error);
    CHECK_FALSE(inner.capturing());
    CHECK(cuda::current_stream(kGpu) == outer.capture_stream());
    out = x * 3.0;
  });
  outer.replay();
  CHECK(equal(out, x * 3.0));
  // The refused graph can still capture later.
  Tensor inner_out;
  {
    cuda::StreamGuard warm(inner.capture_stream());
    (void)(x + 1.0);
  }
  inner.capture([&] { inner_out = x + 1.0; });
  inner.replay();
  CHECK(equal(inner_out, x + 1.0));
}

TEST_CASE("compile(step) with cuda_graph: a failed capture is refused cleanly and the next call captures") {
  const Tensor w = randn({8}, TensorOptions().device(kGpu));
  bool read_host = true;
  graph::Executable step = graph::compile(
      [&](const std::vector<Tensor>& in) {
        Tensor y = (in[0] * w).sum();
        if (read_host) (void)y.item<float>();  // a host read: legal eagerly, fatal to a capture
        return std::vector<Tensor>{y};
      },
      {randn({8}, TensorOptions().device(kGpu))}, {.cuda_graph = true});
  const Tensor a = randn({8}, TensorOptions().device(kGpu)), b = randn({8}, TensorOptions().device(kGpu));
  CHECK(equal(step({a})[0], (a * w).sum()));  // the warm-up call runs eagerly
  CHECK_THROWS_WITH_AS(step({a}), doctest::Contains("item: cannot wait for a GPU tensor on the host while a CUDA graph"), Error);
  CHECK(step.cuda_graph() != nullptr);
  CHECK_FALSE(step.cuda_graph()->captured());
  read_host = false;
  CHECK(equal(step({b})[0], (b * w).sum()));  // captured now, and replayed
  CHECK(step.cuda_graph()->captured());
  REQUIRE(step.static_inputs() != nullptr);
  CHECK(step.static_inputs()->size() == 1);
  CHECK(equal(step({a})[0], (a * w).sum()));
}
#endif  // KILN_WITH_CUDA
