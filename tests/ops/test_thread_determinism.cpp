// CPU results must be the same on every run with a given number of OpenMP threads, and the
// elementwise, row and reduction kernels and the optimizer steps must not depend on that
// number at all: each of those runs with 1 thread and with several, and the results must be
// bit-identical. The GEMMs cut their tiles by the thread count (ops/cpu/gemm_tiled.h: one
// tile on one thread, the grid a cost model picks on several), so for them only the first
// holds: the same bits on repeated runs with 1, 2, 3 and 8 threads
// (tests/ops/test_gemm_tiled.cpp bounds the difference between thread counts). Last, the
// parallel regions keep the OpenMP team whole, so no thread exits or starts between them.
// (A build without OpenMP runs everything on one thread: nothing to compare.)
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ops/cpu/gemm_tiled.h"
#include "ops/cpu/parallel.h"
#include "testing.h"
#include "thread_count_guard.h"

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace kiln;
using namespace kiln::testing;

#ifdef _OPENMP

namespace {

// The raw bytes of a CPU tensor's elements in row-major order.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<unsigned char> out(static_cast<size_t>(c.numel()) * c.element_size());
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

// Runs `op` with 1 thread and with 2, 3 and 8, and requires the same bits each time.
void same_for_any_thread_count(const std::string& what, const std::function<Tensor()>& op) {
  INFO(what);
  const ThreadCountGuard guard;
  omp_set_num_threads(1);
  const Tensor one = op();
  const std::vector<unsigned char> want = bytes_of(one);
  for (int threads : {2, 3, 8}) {
    CAPTURE(threads);
    omp_set_num_threads(threads);
    const Tensor many = op();
    REQUIRE(many.sizes() == one.sizes());
    CHECK(bytes_of(many) == want);
  }
}

// Runs `op` twice with each of 1, 2, 3 and 8 threads and requires the same bits both times.
void same_for_a_thread_count(const std::string& what, const std::function<Tensor()>& op) {
  INFO(what);
  const ThreadCountGuard guard;
  for (int threads : {1, 2, 3, 8}) {
    CAPTURE(threads);
    omp_set_num_threads(threads);
    const Tensor first = op(), second = op();
    REQUIRE(first.sizes() == second.sizes());
    CHECK(bytes_of(first) == bytes_of(second));
  }
}

}  // namespace

TEST_CASE("sum gives the same bits with 1 thread and with several") {
  manual_seed(91);
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const Tensor x = random({1'000'003}, dt);
    same_for_any_thread_count(fmt::format("sum all {}", dtype_name(dt)), [&] { return sum(x); });
    const Tensor m = random({257, 4099}, dt);
    same_for_any_thread_count(fmt::format("row sums {}", dtype_name(dt)), [&] { return sum(m, {1}); });
    same_for_any_thread_count(fmt::format("column sums {}", dtype_name(dt)), [&] { return sum(m, {0}); });
    same_for_any_thread_count(fmt::format("mean of a transpose {}", dtype_name(dt)), [&] { return mean(m.t(), {1}); });
  }
}

TEST_CASE("matmul, addmm and linear give the same bits on every run with a given thread count") {
  manual_seed(92);
  // The README's Linear(1024, 4096) on [64, 1024], whose checksum moved.
  const Tensor x = random({64, 1024});
  const Tensor w = random({4096, 1024});
  const Tensor bias = random({4096});
  same_for_a_thread_count("linear [64, 1024] x [4096, 1024]^T + bias", [&] { return linear(x, w, bias); });
  same_for_a_thread_count("sum of that linear", [&] { return sum(linear(x, w, bias)); });
  // Odd sizes (no multiple of a register block anywhere), long K, both operand layouts.
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const Tensor a = random({67, 1031}, dt), b = random({1031, 129}, dt);
    same_for_a_thread_count(fmt::format("matmul odd {}", dtype_name(dt)), [&] { return matmul(a, b); });
    const Tensor bt = random({129, 1031}, dt).t();
    same_for_a_thread_count(fmt::format("matmul transposed b {}", dtype_name(dt)), [&] { return matmul(a, bt); });
    const Tensor at = random({3001, 33}, dt).t(), b2 = random({3001, 517}, dt);
    same_for_a_thread_count(fmt::format("matmul transposed a, K = 3001 {}", dtype_name(dt)),
                              [&] { return matmul(at, b2); });
  }
  const Tensor big_a = random({300, 700}), big_b = random({700, 500});
  same_for_a_thread_count("matmul [300, 700] x [700, 500]", [&] { return matmul(big_a, big_b); });
  const Tensor batch_a = random({3, 45, 777}), batch_b = random({777, 61});
  same_for_a_thread_count("batched matmul", [&] { return matmul(batch_a, batch_b); });
  const Tensor c = random({45, 61});
  same_for_a_thread_count("addmm with beta and alpha",
                            [&] { return addmm(c, batch_a.select(0, 0), batch_b, 0.5, 1.5); });
  const Tensor mv = random({9, 2000}), v = random({2000});
  same_for_a_thread_count("matrix-vector", [&] { return matmul(mv, v); });
}

TEST_CASE("elementwise ops and row kernels give the same bits with 1 thread and with several") {
  manual_seed(93);
  // Above every parallel threshold, in float32, 16-bit and float64, contiguous and transposed
  // (many strided runs, chunk boundaries inside runs).
  for (DType dt : {kFloat32, kBFloat16, kFloat64}) {
    const Tensor x = random({257, 1031}, dt, -6, 6);
    const Tensor xt = random({1031, 257}, dt, -6, 6).t();
    const Tensor y = random({257, 1031}, dt);
    for (const Tensor& in : {x, xt}) {
      const std::string layout = in.is_contiguous() ? "contiguous" : "transposed";
      const std::string what = fmt::format("{} {}", dtype_name(dt), layout);
      same_for_any_thread_count("exp " + what, [&] { return exp(in); });
      same_for_any_thread_count("tanh " + what, [&] { return tanh(in); });
      same_for_any_thread_count("sigmoid " + what, [&] { return sigmoid(in); });
      same_for_any_thread_count("gelu " + what, [&] { return gelu(in); });
      same_for_any_thread_count("gelu tanh " + what, [&] { return gelu(in, "tanh"); });
      same_for_any_thread_count("log " + what, [&] { return log(abs(in) + 1); });
      same_for_any_thread_count("add " + what, [&] { return in + y; });
      same_for_any_thread_count("mul broadcast " + what, [&] { return in * y.narrow(0, 3, 1); });
      same_for_any_thread_count("gelu_backward " + what, [&] { return gelu_backward(y, in); });
      same_for_any_thread_count("gelu_backward tanh " + what, [&] { return gelu_backward(y, in, "tanh"); });
      same_for_any_thread_count("copy to float32 " + what, [&] { return in.to(kFloat32); });
      same_for_any_thread_count("softmax rows " + what, [&] { return softmax(in, 1); });
      same_for_any_thread_count("softmax columns " + what, [&] { return softmax(in, 0); });
      same_for_any_thread_count("layer_norm " + what, [&] { return layer_norm(in.contiguous(), {1031}); });
    }
    const Tensor w = random({513, 1031}, dt, -0.1, 0.1), b = random({513}, dt);
    same_for_a_thread_count(fmt::format("fused_linear_gelu {}", dtype_name(dt)),
                            [&] { return fused_linear_gelu(x, w, b); });
    same_for_a_thread_count(fmt::format("fused_linear_gelu tanh {}", dtype_name(dt)),
                            [&] { return fused_linear_gelu(x, w, b, "tanh"); });
  }
}

TEST_CASE("the fused optimizer steps give the same bits with 1 thread and with several") {
  manual_seed(94);
  // Above the parallel grain, contiguous and transposed, float32 and bfloat16.
  for (DType dt : {kFloat32, kBFloat16}) {
    for (bool transposed : {false, true}) {
      // The parameter [257, 301], stored transposed (strided) in the second round.
      const Tensor base = transposed ? random({301, 257}, dt) : random({257, 301}, dt);
      const auto fresh_param = [&] { return transposed ? base.clone().t() : base.clone(); };
      const Tensor grad = random({257, 301}, dt);
      const Tensor avg0 = random({257, 301}, dt), sq0 = abs(random({257, 301}, dt));
      AdamConfig config;
      config.lr = 1e-2;
      config.weight_decay = 0.01;
      const std::string what = fmt::format("{} {}", dtype_name(dt), transposed ? "transposed" : "contiguous");
      same_for_any_thread_count("_fused_adamw_ param " + what, [&] {
        const Tensor param = fresh_param(), avg = avg0.clone(), sq = sq0.clone();
        REQUIRE(param.is_contiguous() != transposed);
        _fused_adamw_(param, grad, avg, sq, Tensor(), 3.0, config);
        return cat({param.contiguous().flatten(), avg.flatten(), sq.flatten()}, 0);
      });
      SgdConfig sgd;
      sgd.lr = 0.1;
      sgd.momentum = 0.9;
      same_for_any_thread_count("_fused_sgd_ " + what, [&] {
        const Tensor param = fresh_param(), buf = avg0.clone();
        _fused_sgd_(param, grad, buf, sgd, false);
        return cat({param.contiguous().flatten(), buf.flatten()}, 0);
      });
    }
  }
}

namespace {

// The operating system's ids of the threads of a region of the whole team.
std::set<long> team_thread_ids() {
  std::set<long> ids;
#pragma omp parallel
  {
    const long id = static_cast<long>(syscall(SYS_gettid));
#pragma omp critical(kiln_test_team_ids)
    ids.insert(id);
  }
  return ids;
}

}  // namespace

TEST_CASE("GEMMs and chunked loops with less work than threads keep the team: no thread exits or starts") {
  // libgomp lets the threads beyond a smaller team exit and starts new ones for the next
  // larger team (1.4 ms a pair on a 16-core host); Kiln's regions always take the whole team.
  const ThreadCountGuard guard;
  omp_set_num_threads(4);
  manual_seed(95);
  const std::set<long> before = team_thread_ids();
  REQUIRE(before.size() == 4);
  // A chunked loop of 2 chunks on 4 threads: each index once.
  const int64_t total = 2 * cpu::kGrainCheap + 5;
  REQUIRE(cpu::parallel_chunks(total, cpu::kGrainCheap) == 2);
  std::vector<std::atomic<int>> seen(static_cast<size_t>(total));
  cpu::parallel_for(total, cpu::kGrainCheap, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
  });
  for (const auto& count : seen) REQUIRE(count.load() == 1);
  CHECK(team_thread_ids() == before);
  // A product the grid cuts into 2 or 3 tiles on 4 threads (the first such of a few small
  // shapes: which ones depends on the cost model's calibration and, through the column unit,
  // on Eigen's register block for the CPU's vectors: an AVX2 machine cuts every shape of 64-256
  // rows and 96-384 columns into 1 or 4 tiles, and 32 rows or 48 columns into 2), through
  // linear, against float64.
  int64_t M = 0, K = 0, N = 0, tiles = 0;
  for (int64_t m : {64, 128, 256, 32})
    for (int64_t n : {96, 192, 384, 48})
      for (int64_t k : {128, 256, 512, 1024}) {
        const cpu::TileGrid g = cpu::gemm_tile_grid<float>(m, n, k, 4);
        const int64_t t = g.rows.count * g.cols.count;
        if (M == 0 && t > 1 && t < 4) std::tie(M, N, K, tiles) = std::make_tuple(m, n, k, t);
      }
  CAPTURE(M);
  CAPTURE(N);
  CAPTURE(K);
  REQUIRE(tiles > 1);
  REQUIRE(tiles < 4);
  // Positive values: no cancellation, so float32's tolerance holds for any summation order.
  const Tensor x = random({M, K}, kFloat32, 0.0, 1.0), w = random({N, K}, kFloat32, 0.0, 1.0);
  const Tensor b = random({N}, kFloat32, 0.0, 1.0);
  check_close(linear(x, w, b), reference_linear(x, w, b), {M, N});
  CHECK(team_thread_ids() == before);
  // An elementwise op above its grain with fewer chunks than threads.
  const Tensor v = random({2 * cpu::kGrainTranscendental + 7}, kFloat32);
  REQUIRE(cpu::parallel_chunks(v.numel(), cpu::kGrainTranscendental) == 2);
  (void)exp(v);
  CHECK(team_thread_ids() == before);
}

TEST_CASE("a training step of the Fashion-MNIST MLP on 4 threads keeps the team: no thread exits or starts") {
  // Every op of the issue-14 step (784-256-128-10 GELU MLP, batch 256, cross-entropy, the
  // backward pass, AdamW): one op forking a smaller team would cost each step milliseconds on
  // a many-core host.
  const ThreadCountGuard guard;
  omp_set_num_threads(4);
  manual_seed(96);
  const std::vector<int64_t> widths{784, 256, 128, 10};
  std::vector<Tensor> params, avgs, sqs;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    params.push_back(random({widths[l + 1], widths[l]}, kFloat32, -0.05, 0.05).requires_grad_());
    params.push_back(random({widths[l + 1]}, kFloat32, -0.05, 0.05).requires_grad_());
  }
  for (const Tensor& p : params) {
    avgs.push_back(zeros(p.sizes()));
    sqs.push_back(zeros(p.sizes()));
  }
  const Tensor x = random({256, 784}, kFloat32, 0.0, 1.0), target = random({256}, kInt64, 0, 10);
  const std::set<long> before = team_thread_ids();
  REQUIRE(before.size() == 4);
  AdamConfig config;
  config.lr = 1e-3;
  config.weight_decay = 0.01;
  for (int step = 1; step <= 2; ++step) {
    CAPTURE(step);
    Tensor h = x;
    for (size_t l = 0; l < 3; ++l) {
      h = linear(h, params[2 * l], params[2 * l + 1]);
      if (l < 2) h = gelu(h);
    }
    const Tensor loss = cross_entropy(h, target);
    for (Tensor& p : params) p.set_grad(Tensor());
    loss.backward();
    for (size_t i = 0; i < params.size(); ++i) {
      REQUIRE(params[i].grad().defined());
      const NoGradGuard no_grad;
      _fused_adamw_(params[i], params[i].grad(), avgs[i], sqs[i], Tensor(), static_cast<double>(step), config);
    }
    CHECK(team_thread_ids() == before);
  }
}

#endif  // _OPENMP
