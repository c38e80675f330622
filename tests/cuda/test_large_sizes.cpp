// The size-dependent paths of the CUDA row and reduction kernels, which the differential
// table's small shapes never reach: reductions split over many blocks, long rows that do not
// fit a block's cache, many short rows, column reductions over a million rows. Each result
// is checked against the same call on the CPU.
#ifdef KILN_WITH_CUDA

#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const Device kGpu = Device::cuda(0);

/// Runs `op` on `x` on both devices and compares; `tol` defaults to the dtype's.
void same_on_both(const std::string& what, const Tensor& x, const std::function<Tensor(const Tensor&)>& op,
                  std::optional<Tolerance> tol = std::nullopt) {
  INFO(what);
  CAPTURE(shape_str(x.sizes()));
  CAPTURE(dtype_name(x.dtype()));
  const Tensor want = op(x);
  const Tensor got = op(x.to(kGpu));
  REQUIRE(got.device() == kGpu);
  REQUIRE(got.dtype() == want.dtype());
  Tolerance t = tol ? *tol : tolerance(want.dtype());
  if (!tol && want.dtype() == kFloat32) t = {1e-5, 1e-6};
  check_close(got.cpu(), values(want), want.sizes(), t, what);
}

}  // namespace

TEST_CASE("large reductions: multi-block splits, long rows, column reductions") {
  manual_seed(41);
  for (DType dtype : {kFloat32, kBFloat16, kInt32}) {
    const Tensor flat = random({3'000'001}, dtype, -3, 3);
    // Sums of millions of values: the GPU accumulates in double (float32) or float (16-bit).
    const Tolerance sum_tol = dtype == kBFloat16 ? Tolerance{1.6e-2, 1.0} : Tolerance{1e-6, 1e-3};
    same_on_both("sum all", flat, [](const Tensor& t) { return sum(t); }, sum_tol);
    same_on_both("max all", flat, [](const Tensor& t) { return max(t); });
    same_on_both("argmin all (many ties for integers)", flat, [](const Tensor& t) { return argmin(t); });
    const Tensor rows = random({4, 1'000'001}, dtype, -3, 3);
    same_on_both("sum of 4 long rows", rows, [](const Tensor& t) { return sum(t, {-1}); }, sum_tol);
    same_on_both("argmax of 4 long rows", rows, [](const Tensor& t) { return argmax(t, -1); });
    const Tensor cols = random({1'000'003, 3}, dtype, -3, 3);
    same_on_both("column sums over a million rows", cols, [](const Tensor& t) { return sum(t, {0}); }, sum_tol);
    same_on_both("column argmin over a million rows", cols, [](const Tensor& t) { return argmin(t, 0); });
    const Tensor square = random({2048, 2048}, dtype, -3, 3).t();
    same_on_both("sum over dim 0 of a transposed matrix", square, [](const Tensor& t) { return sum(t, {0}); }, sum_tol);
    same_on_both("min over dim 1 of a transposed matrix", square, [](const Tensor& t) { return min(t, {1}); });
  }
  const Tensor many = random({100'000, 37}, kFloat32, -3, 3);
  same_on_both("mean of many short rows", many, [](const Tensor& t) { return mean(t, {1}); });
  std::vector<float> ones_with_nans(2'000'000, 1.0f);
  ones_with_nans[1'234'567] = ones_with_nans[1'900'000] = std::numeric_limits<float>::quiet_NaN();
  const Tensor nans = from_vector(ones_with_nans, {2'000'000});
  same_on_both("NaN propagates through a long max", nans, [](const Tensor& t) { return max(t); });
  same_on_both("argmax finds the first NaN", nans, [](const Tensor& t) { return argmax(t); });
  same_on_both("argmin finds the first NaN", nans.view({1000, 2000}), [](const Tensor& t) { return argmin(t, 1); });
}

TEST_CASE("softmax and layer_norm on rows that fit a block's cache and rows that do not") {
  manual_seed(42);
  for (DType dtype : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    for (const Shape& shape : {Shape{4096, 1024}, Shape{64, 4096}, Shape{5, 70'000}, Shape{3, 100'003}, Shape{2, 300'007}}) {
      const Tensor x = random(shape, dtype, -4, 4);
      same_on_both("softmax", x, [](const Tensor& t) { return softmax(t, -1); });
      same_on_both("log_softmax", x, [](const Tensor& t) { return log_softmax(t, -1); });
      const int64_t n = shape.back();
      const Tensor w = random({n}, dtype, 0.5, 1.5), b = random({n}, dtype, -1, 1);
      same_on_both("layer_norm", x, [&](const Tensor& t) {
        return layer_norm(t, {n}, w.to(t.device()), b.to(t.device()));
      });
    }
  }
}

TEST_CASE("dropout on a million elements draws the CPU's mask") {
  for (DType dtype : {kFloat32, kBFloat16}) {
    const Tensor x = random({1'000'003}, dtype, 1, 2);
    manual_seed(43);
    const Tensor cpu = dropout(x, 0.25, true);
    manual_seed(43);
    const Tensor gpu = dropout(x.to(kGpu), 0.25, true);
    CHECK(equal(gpu.cpu(), cpu));
    const double kept = mean((cpu != 0).to(kFloat64)).item<double>();
    CHECK(kept > 0.74);
    CHECK(kept < 0.76);
  }
}

#endif  // KILN_WITH_CUDA
