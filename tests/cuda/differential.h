// The differential harness's shared parts: what runs an op on the CPU inputs and on GPU
// copies in the same layouts and compares the results, the dtype lists, and the sampling
// switch. The tables live in test_differential.cpp (ops whose inputs share one shape) and
// test_differential_shaped.cpp (GEMMs and indexing ops, which make their own input sets).
//
// The GPU gets each input in exactly the CPU input's layout (same sizes and strides: the
// storage span the view reaches is copied whole and viewed the same way), so a strided or
// expanded case exercises the GPU kernels' strided paths, not a contiguous copy.
#pragma once

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "testing.h"

namespace kiln::testing {

inline const Device kGpu = Device::cuda(0);

/// An op under test, run on whatever device its inputs are on.
using Op = std::function<Tensor(const std::vector<Tensor>&)>;

inline const std::vector<DType> kFloatDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16};
inline const std::vector<DType> kNumeric = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32};
inline const std::vector<DType> kAll = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};

// Tolerance for comparing the GPU result with the CPU's: the dtype's, widened for float32
// transcendental functions (CUDA's and glibc's differ by a few ulp).
inline Tolerance gpu_tolerance(DType t) {
  Tolerance tol = tolerance(t);
  if (t == kFloat32) tol = {1e-5, 1e-6};
  if (t == kFloat64) tol = {1e-12, 1e-14};
  return tol;
}

/// `t`'s values on `device` in t's exact layout (sizes and strides): the storage span the
/// view reaches is copied whole, and the same view is taken on the copy.
inline Tensor same_layout_on(const Tensor& t, Device device) {
  if (t.numel() == 0 || t.is_contiguous()) return t.contiguous().to(device);
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += (t.sizes()[d] - 1) * t.strides()[d];
  const Tensor storage = t.as_strided({span}, {1}, t.storage_offset()).contiguous().to(device);
  Tensor g = storage.as_strided(t.sizes(), t.strides(), 0);
  REQUIRE(g.strides() == t.strides());
  return g;
}

/// Runs `op` on the CPU inputs and on GPU copies in the same layouts; the GPU result must
/// have the CPU's dtype and shape and agree within `tol` of the result's dtype. An input the
/// CPU refuses must be refused on the GPU too. The GPU inputs are made before the CPU op
/// runs, so in-place ops start from the same values.
inline void check_on_both(const std::string& name, const Op& op, const std::vector<Tensor>& cpu_in,
                   const std::function<Tolerance(DType)>& tol) {
  std::vector<Tensor> gpu_in;
  for (const Tensor& t : cpu_in) gpu_in.push_back(same_layout_on(t, kGpu));
  Tensor want;
  try {
    want = op(cpu_in);
  } catch (const Error&) {
    // Input the op refuses (e.g. max over a size-0 dim): the GPU must refuse it too.
    CHECK_THROWS_AS(op(gpu_in), Error);
    return;
  }
  const Tensor got = op(gpu_in);
  REQUIRE(got.device() == kGpu);
  REQUIRE(got.dtype() == want.dtype());
  check_close(got.cpu(), values(want), want.sizes(), tol(want.dtype()), name);
}

// KILN_TEST_SAMPLE=N runs the first case of every (op, dtype) and every Nth after it: what
// scripts/gpu_check.sh uses under compute-sanitizer, where the full tables would take many
// minutes. Unset, every case runs.
inline int64_t sample_stride() {
  const char* v = std::getenv("KILN_TEST_SAMPLE");
  const int64_t n = v != nullptr ? std::atoll(v) : 1;
  return n > 1 ? n : 1;
}

}  // namespace kiln::testing
