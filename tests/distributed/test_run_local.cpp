// run_local() and the default group: a rank that never arrives, one that throws, one that
// returns without joining; init_process_group() / destroy_process_group() with the Threads
// backend; the errors of using a group that is not there. Timeouts here are short on purpose.
#include <atomic>
#include <chrono>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;
namespace dist = kiln::distributed;
using std::chrono::milliseconds;

namespace {

// Waits (bounded) until `counter` reaches `target`: a rank that must not arrive before the
// others have failed.
void wait_for(const std::atomic<int>& counter, int target) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (counter.load() < target && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(milliseconds(2));
}

}  // namespace

// The ranks that do arrive meet at a latch first and the timeout is half a second, so that a
// slow thread start under a loaded machine (ctest -j, sanitizers) cannot pass for a missing rank.
TEST_CASE("run_local: a rank that never arrives makes the others fail within the timeout, naming it") {
  std::atomic<int> failed{0};
  std::latch present(2);
  std::vector<std::string> errors(3);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(dist::run_local(
                           3, DeviceType::CPU,
                           [&](int rank) {
                             if (rank == 2) {  // late: arrives only after both others gave up
                               wait_for(failed, 2);
                               try {
                                 Tensor t = random({4});
                                 dist::all_reduce(t);
                               } catch (const Error& e) {
                                 errors[rank] = e.what();
                               }
                               return;
                             }
                             Tensor t = random({4});
                             present.arrive_and_wait();
                             try {
                               dist::all_reduce(t);
                             } catch (const Error& e) {
                               errors[rank] = e.what();
                               ++failed;
                               throw;
                             }
                           },
                           milliseconds(500)),
                       doctest::Contains("rank 2 did not arrive at all_reduce within 500 ms"), Error);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  CHECK(elapsed < std::chrono::seconds(20));
  for (int r = 0; r < 2; ++r)
    CHECK_MESSAGE(errors[r].find("rank 2 did not arrive at all_reduce within 500 ms") != std::string::npos, errors[r]);
  // The late rank finds the group broken, with the reason.
  CHECK(errors[2] == "all_reduce: the process group is broken: rank 2 did not arrive at all_reduce within 500 ms");
}

TEST_CASE("run_local: several missing ranks are all named") {
  std::atomic<int> failed{0};
  std::latch present(2);
  CHECK_THROWS_WITH_AS(dist::run_local(
                           4, DeviceType::CPU,
                           [&](int rank) {
                             if (rank == 1 || rank == 3) {
                               wait_for(failed, 1);
                               return;
                             }
                             present.arrive_and_wait();
                             try {
                               dist::barrier();
                             } catch (...) {
                               ++failed;
                               throw;
                             }
                           },
                           milliseconds(500)),
                       doctest::Contains("ranks 1, 3 did not arrive at barrier within 500 ms"), Error);
}

TEST_CASE("run_local: an exception in one rank is rethrown as is, and the others stop waiting for it") {
  struct Boom : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  std::vector<std::string> errors(3);
  const auto t0 = std::chrono::steady_clock::now();
  // The default timeout (minutes) would fail the test: the others must be released by the abort.
  CHECK_THROWS_WITH_AS(dist::run_local(3, DeviceType::CPU,
                                       [&](int rank) {
                                         if (rank == 1) throw Boom("boom on rank 1");
                                         try {
                                           Tensor t = random({4});
                                           dist::all_reduce(t);
                                         } catch (const Error& e) {
                                           errors[rank] = e.what();
                                           throw;
                                         }
                                       }),
                       "boom on rank 1", Boom);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  for (int r : {0, 2}) CHECK(errors[r] == "all_reduce: the process group is broken: rank 1 failed: boom on rank 1");
}

TEST_CASE("run_local: a rank whose function returned without joining fails the others at once") {
  std::vector<std::string> errors(2);
  CHECK_THROWS_WITH_AS(dist::run_local(2, DeviceType::CPU,
                                       [&](int rank) {
                                         if (rank == 1) return;
                                         Tensor t = random({4});
                                         dist::broadcast(t, 0);
                                       }),
                       "broadcast: rank 1 finished without joining broadcast (threads group of 2, seen from rank 0)",
                       Error);
}

TEST_CASE("run_local: argument errors") {
  CHECK_THROWS_WITH_AS(dist::run_local(0, DeviceType::CPU, [](int) {}), "run_local: the world size must be at least 1, got 0",
                       Error);
  CHECK_THROWS_WITH_AS(dist::run_local(2, DeviceType::CPU, [](int) {}, milliseconds(0)),
                       "run_local: the timeout must be positive, got 0 ms", Error);
  CHECK_THROWS_WITH_AS(dist::run_local(1, DeviceType::CPU, std::function<void(int)>()), "run_local: the function is empty",
                       Error);
  CHECK_THROWS_WITH_AS(dist::run_local(2, DeviceType::CPU, [](int) { dist::run_local(1, DeviceType::CPU, [](int) {}); }),
                       doctest::Contains("run_local: already inside run_local() (rank"), Error);
  if (!dist::is_nccl_available()) {
    CHECK_THROWS_WITH_AS(dist::run_local(1, DeviceType::CUDA, [](int) {}),
                         doctest::Contains("run_local: CUDA ranks need the nccl backend, which is not in this build"), Error);
  } else if (cuda::device_count() < 64) {
    CHECK_THROWS_WITH_AS(dist::run_local(64, DeviceType::CUDA, [](int) {}),
                         doctest::Contains("run_local: 64 ranks on CUDA need 64 GPUs, but"), Error);
  }
}

TEST_CASE("default group: absent outside run_local and init_process_group, present inside") {
  REQUIRE_FALSE(dist::is_initialized());
  CHECK_THROWS_WITH_AS(dist::default_group(),
                       "default_group: no process group: call init_process_group() first, or run inside run_local()",
                       Error);
  CHECK_THROWS_WITH_AS(dist::get_rank(), doctest::Contains("default_group: no process group"), Error);
  Tensor t = random({3});
  CHECK_THROWS_WITH_AS(dist::all_reduce(t), doctest::Contains("default_group: no process group"), Error);
  CHECK_THROWS_WITH_AS(dist::destroy_process_group(), "destroy_process_group: no process group is initialised", Error);
  std::vector<int> inside(2, 0);
  dist::run_local(2, DeviceType::CPU, [&](int rank) {
    inside[rank] = dist::is_initialized() ? 1 : 0;
    CHECK_THROWS_WITH_AS(dist::init_process_group(), doctest::Contains("init_process_group: this thread runs inside run_local()"),
                         Error);
    CHECK_THROWS_WITH_AS(dist::destroy_process_group(),
                         "destroy_process_group: run_local()'s group ends when run_local() returns", Error);
  });
  CHECK(inside == std::vector<int>{1, 1});
  CHECK_FALSE(dist::is_initialized());
}

TEST_CASE("init_process_group: the threads backend in a single process, then destroy") {
  REQUIRE_FALSE(dist::is_initialized());
  dist::init_process_group({.backend = dist::Backend::Threads, .timeout = milliseconds(2000)});
  CHECK(dist::is_initialized());
  CHECK(dist::get_rank() == 0);
  CHECK(dist::get_world_size() == 1);
  CHECK(dist::default_group().timeout() == milliseconds(2000));
  CHECK_THROWS_WITH_AS(dist::init_process_group({.backend = dist::Backend::Threads, .timeout = std::nullopt}),
                       "init_process_group: already initialised (rank 0 of 1); call destroy_process_group() first", Error);
  // World size 1: every collective leaves the values as they are (avg of one value included).
  Tensor t = random({5}, kFloat64);
  const std::vector<double> before = values(t);
  dist::all_reduce(t, dist::ReduceOp::Avg);
  CHECK(values(t) == before);
  Tensor g = zeros({5}, TensorOptions(kFloat64));
  dist::all_gather(g, t);
  CHECK(values(g) == before);
  dist::barrier();
  // An explicit group argument is the same group.
  dist::all_reduce(t, dist::ReduceOp::Max, false, &dist::default_group());
  CHECK(values(t) == before);
  dist::destroy_process_group();
  CHECK_FALSE(dist::is_initialized());
  CHECK_THROWS_WITH_AS(dist::init_process_group({.backend = std::nullopt, .timeout = milliseconds(-5)}),
                       "init_process_group: the timeout must be positive, got -5 ms", Error);
  CHECK_FALSE(dist::is_initialized());
}

TEST_CASE("init_process_group: the nccl backend where it cannot run says why") {
  REQUIRE_FALSE(dist::is_initialized());
  const dist::InitOptions nccl{.backend = dist::Backend::NCCL, .timeout = milliseconds(1000)};
  if (!dist::is_nccl_available()) {
    CHECK_THROWS_WITH_AS(dist::init_process_group(nccl),
                         "init_process_group: the nccl backend is not in this build (it needs a CUDA build that found NCCL)",
                         Error);
  } else if (!cuda::is_available()) {
    CHECK_THROWS_WITH_AS(dist::init_process_group(nccl), "init_process_group: the nccl backend needs a GPU, but none is visible",
                         Error);
  } else {
    MESSAGE("skipped: NCCL and a GPU are here (tests/cuda/test_distributed_nccl.cpp runs init_process_group on them)");
    return;
  }
  CHECK_FALSE(dist::is_initialized());
}
