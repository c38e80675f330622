// Factories (ops/factory.h): shape-filled tensors in every dtype, arange's dtype inference and
// length rule, eye, from_vector (copies) and from_blob (wraps user memory, with its deleter),
// the *_like family, TensorOptions, and the errors for bad shapes and options.
#include <cmath>

#include "testing.h"

using namespace kiln;

namespace {
const std::vector<DType> kAllTypes = {kBool, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

// Checks that every element of t equals v.
void check_all(const Tensor& t, double v) {
  for (double x : t.to_vector<double>()) {
    if (x != v) {
      FAIL_CHECK("element " << x << " != " << v);
      return;
    }
  }
}
}  // namespace

TEST_CASE("empty, zeros, ones and full in every dtype") {
  for (DType dt : kAllTypes) {
    INFO("dtype " << dtype_name(dt));
    const Tensor e = empty({2, 3, 4}, dt);
    CHECK(e.sizes() == Shape{2, 3, 4});
    CHECK(e.strides() == Shape{12, 4, 1});
    CHECK(e.storage_offset() == 0);
    CHECK(e.dtype() == dt);
    CHECK(e.device() == Device::cpu());
    CHECK(e.is_contiguous());
    CHECK(e.nbytes() == 24 * element_size(dt));
    CHECK_FALSE(e.requires_grad());

    const Tensor z = zeros({3, 5}, dt);
    CHECK(z.dtype() == dt);
    CHECK(z.numel() == 15);
    check_all(z, 0.0);
    const Tensor o = ones({5, 3}, dt);
    check_all(o, 1.0);
    const Tensor f = full({4}, dt == kBool ? Scalar(true) : Scalar(3), dt);
    check_all(f, dt == kBool ? 1.0 : 3.0);
    CHECK(f.dtype() == dt);
  }
  // Default dtype is float32.
  CHECK(zeros({2}).dtype() == kFloat32);
  CHECK(ones({2}).dtype() == kFloat32);
  CHECK(empty({2}).dtype() == kFloat32);
  CHECK(full({2}, 1.5).dtype() == kFloat32);
  // Without a dtype, full() infers it from the value, as torch.full does.
  CHECK(full({2}, 3).dtype() == kInt64);
  CHECK(full({2}, true).dtype() == kBool);
  CHECK(full({2}, 3, Device::cpu()).dtype() == kInt64);
  CHECK(full({2}, 3, kFloat64).dtype() == kFloat64);
  // Fill values convert to the dtype as a copy would: truncation toward zero for integers,
  // rounding for 16-bit floats, non-zero -> true for bool.
  check_all(full({3}, 2.75, kInt32), 2.0);
  check_all(full({3}, -2.75, kInt64), -2.0);
  check_all(full({3}, 0.1, kFloat16), static_cast<double>(static_cast<float>(Half(0.1f))));
  check_all(full({3}, 0.1, kBFloat16), static_cast<double>(static_cast<float>(BFloat16(0.1f))));
  check_all(full({3}, 0.1, kFloat64), 0.1);
  check_all(full({3}, 0.1, kFloat32), static_cast<double>(0.1f));
  check_all(full({3}, 0.5, kBool), 1.0);
  check_all(full({3}, 0, kBool), 0.0);
  check_all(full({3}, int64_t{1} << 40, kInt64), std::ldexp(1.0, 40));
  // 0-dim.
  CHECK(full({}, -4.5).dim() == 0);
  CHECK(full({}, -4.5).item<double>() == -4.5);
}

TEST_CASE("zero-size shapes") {
  manual_seed(402);
  for (DType dt : kAllTypes) {
    INFO("dtype " << dtype_name(dt));
    const Tensor z = zeros({2, 0, 3}, dt);
    CHECK(z.numel() == 0);
    CHECK(z.nbytes() == 0);
    CHECK(z.strides() == Shape{3, 3, 1});
    CHECK(z.is_contiguous());
    CHECK(z.to_vector<double>().empty());
  }
  CHECK(ones({0}).numel() == 0);
  CHECK(full({0, 5}, 2.0).sizes() == Shape{0, 5});
  CHECK(empty({0}).sizes() == Shape{0});
  CHECK(eye(0).sizes() == Shape{0, 0});
  CHECK(eye(0, 3).sizes() == Shape{0, 3});
  CHECK(arange(0).numel() == 0);
  CHECK(arange(3, 3).numel() == 0);
  CHECK(rand({0, 4}).sizes() == Shape{0, 4});
  CHECK(randn({3, 0}).numel() == 0);
}

TEST_CASE("negative dimensions are errors naming the factory") {
  manual_seed(403);
  CHECK_THROWS_WITH_AS(zeros({2, -1}), "zeros: negative dimension -1 in shape [2, -1]", Error);
  CHECK_THROWS_WITH_AS(ones({-3}), "ones: negative dimension -3 in shape [-3]", Error);
  CHECK_THROWS_WITH_AS(empty({4, -2}), "empty: negative dimension -2 in shape [4, -2]", Error);
  CHECK_THROWS_WITH_AS(full({-1}, 2.0), "full: negative dimension -1 in shape [-1]", Error);
  CHECK_THROWS_WITH_AS(rand({-1, 2}), "rand: negative dimension -1 in shape [-1, 2]", Error);
  CHECK_THROWS_WITH_AS(randn({-5}), "randn: negative dimension -5 in shape [-5]", Error);
  CHECK_THROWS_WITH_AS(eye(-2), doctest::Contains("eye: n and m must be non-negative, got n=-2 m=-2"), Error);
  CHECK_THROWS_WITH_AS(eye(2, -3), doctest::Contains("eye: n and m must be non-negative, got n=2 m=-3"), Error);
  CHECK_THROWS_WITH_AS(from_vector(std::vector<float>{}, {-1}), doctest::Contains("from_vector: negative dimension -1"),
                       Error);
  CHECK_THROWS_WITH_AS(from_blob(nullptr, {-1}), doctest::Contains("from_blob: negative dimension -1"), Error);
}

TEST_CASE("arange infers int64 or float32 and counts ceil((end - start) / step) values") {
  const Tensor a = arange(5);
  CHECK(a.dtype() == kInt64);
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  const Tensor b = arange(2.5);
  CHECK(b.dtype() == kFloat32);
  CHECK(b.to_vector<double>() == std::vector<double>{0, 1, 2});
  const Tensor c = arange(1, 2.5, 0.5);
  CHECK(c.dtype() == kFloat32);
  CHECK(c.to_vector<double>() == std::vector<double>{1.0, 1.5, 2.0});
  const Tensor d = arange(10, 0, -3);
  CHECK(d.dtype() == kInt64);
  CHECK(d.to_vector<int64_t>() == std::vector<int64_t>{10, 7, 4, 1});
  const Tensor e = arange(-3, 3);
  CHECK(e.to_vector<int64_t>() == std::vector<int64_t>{-3, -2, -1, 0, 1, 2});
  const Tensor f = arange(2, 1.0, -0.25);  // a float end makes the result float32
  CHECK(f.dtype() == kFloat32);
  CHECK(f.to_vector<double>() == std::vector<double>{2.0, 1.75, 1.5, 1.25});
  CHECK(arange(0, 7, 7).to_vector<int64_t>() == std::vector<int64_t>{0});
  CHECK(arange(0, 8, 7).to_vector<int64_t>() == std::vector<int64_t>{0, 7});
  // Explicit dtype.
  const Tensor g = arange(0, 5, 2, kFloat64);
  CHECK(g.dtype() == kFloat64);
  CHECK(g.to_vector<double>() == std::vector<double>{0, 2, 4});
  const Tensor h = arange(1, 4, 1, kInt32);
  CHECK(h.dtype() == kInt32);
  CHECK(h.to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3});
  const Tensor k = arange(0, 1, 0.25, kFloat16);
  CHECK(k.to_vector<double>() == std::vector<double>{0, 0.25, 0.5, 0.75});
  // Values are start + i * step, not an accumulated sum: the last of 0.1-steps stays close.
  const Tensor l = arange(0.0, 3.0, 0.1, kFloat64);
  REQUIRE(l.numel() == 30);
  CHECK(l.to_vector<double>()[29] == 29 * 0.1);
}

TEST_CASE("arange errors") {
  CHECK_THROWS_WITH_AS(arange(0, 5, -1),
                       doctest::Contains("arange: upper bound and lower bound inconsistent with step sign (start=0, end=5, "
                                         "step=-1)"),
                       Error);
  CHECK_THROWS_WITH_AS(arange(5, 0), doctest::Contains("arange: upper bound and lower bound inconsistent with step sign"),
                       Error);
  CHECK_THROWS_WITH_AS(arange(-1), doctest::Contains("arange: upper bound and lower bound inconsistent"), Error);
  CHECK_THROWS_WITH_AS(arange(0, 5, 0), doctest::Contains("arange: step must be non-zero"), Error);
  CHECK_THROWS_WITH_AS(arange(0.0, 1.0, 0.0), doctest::Contains("arange: step must be non-zero"), Error);
  CHECK_THROWS_WITH_AS(arange(0.0, INFINITY), doctest::Contains("arange: start (0) and end (inf) must be finite"), Error);
  CHECK_THROWS_WITH_AS(arange(0, 3, 1, kBool), doctest::Contains("arange: unsupported dtype bool"), Error);
}

TEST_CASE("eye is the identity, square or rectangular") {
  for (DType dt : kAllTypes) {
    INFO("dtype " << dtype_name(dt));
    for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{3, -1}, {2, 4}, {4, 2}, {1, 1}}) {
      const Tensor e = m == -1 ? eye(n, dt) : eye(n, m, dt);  // -1 marks the square overload
      const int64_t cols = m == -1 ? n : m;
      REQUIRE(e.sizes() == Shape{n, cols});
      CHECK(e.dtype() == dt);
      const std::vector<double> v = e.to_vector<double>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < cols; ++j) CHECK(v[i * cols + j] == (i == j ? 1.0 : 0.0));
    }
  }
  CHECK(eye(3).dtype() == kFloat32);
  CHECK_THROWS_WITH_AS(eye(3, -1), doctest::Contains("eye: n and m must be non-negative, got n=3 m=-1"), Error);
}

TEST_CASE("from_vector copies values of every element type") {
  const Tensor f = from_vector({1.5f, -2.0f, 3.25f, 0.0f}, {2, 2});
  CHECK(f.dtype() == kFloat32);
  CHECK(f.sizes() == Shape{2, 2});
  CHECK(f.to_vector<float>() == std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f});
  const Tensor d = from_vector({0.1, -1e300}, {2});
  CHECK(d.dtype() == kFloat64);
  CHECK(d.to_vector<double>() == std::vector<double>{0.1, -1e300});
  const Tensor i32 = from_vector<int32_t>({-7, 2147483647}, {2});
  CHECK(i32.dtype() == kInt32);
  CHECK(i32.to_vector<int32_t>() == std::vector<int32_t>{-7, 2147483647});
  const Tensor i64 = from_vector(std::vector<int64_t>{int64_t{1} << 62, -3});
  CHECK(i64.dtype() == kInt64);
  CHECK(i64.sizes() == Shape{2});
  CHECK(i64.to_vector<int64_t>() == std::vector<int64_t>{int64_t{1} << 62, -3});
  const Tensor b = from_vector({true, false, true}, {3});
  CHECK(b.dtype() == kBool);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, false, true});
  const Tensor bv = from_vector(std::vector<bool>{false, true, true, false, true}, {5});
  CHECK(bv.to_vector<bool>() == std::vector<bool>{false, true, true, false, true});
  const Tensor h = from_vector(std::vector<Half>{Half(0.5f), Half(-3.0f)}, {2});
  CHECK(h.dtype() == kFloat16);
  CHECK(h.to_vector<double>() == std::vector<double>{0.5, -3.0});
  const Tensor bf = from_vector(std::vector<BFloat16>{BFloat16(0.1f)}, {1});
  CHECK(bf.dtype() == kBFloat16);
  CHECK(bf.to_vector<double>()[0] == static_cast<double>(static_cast<float>(BFloat16(0.1f))));
  // 0-dim from one value, and a 1-D overload.
  const Tensor s = from_vector({42.0f}, {});
  CHECK(s.dim() == 0);
  CHECK(s.item<float>() == 42.0f);
  CHECK(from_vector(std::vector<float>{1, 2, 3}).sizes() == Shape{3});
  CHECK(from_vector(std::vector<float>{}, {0, 2}).sizes() == Shape{0, 2});
  // With an options dtype the values convert.
  const Tensor c = from_vector(std::vector<double>{1.75, -2.75}, {2}, kInt32);
  CHECK(c.dtype() == kInt32);
  CHECK(c.to_vector<int32_t>() == std::vector<int32_t>{1, -2});
  // A copy: later changes to the vector do not reach the tensor.
  std::vector<float> src = {1, 2, 3};
  const Tensor t = from_vector(src, {3});
  src[1] = 100;
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3});
}

TEST_CASE("from_vector size mismatch") {
  CHECK_THROWS_WITH_AS(from_vector({1.f, 2.f, 3.f, 4.f, 5.f}, {2, 3}),
                       "from_vector: 5 values cannot fill a tensor of shape [2, 3] (6 elements)", Error);
  CHECK_THROWS_WITH_AS(from_vector({1.f, 2.f}, {}), "from_vector: 2 values cannot fill a tensor of shape [] (1 elements)",
                       Error);
  CHECK_THROWS_WITH_AS(from_vector(std::vector<int64_t>{1}, {0}), doctest::Contains("from_vector: 1 values cannot fill"),
                       Error);
}

TEST_CASE("from_blob wraps memory without copying") {
  float buf[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = from_blob(buf, {2, 3});
  CHECK(t.data_ptr() == static_cast<void*>(buf));
  CHECK(t.data_ptr<float>() == buf);
  CHECK_THROWS_WITH_AS(t.data_ptr<double>(), "data_ptr: asked for float64 elements but the tensor holds float32", Error);
  CHECK(t.select(0, 1).data_ptr<float>() == buf + 3);  // a view's data_ptr includes its offset
  CHECK(t.strides() == Shape{3, 1});
  CHECK(t.dtype() == kFloat32);
  buf[4] = 50;  // the tensor sees writes to the buffer
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 50, 6});
  t.select(0, 0).fill_(-1.0);  // and the buffer sees writes through the tensor
  CHECK(buf[0] == -1);
  CHECK(buf[2] == -1);
  CHECK(buf[3] == 4);

  // Explicit strides: a [3, 2] transposed view of the buffer.
  Tensor tt = from_blob(buf, {3, 2}, {1, 3});
  CHECK_FALSE(tt.is_contiguous());
  const std::vector<float> v = tt.to_vector<float>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j) CHECK(v[i * 2 + j] == buf[i + 3 * j]);

  // Other dtypes via options.
  int32_t ints[4] = {9, -8, 7, -6};
  Tensor it = from_blob(ints, {4}, kInt32);
  CHECK(it.to_vector<int32_t>() == std::vector<int32_t>{9, -8, 7, -6});
  CHECK(from_blob(ints, {2, 2}, TensorOptions(kInt32).requires_grad(false)).sizes() == Shape{2, 2});
  // requires_grad from the options.
  CHECK(from_blob(buf, {6}, TensorOptions().requires_grad(true)).requires_grad());
  // A null pointer is fine for an empty tensor.
  CHECK(from_blob(nullptr, {0, 3}).numel() == 0);

  CHECK_THROWS_WITH_AS(from_blob(nullptr, {2}), doctest::Contains("from_blob: data is null but shape [2] has elements"), Error);
  CHECK_THROWS_WITH_AS(from_blob(buf, {2, 3}, {3}), doctest::Contains("from_blob: 2 sizes but 1 strides"), Error);
  CHECK_THROWS_WITH_AS(from_blob(buf, {2}, {-1}), doctest::Contains("from_blob: negative stride -1"), Error);
  CHECK_THROWS_WITH_AS(from_blob(ints, {4}, TensorOptions(kInt32).requires_grad(true)),
                       doctest::Contains("from_blob: only floating point tensors can require gradients"), Error);
}

TEST_CASE("from_blob's deleter runs once, when the last view dies") {
  int calls = 0;
  void* seen = nullptr;
  auto* data = new double[4]{1, 2, 3, 4};
  {
    Tensor t = from_blob(data, {4}, kFloat64, [&](void* p) {
      ++calls;
      seen = p;
      delete[] static_cast<double*>(p);
    });
    Tensor v = t.view({2, 2});
    Tensor s = t.slice(0, 1, 3);
    Tensor copy_of_handle = t;
    t = Tensor();
    CHECK(calls == 0);
    copy_of_handle = Tensor();
    v = Tensor();
    CHECK(calls == 0);
    CHECK(s.to_vector<double>() == std::vector<double>{2, 3});  // still readable
    // A clone owns its own memory and does not keep the blob alive.
    Tensor c = s.clone();
    s = Tensor();
    CHECK(calls == 1);
    CHECK(seen == static_cast<void*>(data));
    CHECK(c.to_vector<double>() == std::vector<double>{2, 3});
  }
  CHECK(calls == 1);
  // An empty deleter is allowed.
  float local[2] = {1, 2};
  { Tensor t = from_blob(local, {2}, TensorOptions(), std::function<void(void*)>()); }
  CHECK(local[1] == 2);
}

TEST_CASE("the _like factories copy shape, dtype and device, not values or requires_grad") {
  manual_seed(401);
  const Tensor x = rand({3, 4}, kFloat64).requires_grad_();
  const std::vector<Tensor> likes = {empty_like(x), zeros_like(x), ones_like(x), full_like(x, 2.5), rand_like(x),
                                     randn_like(x)};
  for (const Tensor& l : likes) {
    CHECK(l.sizes() == x.sizes());
    CHECK(l.dtype() == kFloat64);
    CHECK(l.device() == x.device());
    CHECK(l.is_contiguous());
    CHECK_FALSE(l.requires_grad());
    CHECK_FALSE(l.is_alias_of(x));
  }
  check_all(likes[1], 0.0);
  check_all(likes[2], 1.0);
  check_all(likes[3], 2.5);
  for (double v : likes[4].to_vector<double>()) CHECK((v >= 0.0 && v < 1.0));
  CHECK(likes[4].to_vector<double>() != x.to_vector<double>());
  // Of an integer tensor, and of a strided one (the shape is the logical shape).
  const Tensor i = zeros({2, 5}, kInt32);
  CHECK(full_like(i, 7).dtype() == kInt32);
  check_all(full_like(i, 7), 7.0);
  CHECK(ones_like(i.t()).sizes() == Shape{5, 2});
  CHECK(zeros_like(zeros({})).dim() == 0);
  CHECK_THROWS_WITH_AS(zeros_like(Tensor()), doctest::Contains("zeros_like: argument 'input' is an undefined tensor"), Error);
  CHECK_THROWS_WITH_AS(rand_like(i), doctest::Contains("rand: random values need a floating dtype, got int32"), Error);
}

TEST_CASE("TensorOptions: dtype, device and requires_grad") {
  manual_seed(404);
  const TensorOptions def;
  CHECK(def.dtype() == kFloat32);
  CHECK(def.device() == Device::cpu());
  CHECK_FALSE(def.requires_grad());
  const TensorOptions o = TensorOptions(kFloat64).requires_grad(true);
  CHECK(o.dtype() == kFloat64);
  CHECK(o.requires_grad());
  // The builders return copies and leave the original alone.
  const TensorOptions o2 = o.dtype(kInt32);
  CHECK(o.dtype() == kFloat64);
  CHECK(o2.dtype() == kInt32);
  CHECK(o2.requires_grad());
  CHECK(TensorOptions(Device::cpu()).dtype() == kFloat32);
  CHECK(TensorOptions(DeviceType::CUDA).device() == Device::cuda(0));
  CHECK(TensorOptions(DeviceType::CPU).device() == Device::cpu());
  CHECK(TensorOptions().device(Device::cuda(1)).device().index() == 1);

  // Factories honour every field.
  for (const Tensor& t : {zeros({2}, o), ones({2}, o), full({2}, 1.0, o), empty({2}, o), rand({2}, o), randn({2}, o),
                          eye(2, 2, o), arange(0, 2, 1, o), from_vector(std::vector<double>{1.0, 2.0}, {2}, o)}) {
    CHECK(t.dtype() == kFloat64);
    CHECK(t.requires_grad());
  }
  CHECK(zeros({2}, Device::cpu()).device() == Device::cpu());
  CHECK(zeros({2}, kBFloat16).dtype() == kBFloat16);

  // requires_grad with a non-floating dtype is refused by the factory that was called.
  const TensorOptions bad = TensorOptions(kInt64).requires_grad(true);
  CHECK_THROWS_WITH_AS(zeros({2}, bad), "zeros: only floating point tensors can require gradients, got dtype int64", Error);
  CHECK_THROWS_WITH_AS(empty({2}, bad), doctest::Contains("empty: only floating point tensors"), Error);
  CHECK_THROWS_WITH_AS(full({2}, 1, bad), doctest::Contains("full: only floating point tensors"), Error);
  CHECK_THROWS_WITH_AS(eye(2, 2, bad), doctest::Contains("eye: only floating point tensors"), Error);
  CHECK_THROWS_WITH_AS(arange(0, 2, 1, bad), doctest::Contains("arange: only floating point tensors"), Error);
  CHECK_THROWS_WITH_AS(from_vector(std::vector<int64_t>{1, 2}, {2}, bad), doctest::Contains("from_vector: only floating point tensors"), Error);
  CHECK_THROWS_WITH_AS(ones({2}, TensorOptions(kBool).requires_grad(true)),
                       doctest::Contains("ones: only floating point tensors can require gradients, got dtype bool"), Error);

  // Memory on a GPU is refused in a build without the CUDA backend.
  if (!cuda::is_built()) {
    CHECK_THROWS_WITH_AS(zeros({2}, Device::cuda(0)), doctest::Contains("zeros: cannot allocate memory on cuda:0"), Error);
    CHECK_THROWS_WITH_AS(empty({2}, Device::cuda(0)), doctest::Contains("empty: cannot allocate memory on cuda:0"), Error);
    CHECK_THROWS_WITH_AS(randn({2}, Device::cuda(0)), doctest::Contains("randn: cannot allocate memory on cuda:0"), Error);
  }
}

TEST_CASE("requires_grad_ accepts floating tensors only") {
  Tensor f = zeros({2});
  CHECK_FALSE(f.requires_grad());
  CHECK(&f.requires_grad_() == &f);
  CHECK(f.requires_grad());
  f.requires_grad_(false);
  CHECK_FALSE(f.requires_grad());
  for (DType dt : {kFloat16, kBFloat16, kFloat64}) CHECK(zeros({1}, dt).requires_grad_().requires_grad());
  Tensor i = zeros({2}, kInt64);
  CHECK_THROWS_WITH_AS(i.requires_grad_(),
                       "requires_grad_: only floating point tensors can require gradients, got dtype int64", Error);
  CHECK_THROWS_WITH_AS(zeros({2}, kBool).requires_grad_(true), doctest::Contains("requires_grad_: only floating point"),
                       Error);
  CHECK_NOTHROW(i.requires_grad_(false));
  CHECK_FALSE(i.requires_grad());
}
