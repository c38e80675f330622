// The indexing ops' GPU-only behaviour (the CPU-vs-GPU agreement is in test_differential.cpp):
// an out-of-range index is a kiln::Error with the CPU's message and leaves the target
// untouched, the device stays usable afterwards; scatter_add_ under heavy contention (many
// duplicates into few elements) sums every contribution in every dtype; and while a stream is
// captured into a CUDA graph the range check is skipped but no access leaves the tensors.
#ifdef KILN_WITH_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {
const Device kGpu = Device::cuda(0);
}

TEST_CASE("indexing on the GPU: an out-of-range index is the CPU's error and writes nothing") {
  const Tensor x = arange(12).view({3, 4}).to(kFloat32).to(kGpu);
  CHECK_THROWS_WITH_AS(index_select(x, 1, tensor({0, 4, 1}).to(kGpu)),
                       "index_select: index 4 is out of bounds for dimension 1 with size 4 (at position [1] of index)",
                       Error);
  CHECK_THROWS_WITH_AS(gather(x, 1, tensor({{0, 1}, {2, 7}}).to(kGpu)),
                       "gather: index 7 is out of bounds for dimension 1 with size 4 (at position [1, 1] of index)",
                       Error);
  CHECK_THROWS_WITH_AS(embedding(x, tensor({{0, 1}, {-3, 2}}).to(kGpu)),
                       "embedding: index -3 is out of bounds for dimension 0 with size 3 (at position [1, 0] of "
                       "indices)",
                       Error);
  // Several bad indices: the first in row-major order is reported, as on the CPU, also
  // through a strided (transposed) index.
  const Tensor bad = tensor({{0, 9}, {-1, 2}}).t().contiguous().t().to(kGpu);  // [[0, 9], [-1, 2]], strides [1, 2]
  CHECK_THROWS_WITH_AS(gather(x, 1, bad),
                       "gather: index 9 is out of bounds for dimension 1 with size 4 (at position [0, 1] of index)",
                       Error);
  Tensor y = x.clone();
  CHECK_THROWS_WITH_AS(scatter_(y, 1, tensor({{0, 1, -2, 9}}).to(kGpu), ones({1, 4}, kGpu)),
                       "scatter_: index -2 is out of bounds for dimension 1 with size 4 (at position [0, 2] of index)",
                       Error);
  CHECK_THROWS_WITH_AS(scatter_add_(y, 0, tensor({{3, 0, 0, 0}}).to(kGpu), ones({1, 4}, kGpu)),
                       doctest::Contains("scatter_add_: index 3 is out of bounds for dimension 0 with size 3"), Error);
  CHECK(equal(y.cpu(), x.cpu()));  // nothing was written
  // The device is fine afterwards (no sticky error, unlike a device-side assert).
  CHECK(equal(gather(x, 1, tensor({{3}, {2}, {1}}).to(kGpu)).cpu(), tensor({{3.0f}, {6.0f}, {9.0f}})));
  // Index and data on different devices are refused before any kernel runs.
  CHECK_THROWS_WITH_AS(gather(x, 1, tensor({{0}})), "gather: expected index on cuda:0 (self's device), got cpu", Error);
  CHECK_THROWS_WITH_AS(embedding(x, tensor({0})), "embedding: expected indices on cuda:0 (weight's device), got cpu",
                       Error);
  CHECK_THROWS_WITH_AS(masked_fill(x, tensor({true}), 0),
                       "masked_fill: expected the mask on cuda:0 (self's device), got cpu", Error);
}

TEST_CASE("scatter_add_ on the GPU sums every duplicate under heavy contention") {
  manual_seed(91);
  // Values chosen so that every partial sum is exactly representable, whatever order the
  // atomics add in: then the GPU total must equal the float64 total exactly.
  //   float32, float64: multiples of 1/8 in [-2, 2), 2^17 adds per element: |sum| <= 2^18 in
  //     steps of 1/8 needs 21 significant bits (float32 has 24);
  //   int64, int32: integers in [-50, 50), exact anyway;
  //   float16, bfloat16: integers in [-4, 4), about 32 adds per element (the most drawn is
  //     checked below 60): |sum| < 256, exact in bfloat16's 8 significant bits.
  struct Load {
    DType dtype;
    int64_t per_row;  // additions per row, into 8 elements
  };
  for (const Load& load : {Load{kFloat32, 1 << 20}, Load{kFloat64, 1 << 20}, Load{kInt64, 1 << 20},
                           Load{kInt32, 1 << 20}, Load{kFloat16, 256}, Load{kBFloat16, 256}}) {
    const DType dtype = load.dtype;
    CAPTURE(dtype_name(dtype));
    const int64_t n = load.per_row;
    const Tensor index = random({4, n}, kInt64, 0, 8);
    Tensor src;
    if (dtype == kFloat32 || dtype == kFloat64) src = random_eighths({4, n}, dtype);
    else if (is_integral(dtype)) src = random({4, n}, dtype, -50, 50);
    else src = random({4, n}, kInt64, -4, 4).to(dtype);
    const std::vector<double> vi = values(index), vs = values(src);
    std::vector<double> want(4 * 8, 0.0);
    std::vector<int64_t> adds(4 * 8, 0);
    for (size_t p = 0; p < vs.size(); ++p) {
      const size_t slot = (p / static_cast<size_t>(n)) * 8 + static_cast<size_t>(vi[p]);
      want[slot] += vs[p];
      ++adds[slot];
    }
    if (n == 256) REQUIRE(*std::max_element(adds.begin(), adds.end()) < 60);
    Tensor acc = zeros({4, 8}, TensorOptions(dtype).device(kGpu));
    scatter_add_(acc, 1, index.to(kGpu), src.to(kGpu));
    check_close(acc.cpu(), want, {4, 8}, Tolerance{0, 0});
  }
}

TEST_CASE("indexing during CUDA graph capture: no range check, and no access outside the tensors") {
  const Stream s = Stream::create(kGpu);
  cuda::StreamGuard guard(s);
  const Tensor x = arange(12).view({3, 4}).to(kFloat32).to(kGpu);
  const Tensor bad = tensor({{0, 9}, {-1, 2}, {3, 3}}).to(kGpu);
  Tensor target = zeros({3, 4}, kGpu);
  const Tensor ones_src = ones({3, 2}, kGpu);
  // Warm the allocator with the same sizes, so the captured calls reuse cached blocks.
  (void)gather(x, 1, tensor({{0, 0}, {0, 0}, {0, 0}}).to(kGpu));
  s.synchronize();
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(s.id());
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  Tensor out;
  bool threw = false;
  try {
    out = gather(x, 1, bad);                 // bad indices: not checked while capturing
    scatter_add_(target, 1, bad, ones_src);  // the bad ones dropped
  } catch (const Error&) {
    threw = true;
  }
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  REQUIRE_FALSE(threw);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  // gather reads 0 for a bad index; scatter_add_ drops it.
  CHECK(out.cpu().to_vector<float>() == std::vector<float>{0, 0, 0, 6, 11, 11});
  CHECK(target.cpu().to_vector<float>() == std::vector<float>{1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 2});
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

#endif  // KILN_WITH_CUDA
