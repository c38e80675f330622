// The NCCL backend on the GPUs of this machine: run_local over 1..min(4, GPUs) ranks, every
// collective x every dtype x a few sizes against float64 host references; argument checks;
// async work handles and side streams; the profiler rows; init_process_group without a
// launcher (world size 1); and, with two GPUs or more, the faults (a rank that never calls
// the collective, a rank that throws). Cases that need two GPUs say so and skip visibly.
#ifdef KILN_WITH_CUDA

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "distributed/collective_reference.h"
#include "profiler/profiler.h"
#include "cuda/profiler_testing.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;
using namespace kiln::testing::collective;
using std::chrono::milliseconds;

namespace {

int max_world() { return std::min(cuda::device_count(), 4); }

bool need_nccl() {
  if (dist::is_nccl_available()) return true;
  MESSAGE("skipped: this CUDA build has no NCCL backend (NCCL was not found at configure time)");
  return false;
}

bool need_two_gpus() {
  if (cuda::device_count() >= 2) return true;
  MESSAGE("skipped: needs 2 GPUs, " << cuda::device_count() << " visible");
  return false;
}

// NCCL rounds after each step of its ring or tree, not once: with n ranks a floating sum is
// within n roundings of the partial sums' size (|partial| < 2n for inputs in [-2, 2)) of the
// float64 value. One rank is exact.
Tolerance nccl_tolerance(DType dtype, int world) {
  if (!is_floating(dtype) || world == 1) return is_floating(dtype) ? tolerance(dtype) : Tolerance{0, 0};
  const double eps = dtype == kFloat16 ? std::ldexp(1.0, -10)
                     : dtype == kBFloat16 ? std::ldexp(1.0, -7)
                     : dtype == kFloat32  ? std::ldexp(1.0, -23)
                                          : std::ldexp(1.0, -52);
  return {tolerance(dtype).rtol, world * eps * 2.0 * world};
}

std::string label(const char* c, int world, DType dtype, int64_t n, const std::string& op = "") {
  return fmt::format("nccl {} world {} {} numel {} {}", c, world, dtype, n, op);
}

}  // namespace

TEST_CASE("nccl all_reduce and reduce_scatter: every op, dtype, size and world size this machine has") {
  if (!need_nccl()) return;
  manual_seed(21);
  for (int world = 1; world <= max_world(); ++world) {
    for (DType dtype : kAllTypes) {
      for (int64_t n : kSizes) {
        const std::vector<Tensor> in = inputs(world, n, dtype);
        const std::vector<Tensor> in_rs = inputs(world, world * n, dtype);
        const auto v = values_of(in);
        const auto v_rs = values_of(in_rs);
        for (dist::ReduceOp op : kOps) {
          if (!applies(op, dtype)) continue;
          std::vector<Tensor> out(world), out_rs(world);
          dist::run_local(world, DeviceType::CUDA, [&](int rank) {
            const Device dev = Device::cuda(rank);
            Tensor t = in[rank].to(dev);
            dist::all_reduce(t, op);
            Tensor o = full({n}, 1, TensorOptions(dtype).device(dev));
            dist::reduce_scatter(o, in_rs[rank].to(dev), op);
            out[rank] = t.cpu();
            out_rs[rank] = o.cpu();
          });
          const Tolerance tol = nccl_tolerance(dtype, world);
          const std::string what = label("all_reduce", world, dtype, n, dist::to_string(op));
          for (int r = 0; r < world; ++r) {
            check_close(out[r], expected_reduce(v, 0, n, op, dtype), {n}, tol, what);
            check_close(out_rs[r], expected_reduce(v_rs, r * n, n, op, dtype), {n}, tol, what + " (reduce_scatter)");
          }
          check_same_bits(out, what);
        }
      }
    }
  }
}

TEST_CASE("nccl broadcast and all_gather: every dtype, size, root and world size this machine has") {
  if (!need_nccl()) return;
  manual_seed(22);
  for (int world = 1; world <= max_world(); ++world) {
    for (DType dtype : kAllTypes) {
      for (int64_t n : kSizes) {
        const std::vector<Tensor> in = inputs(world, n, dtype);
        std::vector<double> gathered;
        for (const Tensor& t : in) {
          const std::vector<double> x = values(t);
          gathered.insert(gathered.end(), x.begin(), x.end());
        }
        for (int src = 0; src < world; ++src) {
          std::vector<Tensor> out(world), all(world);
          dist::run_local(world, DeviceType::CUDA, [&](int rank) {
            const Device dev = Device::cuda(rank);
            Tensor t = in[rank].to(dev);
            dist::broadcast(t, src);
            out[rank] = t.cpu();
            if (src == 0) {
              Tensor g = full({world, n}, 1, TensorOptions(dtype).device(dev));
              dist::all_gather(g, in[rank].to(dev));
              all[rank] = g.cpu();
            }
          });
          const std::string what = label("broadcast", world, dtype, n, std::to_string(src));
          for (int r = 0; r < world; ++r) {
            check_close(out[r], values(in[src]), {n}, tolerance(kFloat64), what);
            if (src == 0) check_close(all[r], gathered, {world, n}, tolerance(kFloat64), what + " (all_gather)");
          }
        }
      }
    }
  }
}

TEST_CASE("nccl collectives: argument checks name the op and the values") {
  if (!need_nccl()) return;
  dist::run_local(1, DeviceType::CUDA, [](int) {
    Tensor host = random({4});
    CHECK_THROWS_WITH_AS(dist::all_reduce(host), "all_reduce: tensor is on cpu but this rank's group runs on cuda:0",
                         Error);
    Tensor nc = random({3, 4}).to(Device::cuda(0)).t();
    CHECK_THROWS_WITH_AS(dist::broadcast(nc, 0), doctest::Contains("broadcast: tensor must be contiguous (sizes [4, 3]"),
                         Error);
    Tensor t = random({4}).to(Device::cuda(0));
    CHECK_THROWS_WITH_AS(dist::broadcast(t, 1), "broadcast: src 1 is outside [0, 1)", Error);
    Tensor ints = random({4}, kInt64, -9, 9).to(Device::cuda(0));
    CHECK_THROWS_WITH_AS(dist::all_reduce(ints, dist::ReduceOp::Avg),
                         "all_reduce: avg needs a floating dtype, got int64; use sum and divide", Error);
    Tensor small = zeros({3}, TensorOptions().device(Device::cuda(0)));
    CHECK_THROWS_WITH_AS(dist::all_gather(small, t), "all_gather: output has 3 elements but 1 ranks x 4 input elements = 4",
                         Error);
    // Still usable.
    dist::all_reduce(t);
    CHECK(dist::default_group().backend() == dist::Backend::NCCL);
    CHECK(dist::default_group().device() == Device::cuda(0));
  });
  if (cuda::device_count() >= 2) {
    dist::run_local(2, DeviceType::CUDA, [](int rank) {
      Tensor other = random({4}).to(Device::cuda(1 - rank));
      CHECK_THROWS_WITH_AS(dist::all_reduce(other),
                           fmt::format("all_reduce: tensor is on cuda:{} but this rank's group runs on cuda:{}", 1 - rank,
                                       rank)
                               .c_str(),
                           Error);
    });
  }
}

TEST_CASE("nccl work handles: async on a side stream, wait orders the current stream, synchronize blocks the host") {
  if (!need_nccl()) return;
  const int world = max_world();
  manual_seed(23);
  const std::vector<Tensor> in = inputs(world, 1 << 16, kFloat32);
  const auto v = values_of(in);
  std::vector<Tensor> out(world);
  std::vector<int> completed(world, 0);
  dist::run_local(world, DeviceType::CUDA, [&](int rank) {
    const Device dev = Device::cuda(rank);
    Tensor t = in[rank].to(dev);
    const Stream side = Stream::create(dev);
    dist::WorkHandle work;
    {
      cuda::StreamGuard guard(side);  // the collective runs on the side stream
      work = dist::all_reduce(t, dist::ReduceOp::Sum, /*async_op=*/true);
    }
    work->wait();  // the default stream now waits for it
    Tensor doubled = t * 2;  // runs on the default stream after the collective
    work->synchronize();
    completed[rank] = work->is_completed() ? 1 : 0;
    out[rank] = (doubled / 2).cpu();
  });
  for (int r = 0; r < world; ++r) {
    CHECK(completed[r] == 1);
    check_close(out[r], expected_reduce(v, 0, 1 << 16, dist::ReduceOp::Sum, kFloat32), {1 << 16},
                nccl_tolerance(kFloat32, world), "async");
  }
}

TEST_CASE("nccl collectives show as nccl:<collective> op rows") {
  if (!need_nccl()) return;
  const int world = max_world();
  dist::run_local(world, DeviceType::CUDA, [&](int rank) {
    Tensor t = random({1 << 20}).to(Device::cuda(rank));
    dist::all_reduce(t);  // warm-up: connections are set up on first use
    dist::barrier();
  });
  profiler::Profiler prof({.activities = {profiler::Activity::CPU, profiler::Activity::CUDA}});
  prof.start();
  dist::run_local(world, DeviceType::CUDA, [&](int rank) {
    Tensor t = random({1 << 20}).to(Device::cuda(rank));
    dist::all_reduce(t);
    dist::barrier();
    cuda::synchronize(Device::cuda(rank));
  });
  prof.stop();
  const std::string table = prof.key_averages().table();
  INFO(table);
  CHECK(table.find("nccl:all_reduce") != std::string::npos);
  CHECK(table.find("nccl:barrier") != std::string::npos);
  if (!traced(prof) || world < 2) {
    MESSAGE("the NCCL kernel under nccl:all_reduce is checked with 2 GPUs or more (one rank launches none)");
    return;
  }
  const auto& events = prof.events();
  bool kernel_under_row = false;
  for (const profiler::ProfileEvent& e : events)
    if (e.kind == profiler::EventKind::Kernel && e.launcher >= 0 &&
        events[static_cast<size_t>(e.launcher)].name == "nccl:all_reduce" && e.name.find("nccl") != std::string::npos)
      kernel_under_row = true;
  CHECK(kernel_under_row);
}

TEST_CASE("nccl init_process_group without a launcher: one rank on cuda:0") {
  if (!need_nccl()) return;
  REQUIRE_FALSE(dist::is_initialized());
  dist::init_process_group({.backend = dist::Backend::NCCL, .timeout = milliseconds(60'000)});
  CHECK(dist::get_world_size() == 1);
  CHECK(dist::get_rank() == 0);
  CHECK(dist::default_group().device() == Device::cuda(0));
  Tensor t = random({1000}, kBFloat16).to(Device::cuda(0));
  const std::vector<double> before = values(t);
  dist::all_reduce(t, dist::ReduceOp::Avg);
  CHECK(values(t) == before);
  dist::barrier();
  dist::destroy_process_group();
  CHECK_FALSE(dist::is_initialized());
}

TEST_CASE("nccl faults: a rank that never calls the collective makes the other fail within the timeout") {
  if (!need_nccl() || !need_two_gpus()) return;
  std::atomic<int> failed{0};
  std::string error0;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(dist::run_local(
                      2, DeviceType::CUDA,
                      [&](int rank) {
                        Tensor t = random({1024}).to(Device::cuda(rank));
                        dist::all_reduce(t);  // both: connections up
                        cuda::synchronize(Device::cuda(rank));
                        if (rank == 1) {  // never joins the second one
                          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
                          while (failed.load() == 0 && std::chrono::steady_clock::now() < until)
                            std::this_thread::sleep_for(milliseconds(5));
                          return;
                        }
                        try {
                          dist::all_reduce(t, dist::ReduceOp::Sum, true)->synchronize();
                        } catch (const Error& e) {
                          error0 = e.what();
                          ++failed;
                          throw;
                        }
                      },
                      milliseconds(3000)),
                  Error);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(45));
  INFO(error0);
  CHECK(error0.starts_with("all_reduce: "));
  CHECK(error0.find("rank 0 of 2") != std::string::npos);
  CHECK(error0.find("3000 ms") != std::string::npos);
}

TEST_CASE("nccl faults: a rank that throws releases the others blocked in a collective") {
  if (!need_nccl() || !need_two_gpus()) return;
  std::string error0;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(dist::run_local(
                           2, DeviceType::CUDA,
                           [&](int rank) {
                             Tensor t = random({1024}).to(Device::cuda(rank));
                             dist::all_reduce(t);
                             cuda::synchronize(Device::cuda(rank));
                             if (rank == 1) KILN_FAIL("rank one gives up");
                             try {
                               dist::all_reduce(t, dist::ReduceOp::Sum, true)->synchronize();
                             } catch (const Error& e) {
                               error0 = e.what();
                               throw;
                             }
                           },
                           milliseconds(120'000)),
                       "rank one gives up", Error);
  // Far below the two minutes: the abort signal, not the timeout, ended rank 0's wait.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));
  INFO(error0);
  CHECK(error0.find("rank 1 failed: rank one gives up") != std::string::npos);
}

TEST_CASE("nccl with KILN_DIST_DEBUG=1: mismatched sizes are reported on every rank with each rank's values") {
  if (!need_nccl() || !need_two_gpus()) return;
  const char* saved = std::getenv("KILN_DIST_DEBUG");
  const std::string saved_value = saved != nullptr ? saved : "";
  ::setenv("KILN_DIST_DEBUG", "1", 1);
  std::vector<std::string> errors(2);
  dist::run_local(
      2, DeviceType::CUDA,
      [&](int rank) {
        Tensor t = random({rank == 0 ? 12 : 10}).to(Device::cuda(rank));
        try {
          dist::all_reduce(t);
        } catch (const Error& e) {
          errors[rank] = e.what();
        }
        Tensor same = random({4}).to(Device::cuda(rank));
        dist::all_reduce(same);  // the group is still usable: nothing reached NCCL with bad sizes
      },
      milliseconds(60'000));
  if (saved != nullptr)
    ::setenv("KILN_DIST_DEBUG", saved_value.c_str(), 1);
  else
    ::unsetenv("KILN_DIST_DEBUG");
  for (int r = 0; r < 2; ++r)
    CHECK(errors[r] ==
          "all_reduce: the ranks' tensor sizes differ (input elements per rank: [12, 10], output elements per rank: "
          "[12, 10])");
}

#endif  // KILN_WITH_CUDA
