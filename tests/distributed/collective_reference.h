// Float64 host references for the collectives, shared by the Threads suite
// (tests/distributed) and the NCCL suite (tests/cuda): random inputs per rank, and what
// reducing them over the ranks must give.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <cstdint>
#include <vector>

#include "testing.h"

namespace kiln::testing::collective {

namespace dist = kiln::distributed;

inline const std::vector<DType> kAllTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};
inline const std::vector<int64_t> kSizes = {1, 7, 3000};  // 3000 spans three of the backend's 1024-element blocks
inline const std::vector<dist::ReduceOp> kOps = {dist::ReduceOp::Sum, dist::ReduceOp::Avg, dist::ReduceOp::Max,
                                                 dist::ReduceOp::Min};

inline bool applies(dist::ReduceOp op, DType dtype) { return op != dist::ReduceOp::Avg || is_floating(dtype); }

// Random inputs per rank: integers over a wide range, floats in [-2, 2), bools half true.
inline std::vector<Tensor> inputs(int world, int64_t numel, DType dtype) {
  std::vector<Tensor> v;
  for (int r = 0; r < world; ++r)
    v.push_back(is_integral(dtype) ? random({numel}, dtype, -1000, 1000) : random({numel}, dtype));
  return v;
}

// float64 reference of reducing element i over ranks. Bool: sum/max = or, min = and.
inline double reference_reduce(const std::vector<std::vector<double>>& in, size_t i, dist::ReduceOp op) {
  double acc = in[0][i];
  for (size_t r = 1; r < in.size(); ++r) {
    switch (op) {
      case dist::ReduceOp::Sum:
      case dist::ReduceOp::Avg: acc += in[r][i]; break;
      case dist::ReduceOp::Max: acc = std::max(acc, in[r][i]); break;
      case dist::ReduceOp::Min: acc = std::min(acc, in[r][i]); break;
    }
  }
  if (op == dist::ReduceOp::Avg) acc /= static_cast<double>(in.size());
  return acc;
}

inline std::vector<std::vector<double>> values_of(const std::vector<Tensor>& ts) {
  std::vector<std::vector<double>> v;
  for (const Tensor& t : ts) v.push_back(values(t));
  return v;
}

// The float64 reference of elements [offset, offset + n) of the reduction (bool: 0 or 1).
inline std::vector<double> expected_reduce(const std::vector<std::vector<double>>& in, int64_t offset, int64_t n,
                                           dist::ReduceOp op, DType dtype) {
  std::vector<double> e(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double v = reference_reduce(in, static_cast<size_t>(offset + i), op);
    if (dtype == kBool) v = v != 0 ? 1 : 0;
    e[static_cast<size_t>(i)] = v;
  }
  return e;
}

// Every rank's result must be bitwise the same as rank 0's.
inline void check_same_bits(const std::vector<Tensor>& results, const std::string& what) {
  INFO(what);
  for (size_t r = 1; r < results.size(); ++r) {
    const Tensor a = results[r].cpu(), b = results[0].cpu();
    REQUIRE(a.nbytes() == b.nbytes());
    CHECK(std::memcmp(a.data_ptr(), b.data_ptr(), b.nbytes()) == 0);
  }
}

}  // namespace kiln::testing::collective
