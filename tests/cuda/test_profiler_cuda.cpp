// The profiler on the GPU: CUPTI's kernel, memcpy and memset records under the ops and
// scopes that launched them, on the profiler's clock (a kernel starts after its op began
// and ends before the profile stopped), Self CUDA / CUDA total as key_averages.h defines
// them, the table's CUDA columns and kernel rows, the trace's kernel events and flows, and
// recordings that do not leak into one another, kernels launched on several threads at
// once each under the op of the thread that launched it, a first profiled op that carries
// none of CUPTI's start-up work, and fused_linear_gelu's kernels under it.
#ifdef KILN_WITH_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "profiler/chrome_trace.h"
#include "profiler/profiler.h"
#include "profiler/record_function.h"
#include "cuda/profiler_testing.h"
#include "testing.h"

using namespace kiln;
using kiln::testing::traced;
using profiler::EventKind;
using profiler::ProfileEvent;
using profiler::Profiler;

namespace {

const Device kGpu = Device::cuda(0);

const profiler::EventAverage* row(const profiler::KeyAverages& averages, const std::string& key) {
  for (const profiler::EventAverage& r : averages.rows())
    if (r.key == key) return &r;
  return nullptr;
}

// The Self CPU of each host event named `name`, in begin order (its time less its host children's).
std::vector<int64_t> self_cpu_ns(const std::vector<ProfileEvent>& events, const std::string& name) {
  std::vector<int64_t> children_ns(events.size(), 0);
  for (const ProfileEvent& e : events)
    if (!profiler::on_device(e.kind) && e.parent >= 0) children_ns[static_cast<size_t>(e.parent)] += e.duration_ns();
  std::vector<int64_t> out;
  for (size_t i = 0; i < events.size(); ++i)
    if (!profiler::on_device(events[i].kind) && events[i].name == name)
      out.push_back(events[i].duration_ns() - children_ns[i]);
  return out;
}

}  // namespace

// First in this file, so that it holds the process's first profile (doctest runs a file's
// cases in order, and the CUDA suite's other files start no profiler).
TEST_CASE("profiler (CUDA): the first profiled op's Self CPU is what a later identical op's is") {
  // CUPTI's work for a thread's first recorded launch after start() (its activity buffer,
  // once zeroed by CUPTI, and its per-thread set-up) used to land in the first op: 2.0-2.7 ms
  // of Self CPU for examples/profile_linear's first kiln::addmm on an H200, about 200 times
  // its steady cost. start() does that work now. The bound, 20 times the median of 20 later
  // addmms (about 10 us each on an H200), catches that by a factor of 10 and leaves room for
  // a cold cache or a page fault. Under `ctest -j` a thread can lose its core during the
  // first op; since that work would recur at every start(), a fresh profile may try again
  // (three at most) without hiding it.
  constexpr double kFactor = 20;
  constexpr int kLater = 20;
  nn::Linear linear(1024, 4096);
  linear.to(kGpu);
  const Tensor x = randn({64, 1024}, TensorOptions().device(kGpu));
  (void)linear.forward(x);  // cuBLASLt's first-call set-up stays out of the profile, as in profile_linear
  cuda::synchronize(kGpu);
  std::vector<double> ratios;
  for (int attempt = 0; attempt < 3; ++attempt) {
    Profiler prof({.record_shapes = true, .with_flops = true});
    prof.start();
    for (int i = 0; i <= kLater; ++i) {
      profiler::RecordFunction scope("linear_forward");
      (void)linear.forward(x);
    }
    cuda::synchronize(kGpu);
    prof.stop();
    if (!traced(prof)) return;
    for (const ProfileEvent& e : prof.events()) {
      INFO(e.name);
      CHECK(e.name.find("warm_up") == std::string::npos);  // start()'s own launch is not in the profile
    }
    std::vector<int64_t> selves = self_cpu_ns(prof.events(), "kiln::addmm");
    REQUIRE(selves.size() == static_cast<size_t>(kLater + 1));
    const int64_t first = selves.front();
    std::vector<int64_t> later(selves.begin() + 1, selves.end());
    std::nth_element(later.begin(), later.begin() + kLater / 2, later.end());
    const int64_t median = std::max<int64_t>(later[kLater / 2], 1);
    ratios.push_back(static_cast<double>(first) / static_cast<double>(median));
    MESSAGE("first kiln::addmm " << first / 1e3 << " us of Self CPU, later ones' median " << median / 1e3 << " us");
    if (ratios.back() <= kFactor) break;
  }
  std::string shown;
  for (double r : ratios) shown += std::to_string(r) + " ";
  INFO("first / later Self CPU, per profile: " << shown);
  CHECK(*std::min_element(ratios.begin(), ratios.end()) <= kFactor);
}

TEST_CASE("profiler (CUDA): linear's kernels under addmm, with device times on the profiler's clock") {
  nn::Linear linear(1024, 4096);
  linear.to(kGpu);
  const Tensor x = randn({64, 1024}, TensorOptions().device(kGpu));
  (void)linear.forward(x);  // cuBLASLt's first-call set-up stays out of the profile
  cuda::synchronize(kGpu);

  Profiler prof({.record_shapes = true});
  prof.start();
  Tensor host_copy;
  {
    profiler::RecordFunction scope("linear_forward");
    const Tensor y = linear.forward(x);
    host_copy = y.cpu();  // a DtoH memcpy
  }
  void* scratch = nullptr;
  REQUIRE(cudaMalloc(&scratch, 1 << 20) == cudaSuccess);
  {
    profiler::RecordFunction scope("user_memset");
    REQUIRE(cudaMemsetAsync(scratch, 0, 1 << 20, reinterpret_cast<cudaStream_t>(cuda::current_stream(kGpu).id())) ==
            cudaSuccess);
  }
  prof.stop();
  REQUIRE(cudaFree(scratch) == cudaSuccess);
  if (!traced(prof)) return;
  CHECK(prof.dropped_device_records() == 0);

  const std::vector<ProfileEvent>& events = prof.events();
  int64_t profile_end = 0;
  for (const ProfileEvent& e : events)
    if (!profiler::on_device(e.kind)) profile_end = std::max(profile_end, e.end_ns);
  int64_t kernels = 0, addmm_kernel_ns = 0, memcpys = 0, memsets = 0;
  for (const ProfileEvent& e : events) {
    if (!profiler::on_device(e.kind)) continue;
    INFO(e.name);
    CHECK(e.device == 0);
    CHECK(e.duration_ns() > 0);
    REQUIRE(e.launcher >= 0);
    const ProfileEvent& op = events[static_cast<size_t>(e.launcher)];
    // One clock: the device work starts after its launcher began, plus a margin for the
    // linear clock conversion CUPTI applies; the GEMM and the copy (y.cpu() waits for it)
    // end before the last host event ended. (The memset runs on after its scope closed.)
    CHECK(e.start_ns >= op.start_ns - 2000);
    if (e.kind != EventKind::Memset) CHECK(e.end_ns <= profile_end + 2000);
    // The runtime call that launched it lies inside the op, and the work starts after it.
    CHECK(e.launch_ns >= op.start_ns);
    CHECK(e.launch_ns <= op.end_ns);
    CHECK(e.start_ns >= e.launch_ns - 2000);
    if (e.kind == EventKind::Kernel) {
      ++kernels;
      CHECK(op.name == "kiln::addmm");
      addmm_kernel_ns += e.duration_ns();
      CHECK(e.grid[0] * e.grid[1] * e.grid[2] > 0);
      CHECK(e.block[0] * e.block[1] * e.block[2] > 0);
      CHECK(e.registers_per_thread > 0);
    } else if (e.kind == EventKind::Memcpy) {
      ++memcpys;
      CHECK(e.detail == "DtoH");
      CHECK(e.transfer_bytes == 64 * 4096 * 4);
      CHECK(e.name.rfind("Memcpy DtoH", 0) == 0);
    } else {
      ++memsets;
      CHECK(op.name == "user_memset");
      CHECK(e.transfer_bytes == 1 << 20);
    }
  }
  CHECK(kernels >= 1);
  CHECK(memcpys == 1);
  CHECK(memsets == 1);

  const profiler::KeyAverages averages = prof.key_averages();
  const profiler::EventAverage* addmm = row(averages, "kiln::addmm");
  const profiler::EventAverage* lin = row(averages, "kiln::linear");
  const profiler::EventAverage* scope = row(averages, "linear_forward");
  REQUIRE(addmm != nullptr);
  REQUIRE(lin != nullptr);
  REQUIRE(scope != nullptr);
  CHECK(addmm->self_cuda_time_total_ns == addmm_kernel_ns);
  CHECK(addmm->cuda_time_total_ns == addmm_kernel_ns);
  CHECK(lin->self_cuda_time_total_ns == 0);
  CHECK(lin->cuda_time_total_ns == addmm_kernel_ns);   // counted once, not twice
  CHECK(scope->cuda_time_total_ns > addmm_kernel_ns);  // the memcpy too
  const std::string table = averages.table({.sort_by = "cuda_time_total", .row_limit = 10});
  INFO(table);
  CHECK(table.find("Self CUDA time total:") != std::string::npos);
  CHECK(table.find("Self CUDA %") != std::string::npos);
  CHECK(table.find("Memcpy DtoH") != std::string::npos);

  // The trace: one kernel event per kernel, and each launch's flow matched.
  const nlohmann::json doc = nlohmann::json::parse(profiler::chrome_trace(events));
  int64_t kernel_events = 0, flow_starts = 0, flow_ends = 0;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "kernel") ++kernel_events;
    flow_starts += e["ph"] == "s";
    flow_ends += e["ph"] == "f";
  }
  CHECK(kernel_events == kernels);
  CHECK(flow_starts == kernels + memcpys + memsets);
  CHECK(flow_ends == flow_starts);
}

TEST_CASE("profiler (CUDA): each recording holds its own kernels only; a schedule's spans too") {
  const Tensor a = randn({1 << 20}, TensorOptions().device(kGpu));
  auto kernels_named_add = [](const Profiler& p) {
    int64_t n = 0;
    for (const ProfileEvent& e : p.events())
      n += e.kind == EventKind::Kernel && e.launcher >= 0 &&
           p.events()[static_cast<size_t>(e.launcher)].name == "kiln::add";
    return n;
  };
  Profiler prof;
  prof.start();
  for (int i = 0; i < 3; ++i) (void)add(a, a);
  prof.stop();
  if (!traced(prof)) return;
  CHECK(kernels_named_add(prof) == 3);
  (void)add(a, a);  // not recorded
  prof.start();
  (void)add(a, a);
  prof.stop();
  CHECK(kernels_named_add(prof) == 1);

  std::vector<int64_t> per_span;
  Profiler scheduled({.schedule = profiler::Schedule{.wait = 1, .warmup = 1, .active = 2, .repeat = 1},
                      .on_trace_ready = [&](Profiler& p) { per_span.push_back(kernels_named_add(p)); }});
  scheduled.start();
  for (int step = 0; step < 6; ++step) {
    for (int i = 0; i <= step; ++i) (void)add(a, a);  // step s launches s + 1 adds
    scheduled.step();
  }
  scheduled.stop();
  CHECK(per_span == std::vector<int64_t>{3 + 4});  // the active steps 2 and 3
}

TEST_CASE("profiler (CUDA): kernels launched on three threads at once are each under their own thread's op") {
  constexpr int kThreads = 3, kOps = 300;
  std::vector<Tensor> inputs;
  for (int k = 0; k < kThreads; ++k) inputs.push_back(randn({4096}, TensorOptions().device(kGpu)));
  std::vector<Stream> streams;
  for (int k = 0; k < kThreads; ++k) streams.push_back(Stream::create(kGpu));
  cuda::synchronize(kGpu);
  void* scratch = nullptr;
  REQUIRE(cudaMalloc(&scratch, 1 << 16) == cudaSuccess);

  Profiler prof;
  prof.start();
  std::atomic<int> ready{0};
  auto work = [&](int k) {
    cuda::StreamGuard guard(streams[static_cast<size_t>(k)]);
    ready.fetch_add(1);
    while (ready.load() < kThreads) std::this_thread::yield();  // all launch at once
    profiler::RecordFunction scope("thread_" + std::to_string(k));
    for (int i = 0; i < kOps; ++i) (void)add(inputs[static_cast<size_t>(k)], inputs[static_cast<size_t>(k)]);
    streams[static_cast<size_t>(k)].synchronize();
  };
  std::vector<std::thread> threads;
  for (int k = 1; k < kThreads; ++k) threads.emplace_back(work, k);
  // Meanwhile a thread with no profiler event open issues a memset: it has no launcher.
  std::thread unscoped([&] {
    while (ready.load() < kThreads) std::this_thread::yield();
    (void)cudaMemsetAsync(scratch, 0, 1 << 16, reinterpret_cast<cudaStream_t>(streams[0].id()));
  });
  work(0);
  for (std::thread& t : threads) t.join();
  unscoped.join();
  cuda::synchronize(kGpu);
  prof.stop();
  REQUIRE(cudaFree(scratch) == cudaSuccess);
  if (!traced(prof)) return;
  CHECK(prof.dropped_device_records() == 0);

  const std::vector<ProfileEvent>& events = prof.events();
  std::map<std::string, int64_t> kernels_under;  // scope name -> kernels of its adds
  std::map<std::string, const ProfileEvent*> scopes;
  int64_t memsets = 0;
  for (const ProfileEvent& e : events) {
    if (e.kind == EventKind::UserScope) scopes[e.name] = &e;
    if (e.kind == EventKind::Memset) {
      ++memsets;
      CHECK(e.launcher == -1);
    }
    if (e.kind != EventKind::Kernel) continue;
    REQUIRE(e.launcher >= 0);
    const ProfileEvent& op = events[static_cast<size_t>(e.launcher)];
    CHECK(op.name == "kiln::add");
    CHECK(e.launch_ns >= op.start_ns);
    CHECK(e.launch_ns <= op.end_ns);
    REQUIRE(op.parent >= 0);
    const ProfileEvent& scope = events[static_cast<size_t>(op.parent)];
    CHECK(scope.thread == op.thread);
    ++kernels_under[scope.name];
  }
  CHECK(memsets == 1);
  REQUIRE(scopes.size() == static_cast<size_t>(kThreads));
  for (int k = 0; k < kThreads; ++k) CHECK(kernels_under["thread_" + std::to_string(k)] == kOps);
  // The threads did launch at the same time (else this would test nothing).
  const ProfileEvent &first = *scopes["thread_0"], &second = *scopes["thread_1"];
  CHECK(std::max(first.start_ns, second.start_ns) < std::min(first.end_ns, second.end_ns));
}

TEST_CASE("profiler (CUDA): profile_memory charges device blocks to the op that allocated them") {
  const Tensor a = randn({256, 256}, TensorOptions().device(kGpu));  // 256 KiB
  Profiler prof({.profile_memory = true});
  prof.start();
  Tensor kept = add(a, a);  // a new 256 KiB block, alive at stop
  prof.stop();
  const profiler::EventAverage* add_row = row(prof.key_averages(), "kiln::add");
  REQUIRE(add_row != nullptr);
  CHECK(add_row->self_cuda_memory_usage == 256 * 256 * 4);
  CHECK(add_row->self_cpu_memory_usage == 0);
  CHECK(prof.key_averages().table().find("CUDA Mem") != std::string::npos);
}

TEST_CASE("profiler (CUDA): fused_linear_gelu's kernels under it, and its backward as one op") {
  const TensorOptions o = TensorOptions().device(kGpu);
  const Tensor x = randn({64, 256}, o);
  const Tensor w = (randn({512, 256}, o) * 0.05).requires_grad_(), b = randn({512}, o).requires_grad_();
  sum(fused_linear_gelu(x, w, b)).backward();  // cuBLASLt's first-call set-up stays out of the profile
  cuda::synchronize(kGpu);

  Profiler prof;
  prof.start();
  // float32, exact GELU, TF32 off: the portable path, the GEMM then the GELU kernel.
  sum(fused_linear_gelu(x, w, b)).backward();
  cuda::synchronize(kGpu);
  prof.stop();
  if (!traced(prof)) return;
  const std::vector<ProfileEvent>& events = prof.events();
  int forward_ops = 0, backward_ops = 0, forward_kernels = 0, epilogue = 0, backward_kernels = 0, dgelu = 0;
  for (const ProfileEvent& e : events) {
    if (!profiler::on_device(e.kind)) {
      forward_ops += e.name == "kiln::fused_linear_gelu";
      backward_ops += e.name == "kiln::fused_linear_gelu_backward";
      continue;
    }
    if (e.kind != EventKind::Kernel || e.launcher < 0) continue;
    const std::string& op = events[static_cast<size_t>(e.launcher)].name;
    if (op == "kiln::fused_linear_gelu") {
      ++forward_kernels;
      epilogue += e.name.find("fused_linear_gelu_epilogue_kernel") != std::string::npos;
    } else if (op == "kiln::fused_linear_gelu_backward") {
      ++backward_kernels;
      dgelu += e.name.find("fused_linear_gelu_dgelu_kernel") != std::string::npos;
    }
  }
  CHECK(forward_ops == 1);
  CHECK(backward_ops == 1);  // one op for dH, both gradient GEMMs and the bias gradient
  CHECK(forward_kernels >= 2);  // the GEMM (cuBLASLt may split it) and the GELU kernel
  CHECK(epilogue == 1);
  CHECK(dgelu == 1);
  // dH and grad weight (x needs no gradient; the bias gradient in the GEMM's epilogue, or a column sum).
  CHECK(backward_kernels >= 2);
}

#endif  // KILN_WITH_CUDA
