// The Threads backend's collectives against float64 host references: every collective x
// every dtype x world sizes 1..4 x a few sizes (one element, a partial block, several
// blocks), on random data that each rank gets from the main thread; plus the argument
// checks, made locally and across ranks. Ranks only run collectives and store results; the
// checks run in the test's thread afterwards (doctest asserts stay on one thread).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/collective_reference.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;
namespace dist = kiln::distributed;
using namespace kiln::testing::collective;

namespace {

std::string label(const char* c, int world, DType dtype, int64_t n, const char* op = "") {
  return fmt::format("{} world {} {} numel {} {}", c, world, dtype, n, op);
}

}  // namespace

TEST_CASE("threads all_reduce: every op, dtype, world size 1..4 and size against a float64 reference") {
  manual_seed(11);
  for (int world = 1; world <= 4; ++world) {
    for (DType dtype : kAllTypes) {
      for (int64_t n : kSizes) {
        const std::vector<Tensor> in = inputs(world, n, dtype);
        const auto in_values = values_of(in);
        for (dist::ReduceOp op : kOps) {
          if (!applies(op, dtype)) continue;
          std::vector<Tensor> out(world);
          dist::run_local(world, DeviceType::CPU, [&](int rank) {
            Tensor t = in[rank].clone();
            dist::WorkHandle w = dist::all_reduce(t, op);
            REQUIRE(w->is_completed());
            out[rank] = t;
          });
          const std::string what = label("all_reduce", world, dtype, n, dist::to_string(op));
          for (int r = 0; r < world; ++r) check_close(out[r], expected_reduce(in_values, 0, n, op, dtype), {n}, what);
          check_same_bits(out, what);
        }
      }
    }
  }
}

TEST_CASE("threads broadcast: every dtype, world size and root") {
  manual_seed(12);
  for (int world = 1; world <= 4; ++world) {
    for (DType dtype : kAllTypes) {
      for (int64_t n : kSizes) {
        const std::vector<Tensor> in = inputs(world, n, dtype);
        for (int src = 0; src < world; ++src) {
          std::vector<Tensor> out(world);
          dist::run_local(world, DeviceType::CPU, [&](int rank) {
            Tensor t = in[rank].clone();
            dist::broadcast(t, src);
            out[rank] = t;
          });
          const std::string what = label("broadcast", world, dtype, n, std::to_string(src).c_str());
          for (int r = 0; r < world; ++r) check_close(out[r], values(in[src]), {n}, tolerance(kFloat64), what);
        }
      }
    }
  }
}

TEST_CASE("threads all_gather: every dtype and world size; rank blocks in rank order") {
  manual_seed(13);
  for (int world = 1; world <= 4; ++world) {
    for (DType dtype : kAllTypes) {
      for (int64_t n : kSizes) {
        const std::vector<Tensor> in = inputs(world, n, dtype);
        std::vector<double> expected;
        for (const Tensor& t : in) {
          const std::vector<double> v = values(t);
          expected.insert(expected.end(), v.begin(), v.end());
        }
        std::vector<Tensor> out(world);
        dist::run_local(world, DeviceType::CPU, [&](int rank) {
          Tensor o = full({world, n}, 1, TensorOptions(dtype));
          dist::all_gather(o, in[rank]);
          out[rank] = o;
        });
        const std::string what = label("all_gather", world, dtype, n);
        for (int r = 0; r < world; ++r) check_close(out[r], expected, {world, n}, tolerance(kFloat64), what);
      }
    }
  }
}

TEST_CASE("threads all_gather: the input may be the rank's own block of the output (in place)") {
  manual_seed(14);
  const int world = 3;
  const int64_t n = 5;
  const std::vector<Tensor> in = inputs(world, n, kFloat32);
  std::vector<Tensor> out(world);
  dist::run_local(world, DeviceType::CPU, [&](int rank) {
    Tensor o = zeros({world * n});
    Tensor block = o.narrow(0, rank * n, n);
    block.copy_(in[rank]);
    dist::all_gather(o, block);
    out[rank] = o;
  });
  std::vector<double> expected;
  for (const Tensor& t : in) {
    const std::vector<double> v = values(t);
    expected.insert(expected.end(), v.begin(), v.end());
  }
  for (int r = 0; r < world; ++r) check_close(out[r], expected, {world * n}, tolerance(kFloat64));
}

TEST_CASE("threads reduce_scatter: every op, dtype and world size; rank r keeps block r") {
  manual_seed(15);
  for (int world = 1; world <= 4; ++world) {
    for (DType dtype : kAllTypes) {
      for (int64_t n : kSizes) {
        const std::vector<Tensor> in = inputs(world, world * n, dtype);
        const auto in_values = values_of(in);
        for (dist::ReduceOp op : kOps) {
          if (!applies(op, dtype)) continue;
          std::vector<Tensor> out(world);
          dist::run_local(world, DeviceType::CPU, [&](int rank) {
            Tensor o = full({n}, 3, TensorOptions(dtype));
            dist::reduce_scatter(o, in[rank], op);
            out[rank] = o;
          });
          const std::string what = label("reduce_scatter", world, dtype, n, dist::to_string(op));
          for (int r = 0; r < world; ++r)
            check_close(out[r], expected_reduce(in_values, r * n, n, op, dtype), {n}, what);
        }
      }
    }
  }
}

TEST_CASE("threads all_reduce: integers wrap on overflow, floats propagate NaN through max and min") {
  std::vector<Tensor> out(2);
  std::vector<Tensor> nan_out(2);
  dist::run_local(2, DeviceType::CPU, [&](int rank) {
    Tensor t = from_vector<int32_t>({std::numeric_limits<int32_t>::max(), -5}, {2});
    dist::all_reduce(t, dist::ReduceOp::Sum);
    out[rank] = t;
    Tensor f = from_vector<float>({rank == 0 ? std::nanf("") : 1.f, 2.f}, {2});
    dist::all_reduce(f, dist::ReduceOp::Max);
    nan_out[rank] = f;
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(out[r].to_vector<int32_t>() == std::vector<int32_t>{-2, -10});  // 2 * INT32_MAX wraps to -2
    const std::vector<float> f = nan_out[r].to_vector<float>();
    CHECK(std::isnan(f[0]));
    CHECK(f[1] == 2.f);
  }
}

TEST_CASE("threads barrier: no rank leaves before every rank arrived") {
  const int world = 4;
  std::mutex m;
  int arrived = 0;
  std::vector<int> seen(world, -1);
  dist::run_local(world, DeviceType::CPU, [&](int rank) {
    {
      std::lock_guard lock(m);
      ++arrived;
    }
    dist::barrier();
    std::lock_guard lock(m);
    seen[rank] = arrived;
  });
  for (int r = 0; r < world; ++r) CHECK(seen[r] == world);
}

TEST_CASE("threads collectives reject bad arguments with the op's name and the values") {
  dist::run_local(1, DeviceType::CPU, [&](int) {
    Tensor nc = random({3, 4}).t();
    CHECK_THROWS_WITH_AS(dist::all_reduce(nc), doctest::Contains("all_reduce: tensor must be contiguous (sizes [4, 3]"),
                         Error);
    Tensor t = random({6});
    Tensor undefined;
    CHECK_THROWS_WITH_AS(dist::all_reduce(undefined), "all_reduce: tensor is an undefined tensor", Error);
    CHECK_THROWS_WITH_AS(dist::broadcast(t, 1), "broadcast: src 1 is outside [0, 1)", Error);
    CHECK_THROWS_WITH_AS(dist::broadcast(t, -1), "broadcast: src -1 is outside [0, 1)", Error);
    Tensor ints = random({6}, kInt32, -10, 10);
    CHECK_THROWS_WITH_AS(dist::all_reduce(ints, dist::ReduceOp::Avg),
                         "all_reduce: avg needs a floating dtype, got int32; use sum and divide", Error);
    Tensor flags = random({6}, kBool);
    CHECK_THROWS_WITH_AS(dist::all_reduce(flags, dist::ReduceOp::Avg),
                         "all_reduce: avg needs a floating dtype, got bool; use sum and divide", Error);
    Tensor out64 = zeros({6}, TensorOptions(kFloat64));
    CHECK_THROWS_WITH_AS(dist::all_gather(out64, t), "all_gather: output is float64 but input is float32; they must match",
                         Error);
    Tensor small = zeros({5});
    CHECK_THROWS_WITH_AS(dist::all_gather(small, t), "all_gather: output has 5 elements but 1 ranks x 6 input elements = 6",
                         Error);
    CHECK_THROWS_WITH_AS(dist::reduce_scatter(small, t),
                         "reduce_scatter: input has 6 elements but 1 ranks x 5 output elements = 5", Error);
    CHECK_THROWS_WITH_AS(dist::reduce_scatter(out64, t), doctest::Contains("reduce_scatter: output is float64 but input is float32"),
                         Error);
    Tensor nc_out = zeros({2, 3}).t();
    CHECK_THROWS_WITH_AS(dist::all_gather(nc_out, t), doctest::Contains("all_gather: output must be contiguous"), Error);
    Tensor out6 = zeros({6});
    CHECK_THROWS_WITH_AS(dist::reduce_scatter(out6, nc), doctest::Contains("reduce_scatter: input must be contiguous"),
                         Error);
    // The group stays usable after argument errors.
    dist::all_reduce(t);
  });
}

TEST_CASE("threads collectives: CUDA tensors are rejected with the device named") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: no GPU, so no CUDA tensor to pass (the check is the device comparison in collective_checks.cpp)");
    return;
  }
  dist::run_local(1, DeviceType::CPU, [&](int) {
    Tensor g = random({4}).to(Device::cuda(0));
    CHECK_THROWS_WITH_AS(dist::all_reduce(g), "all_reduce: tensor is on cuda:0 but the threads backend takes CPU tensors",
                         Error);
  });
}

TEST_CASE("threads collectives: disagreement between ranks is reported on every rank, with each rank's values") {
  const int world = 3;
  std::vector<std::string> errors(world);
  auto run = [&](const std::function<void(int)>& body) {
    std::fill(errors.begin(), errors.end(), std::string());
    dist::run_local(world, DeviceType::CPU, [&](int rank) {
      try {
        body(rank);
      } catch (const Error& e) {
        errors[rank] = e.what();
      }
      dist::barrier();  // the group is still usable afterwards
    });
  };
  run([](int rank) {
    Tensor t = random({rank == 1 ? 10 : 12});
    dist::all_reduce(t);
  });
  for (int r = 0; r < world; ++r)
    CHECK(errors[r] ==
          "all_reduce: the ranks' tensor sizes differ (input elements per rank: [12, 10, 12], output elements per "
          "rank: [12, 10, 12])");
  run([](int rank) {
    Tensor t = random({4}, rank == 2 ? kFloat64 : kFloat32);
    dist::all_reduce(t);
  });
  for (int r = 0; r < world; ++r)
    CHECK(errors[r] == "all_reduce: the ranks' dtypes differ (per rank: [float32, float32, float64])");
  run([](int rank) {
    Tensor t = random({4});
    dist::all_reduce(t, rank == 0 ? dist::ReduceOp::Max : dist::ReduceOp::Sum);
  });
  for (int r = 0; r < world; ++r) CHECK(errors[r] == "all_reduce: the ranks' reduce ops differ (per rank: [max, sum, sum])");
  run([](int rank) {
    Tensor t = random({4});
    dist::broadcast(t, rank == 0 ? 1 : 0);
  });
  for (int r = 0; r < world; ++r) CHECK(errors[r] == "broadcast: the ranks' src differ (per rank: [1, 0, 0])");
  run([](int rank) {
    Tensor t = random({4});
    if (rank == 1)
      dist::broadcast(t, 0);
    else
      dist::all_reduce(t);
  });
  CHECK(errors[0] == "all_reduce: the ranks called different collectives (per rank: [all_reduce, broadcast, all_reduce])");
  CHECK(errors[1] == "broadcast: the ranks called different collectives (per rank: [all_reduce, broadcast, all_reduce])");
  // One rank's local argument error reaches the others at once (no waiting for the timeout).
  run([](int rank) {
    Tensor t = rank == 2 ? random({3, 4}).t() : random({4, 3});
    dist::all_reduce(t);
  });
  CHECK(errors[2].starts_with("all_reduce: tensor must be contiguous"));
  for (int r = 0; r < 2; ++r)
    CHECK(errors[r].starts_with("all_reduce: rank 2 failed its argument checks: all_reduce: tensor must be contiguous"));
}

TEST_CASE("threads group: rank, size, backend, device and timeout") {
  std::vector<int> ranks(3, -1), sizes(3, -1);
  dist::run_local(
      3, DeviceType::CPU,
      [&](int rank) {
        dist::ProcessGroup& g = dist::default_group();
        ranks[rank] = dist::get_rank();
        sizes[rank] = dist::get_world_size();
        CHECK_EQ(g.backend(), dist::Backend::Threads);  // doctest asserts are thread-safe for plain checks
        CHECK_EQ(g.device(), Device::cpu());
        CHECK_EQ(g.timeout(), std::chrono::milliseconds(1234));
      },
      std::chrono::milliseconds(1234));
  CHECK(ranks == std::vector<int>{0, 1, 2});
  CHECK(sizes == std::vector<int>{3, 3, 3});
  CHECK(std::string(dist::to_string(dist::Backend::Threads)) == "threads");
  CHECK(std::string(dist::to_string(dist::Backend::NCCL)) == "nccl");
  CHECK(std::string(dist::to_string(dist::ReduceOp::Avg)) == "avg");
}
