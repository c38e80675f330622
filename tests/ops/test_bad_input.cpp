// The foundation's bad-input list, one case each: every one raises kiln::Error whose
// message starts with the op name and shows the offending shapes or values, and nothing
// the caller already had is changed by the failed call.
#include "testing.h"

using namespace kiln;

TEST_CASE("broadcast mismatch") {
  const Tensor a = ones({2, 3}), b = ones({4});
  CHECK_THROWS_WITH_AS(add(a, b), "add: shapes [2, 3] and [4] cannot be broadcast together (dim -1: 3 vs 4)", Error);
  CHECK_THROWS_WITH_AS(a * ones({3, 3}), doctest::Contains("mul: shapes [2, 3] and [3, 3] cannot be broadcast"), Error);
  CHECK_THROWS_WITH_AS(where(ones({2}) > 0, a, b), doctest::Contains("where: shapes"), Error);
}

TEST_CASE("matmul inner-dimension mismatch") {
  CHECK_THROWS_WITH_AS(matmul(ones({2, 3}), ones({4, 5})),
                       "matmul: inner dimensions must match, but a has shape [2, 3] and b has shape [4, 5] (3 vs 4)",
                       Error);
  CHECK_THROWS_WITH_AS(matmul(ones({3}), ones({4})), doctest::Contains("matmul: inner dimensions must match"), Error);
  CHECK_THROWS_WITH_AS(mm(ones({2, 3}), ones({2, 3})), doctest::Contains("mm: shapes [2, 3] and [2, 3]"), Error);
  CHECK_THROWS_WITH_AS(addmm(zeros({2}), ones({2, 3}), ones({4, 2})), doctest::Contains("addmm: mat1 and mat2"), Error);
}

TEST_CASE("view of a non-viewable layout") {
  const Tensor t = arange(6).view({2, 3}).t();  // [3, 2] with strides [1, 3]
  CHECK_THROWS_WITH_AS(t.view({6}),
                       doctest::Contains("view: size [6] is not compatible with input tensor's size [3, 2] and stride "
                                         "[1, 3]"),
                       Error);
  CHECK(t.reshape({6}).to_vector<int64_t>() == std::vector<int64_t>{0, 3, 1, 4, 2, 5});  // reshape copies instead
}

TEST_CASE("reshape with the wrong element count") {
  const Tensor t = ones({2, 3});
  CHECK_THROWS_WITH_AS(t.reshape({4}), "reshape: shape [4] is invalid for input of size 6", Error);
  CHECK_THROWS_WITH_AS(t.view({4, -1}), "view: shape [4, -1] is invalid for input of size 6", Error);
  CHECK_THROWS_WITH_AS(t.reshape({-1, -1}), doctest::Contains("reshape: only one dimension can be inferred"), Error);
}

TEST_CASE("dim out of range") {
  const Tensor t = ones({2, 3});
  CHECK_THROWS_WITH_AS(sum(t, {2}), "sum: dim 2 is out of range for a 2-D tensor (expected a dim in [-2, 1])", Error);
  CHECK_THROWS_WITH_AS(softmax(t, -3), doctest::Contains("softmax: dim -3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(t.transpose(0, 2), doctest::Contains("transpose: dim 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(t.unsqueeze(4), doctest::Contains("unsqueeze: dim 4 is out of range"), Error);
  CHECK_THROWS_WITH_AS(cat({t, t}, 2), doctest::Contains("cat: dim 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(t.size(5), doctest::Contains("size: dim 5 is out of range"), Error);
}

TEST_CASE("negative sizes are errors; zero-size tensors work") {
  CHECK_THROWS_WITH_AS(zeros({2, -1}), "zeros: negative dimension -1 in shape [2, -1]", Error);
  CHECK_THROWS_WITH_AS(empty({-3}), "empty: negative dimension -3 in shape [-3]", Error);
  CHECK_THROWS_WITH_AS(ones({3}).narrow(0, 2, 2), doctest::Contains("narrow: start (2) + length (2) exceeds"), Error);
  CHECK_THROWS_WITH_AS(ones({3}).select(0, 3), "select: index 3 is out of bounds for dimension 0 with size 3", Error);

  const Tensor e = zeros({0, 3});
  CHECK((e + 1).sizes() == Shape{0, 3});
  CHECK(exp(e).sizes() == Shape{0, 3});
  CHECK(sum(e, {0}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(sum(e).item<float>() == 0.0f);
  CHECK(std::isnan(mean(e).item<double>()));
  CHECK(matmul(e, ones({3, 4})).sizes() == Shape{0, 4});
  CHECK(matmul(ones({2, 0}), ones({0, 4})).to_vector<float>() == std::vector<float>(8, 0.0f));
  CHECK(softmax(e, 1).sizes() == Shape{0, 3});
  CHECK(cat({e, ones({2, 3})}, 0).sizes() == Shape{2, 3});
  CHECK(e.t().contiguous().sizes() == Shape{3, 0});
  CHECK(nn::Linear(3, 2)(e).sizes() == Shape{0, 2});
  CHECK_THROWS_WITH_AS(max(e, {0}), doctest::Contains("max: cannot reduce over dim 0 of size 0"), Error);
}

TEST_CASE("unsupported dtype for an op") {
  CHECK_THROWS_WITH_AS(softmax(arange(4), 0),
                       "softmax: unsupported dtype int64 (supported: float16, bfloat16, float32, float64)", Error);
  CHECK_THROWS_WITH_AS(mean(arange(4)), doctest::Contains("mean: could not infer output dtype"), Error);
  CHECK_THROWS_WITH_AS(gelu(arange(4)), doctest::Contains("gelu: unsupported dtype int64"), Error);
  CHECK_THROWS_WITH_AS(neg(ones({2}, kBool)), doctest::Contains("neg: unsupported dtype bool"), Error);
  CHECK_THROWS_WITH_AS(matmul(ones({2, 2}, kBool), ones({2, 2}, kBool)), doctest::Contains("matmul: unsupported dtype bool"),
                       Error);
  CHECK_THROWS_WITH_AS(randn({2}, kInt64), doctest::Contains("randn: random values need a floating dtype, got int64"),
                       Error);
  CHECK_THROWS_WITH_AS(layer_norm(arange(4), {4}), doctest::Contains("layer_norm: unsupported dtype int64"), Error);
  CHECK_THROWS_WITH_AS(matmul(ones({2, 2}), ones({2, 2}, kFloat64)),
                       "matmul: expected a and b to have the same dtype, but got float32 and float64", Error);
}

TEST_CASE("mixed devices") {
  // A GPU tensor: a real one when there is a GPU; otherwise from_blob describes one, which
  // is enough for the device checks: they run before any memory is touched.
  float storage[4] = {1, 2, 3, 4};
  const bool gpu_here = cuda::is_available();
  const Tensor gpu = gpu_here ? ones({4}, Device::cuda(0)) : from_blob(storage, {4}, Device::cuda(0));
  Tensor cpu = ones({4});
  CHECK(gpu.device() == Device::cuda(0));
  CHECK_THROWS_WITH_AS(add(cpu, gpu),
                       "add: expected all tensors to be on the same device, but found at least two devices, cpu and "
                       "cuda:0",
                       Error);
  CHECK_THROWS_WITH_AS(matmul(cpu.view({2, 2}), gpu.view({2, 2})), doctest::Contains("matmul: expected all tensors to be "
                                                                                     "on the same device"),
                       Error);
  CHECK_THROWS_WITH_AS(cat({cpu, gpu}), doctest::Contains("cat: expected all tensors to be on the same device"), Error);
  CHECK_THROWS_WITH_AS(Device::cuda(-1), doctest::Contains("Device::cuda: device index must be in [0, 32767], got -1"),
                       Error);
  CHECK_THROWS_WITH_AS(ones({2}).to(Device::cuda(99)), doctest::Contains("to: "), Error);

  // A CPU 0-dim tensor (a number) may join a GPU op, as in PyTorch. Without a GPU the op
  // fails only because this machine or build cannot run it there, and says which.
  if (!cuda::is_built()) {
    CHECK_THROWS_WITH_AS(add(gpu, full({}, 2.0f)),
                         doctest::Contains("add: cannot allocate memory on cuda:0: this build of Kiln has no CUDA support"),
                         Error);
    CHECK_THROWS_WITH_AS(cpu.copy_(gpu),
                         "copy_: cannot copy from cuda:0 to cpu: this build of Kiln has no CUDA support", Error);
    CHECK_THROWS_WITH_AS(cpu.to(Device::cuda(0)),
                         "to: cannot move a tensor from cpu to cuda:0: this build of Kiln has no CUDA support", Error);
  } else if (!gpu_here) {
    CHECK_THROWS_WITH_AS(add(gpu, full({}, 2.0f)),
                         "add: cannot allocate memory on cuda:0: no CUDA GPU is visible on this machine", Error);
    CHECK_THROWS_WITH_AS(cpu.to(Device::cuda(0)),
                         "to: cannot allocate memory on cuda:0: no CUDA GPU is visible on this machine", Error);
    CHECK_THROWS_WITH_AS(cpu.copy_(gpu), doctest::Contains("no CUDA GPU is visible on this machine"), Error);
  } else {
    CHECK(equal(add(gpu, full({}, 2.0f)).cpu(), full({4}, 3.0f)));
    CHECK(equal(cpu.copy_(gpu * 5), full({4}, 5.0f)));
  }
  CHECK(storage[0] == 1.0f);  // nothing was written through a fake device pointer
}

TEST_CASE("from_vector size mismatch") {
  CHECK_THROWS_WITH_AS(from_vector<float>({1, 2, 3, 4, 5}, {2, 3}),
                       "from_vector: 5 values cannot fill a tensor of shape [2, 3] (6 elements)", Error);
  CHECK_THROWS_WITH_AS(from_vector(std::vector<int64_t>{}, {1}),
                       "from_vector: 0 values cannot fill a tensor of shape [1] (1 elements)", Error);
}

TEST_CASE("Linear input with the wrong last dimension") {
  manual_seed(0);
  nn::Linear layer(1024, 4096);
  const Tensor x = randn({64, 512});
  CHECK_THROWS_WITH_AS(layer(x),
                       "linear: input's last dimension (512) does not match in_features (1024): input shape [64, 512], "
                       "weight shape [4096, 1024]",
                       Error);
}

TEST_CASE("a failed call leaves the caller's tensors and modules as they were") {
  manual_seed(0);
  Tensor dst = randn({2, 3});
  const std::vector<float> before = dst.to_vector<float>();
  CHECK_THROWS_AS(dst.copy_(randn({4})), Error);
  CHECK_THROWS_AS(dst.copy_(from_blob(nullptr, {0}, Device::cuda(0))), Error);
  CHECK(dst.to_vector<float>() == before);

  nn::MLP mlp({.sizes = {4, 8, 2}});
  std::vector<std::vector<float>> params;
  for (const Tensor& p : mlp.parameters()) params.push_back(p.to_vector<float>());
  CHECK_THROWS_AS(mlp.to(Device::cuda(99)), Error);  // no such GPU anywhere: fails on the first tensor
  size_t i = 0;
  for (const Tensor& p : mlp.parameters()) {
    CHECK(p.device() == Device::cpu());
    CHECK(p.dtype() == kFloat32);
    CHECK(p.to_vector<float>() == params[i++]);
  }
}

TEST_CASE("pin_memory without a GPU says why") {
  CHECK_FALSE(ones({2}).is_pinned());
  if (!cuda::is_available()) {
    CHECK_THROWS_WITH_AS(ones({2}).pin_memory(), doctest::Contains("pin_memory: "), Error);
  }
}
