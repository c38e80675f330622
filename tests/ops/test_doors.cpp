// Every public copy goes through the op scope (the one door observers see): to, copy_,
// clone, contiguous, item, to_vector, equal and allclose each open an op, nested as PyTorch's
// are (to > _to_copy > copy_, item > _local_scalar_dense, contiguous > clone > copy_), with
// balanced begins and ends and their outputs; and the values those paths return are right
// (checked against values read independently from the inputs' memory).
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "testing.h"

using namespace kiln;

namespace {

// Records each op's (name, depth) at its begin, and at its end the name and output count.
struct OpLog : OpObserver {
  std::vector<std::pair<std::string, int>> begins;
  std::vector<std::pair<std::string, size_t>> ends;
  void on_op_begin(const OpCall& c) override { begins.emplace_back(c.name, c.depth); }
  void on_op_end(const OpCall& c) override { ends.emplace_back(c.name, c.outputs.size()); }
};

using Calls = std::vector<std::pair<std::string, int>>;

// The ops `f` opens, in begin order with their depths; checks that every begin has its end.
template <typename F>
Calls ops_of(F&& f) {
  OpLog log;
  add_op_observer(&log);
  try {
    f();
  } catch (...) {
    remove_op_observer(&log);
    throw;
  }
  remove_op_observer(&log);
  CHECK(log.begins.size() == log.ends.size());
  return log.begins;
}

// The float values of a contiguous float32 CPU tensor, read straight from its memory.
std::vector<float> raw_floats(const Tensor& t) {
  REQUIRE(t.is_contiguous());
  REQUIRE(t.dtype() == kFloat32);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data_ptr(), v.size() * sizeof(float));
  return v;
}

}  // namespace

TEST_CASE("doors: to(dtype) is to > _to_copy > copy_, and to() that changes nothing opens no op") {
  const Tensor x = testing::random({3, 5});
  Tensor y;
  CHECK(ops_of([&] { y = x.to(kFloat64); }) == Calls{{"to", 0}, {"_to_copy", 1}, {"copy_", 2}});
  const std::vector<float> xs = raw_floats(x);
  const std::vector<double> ys = y.to_vector<double>();
  REQUIRE(ys.size() == xs.size());
  for (size_t i = 0; i < xs.size(); ++i) CHECK(ys[i] == static_cast<double>(xs[i]));
  // Ops convert their operands with to(dtype): a no-op there must not add a row under them.
  CHECK(ops_of([&] { (void)x.to(kFloat32); }).empty());
  CHECK(ops_of([&] { (void)x.to(Device::cpu()); }).empty());
  CHECK(ops_of([&] { (void)x.to(Device::cpu(), true); }).empty());
  // to(cpu, dtype) converts as to(dtype) does.
  CHECK(ops_of([&] { (void)x.to(Device::cpu(), kInt64, true); }) == Calls{{"to", 0}, {"_to_copy", 1}, {"copy_", 2}});
  if (!cuda::is_built()) {
    // No op opens for a move this build cannot make: the error comes first.
    const Calls calls = ops_of([&] {
      CHECK_THROWS_WITH_AS(x.to(Device::cuda(0)), doctest::Contains("to: cannot move a tensor from cpu to cuda:0"),
                           Error);
    });
    CHECK(calls.empty());
  }
}

TEST_CASE("doors: copy_, clone and contiguous, with the copies they make inside") {
  const Tensor src = testing::random({4, 6});
  Tensor dst = empty({4, 6});
  CHECK(ops_of([&] { dst.copy_(src); }) == Calls{{"copy_", 0}});
  CHECK(raw_floats(dst) == raw_floats(src));
  Tensor broadcast_dst = empty({3, 4, 6});
  CHECK(ops_of([&] { broadcast_dst.copy_(src, true); }) == Calls{{"copy_", 0}});  // same device: non_blocking changes nothing
  for (int64_t i = 0; i < 3; ++i) CHECK(raw_floats(broadcast_dst[i].contiguous()) == raw_floats(src));
  // An overlapping source is cloned first.
  Tensor overlap = src.clone();
  const std::vector<float> before = raw_floats(overlap);
  CHECK(ops_of([&] { overlap.narrow(1, 1, 5).copy_(overlap.narrow(1, 0, 5)); }) ==
        Calls{{"narrow", 0}, {"narrow", 0}, {"copy_", 0}, {"clone", 1}, {"copy_", 2}});
  const std::vector<float> after = raw_floats(overlap);
  for (int64_t r = 0; r < 4; ++r) {
    CHECK(after[static_cast<size_t>(r * 6)] == before[static_cast<size_t>(r * 6)]);
    for (int64_t c = 1; c < 6; ++c) CHECK(after[static_cast<size_t>(r * 6 + c)] == before[static_cast<size_t>(r * 6 + c - 1)]);
  }

  Tensor c;
  CHECK(ops_of([&] { c = src.clone(); }) == Calls{{"clone", 0}, {"copy_", 1}});
  CHECK(c.data_ptr() != src.data_ptr());
  CHECK(raw_floats(c) == raw_floats(src));

  const Tensor t = src.t();
  CHECK(ops_of([&] { c = t.contiguous(); }) == Calls{{"contiguous", 0}, {"clone", 1}, {"copy_", 2}});
  const std::vector<float> s = raw_floats(src), ct = raw_floats(c);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 4; ++j) CHECK(ct[static_cast<size_t>(i * 4 + j)] == s[static_cast<size_t>(j * 6 + i)]);
  CHECK(ops_of([&] { (void)src.contiguous(); }).empty());  // already contiguous: itself, as PyTorch
}

TEST_CASE("doors: item is item > _local_scalar_dense, exact in every dtype") {
  const Tensor x = testing::random({3, 4}, kFloat64);
  const Tensor element = x[2][1];
  double value = 0;
  CHECK(ops_of([&] { value = element.item<double>(); }) == Calls{{"item", 0}, {"_local_scalar_dense", 1}});
  double expected = 0;
  std::memcpy(&expected, static_cast<const char*>(x.data_ptr()) + (2 * 4 + 1) * sizeof(double), sizeof(double));
  CHECK(value == expected);
  // Values that a round trip through double would change, and the narrow types.
  const int64_t big = (int64_t{1} << 62) + 12345;
  CHECK(full({1}, Scalar(big), kInt64).item<int64_t>() == big);
  CHECK(full({}, Scalar(-7), kInt32).item<int64_t>() == -7);
  CHECK(full({1, 1}, Scalar(true), kBool).item<bool>());
  CHECK(full({1}, 1.5, kFloat16).item<double>() == 1.5);
  CHECK(full({1}, -2.75, kBFloat16).item<double>() == -2.75);
  const Calls failed = ops_of([&] {
    CHECK_THROWS_WITH_AS(x.item(), doctest::Contains("item: a tensor with 12 elements (shape [3, 4])"), Error);
  });
  CHECK(failed.empty());  // validated before the door
}

TEST_CASE("doors: to_vector is an op whose copy_ converts, walks strides and fills the vector in one go") {
  const Tensor x = testing::random({5, 3});
  const Tensor t = x.t();  // strided
  std::vector<double> v;
  CHECK(ops_of([&] { v = t.to_vector<double>(); }) == Calls{{"to_vector", 0}, {"copy_", 1}});
  const std::vector<float> xs = raw_floats(x);
  REQUIRE(v.size() == 15);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) CHECK(v[static_cast<size_t>(i * 5 + j)] == static_cast<double>(xs[static_cast<size_t>(j * 3 + i)]));
  // bool (std::vector<bool> packs bits) and 16-bit floats.
  const Tensor mask = x > 0.0;
  const std::vector<bool> bits = mask.to_vector<bool>();
  REQUIRE(bits.size() == 15);
  for (size_t i = 0; i < 15; ++i) CHECK(bits[i] == (xs[i] > 0.0f));
  const std::vector<Half> halves = x.to(kFloat16).to_vector<Half>();
  for (size_t i = 0; i < 15; ++i) CHECK(static_cast<float>(halves[i]) == static_cast<float>(Half(xs[i])));
  const Tensor none = empty({0, 4});
  CHECK(ops_of([&] { CHECK(none.to_vector<float>().empty()); }) == Calls{{"to_vector", 0}});
  // An expanded tensor reads each shared element once per position.
  const std::vector<float> row = full({1, 3}, 2.5).expand({2, 3}).to_vector<float>();
  CHECK(row == std::vector<float>(6, 2.5f));
}

TEST_CASE("doors: equal and allclose are ops, their reads nested under them") {
  const Tensor a = testing::random({4, 4});
  const Tensor b = a.clone();
  bool same = false;
  CHECK(ops_of([&] { same = equal(a, b); }) ==
        Calls{{"equal", 0}, {"to_vector", 1}, {"copy_", 2}, {"to_vector", 1}, {"copy_", 2}});
  CHECK(same);
  const Tensor c = a + 1e-3;
  CHECK_FALSE(equal(a, c));
  const Tensor other_shape = empty({2});
  CHECK(ops_of([&] { CHECK_FALSE(equal(a, other_shape)); }) == Calls{{"equal", 0}});  // nothing to read
  const Calls close = ops_of([&] { CHECK(allclose(a, c, 0.0, 2e-3)); });
  REQUIRE(!close.empty());
  CHECK(close.front() == std::pair<std::string, int>{"allclose", 0});
  CHECK_FALSE(allclose(a, c, 0.0, 5e-4));
}

TEST_CASE("doors: record_stream and pin_memory refuse what they cannot do, before opening an op") {
  const Tensor x = ones({4});
  const Stream stream(Device::cuda(0), 0);
  Calls calls = ops_of([&] {
    CHECK_THROWS_WITH_AS(Tensor().record_stream(stream), doctest::Contains("record_stream: the tensor is undefined"),
                         Error);
    CHECK_THROWS_WITH_AS(x.record_stream(Stream(Device::cpu(), 0)),
                         doctest::Contains("record_stream: expected a CUDA stream, got one on cpu"), Error);
    CHECK_THROWS_WITH_AS(x.record_stream(stream),
                         doctest::Contains("record_stream: a CPU tensor can record a CUDA stream only when its memory "
                                           "comes from pin_memory() (Kiln's pinned host cache); this tensor's memory "
                                           "is pageable"),
                         Error);
    float buffer[4] = {1, 2, 3, 4};
    CHECK_THROWS_WITH_AS(from_blob(buffer, {4}).record_stream(stream),
                         doctest::Contains("this tensor's memory is the caller's (from_blob)"), Error);
  });
  CHECK(calls.empty());
  CHECK_FALSE(x.is_pinned());
  CHECK_FALSE(Tensor().is_pinned());
  if (!cuda::is_built()) {
    CHECK_THROWS_WITH_AS(x.pin_memory(), doctest::Contains("pin_memory: this build of Kiln has no CUDA support"),
                         Error);
    CHECK_THROWS_WITH_AS(x.to(Device::cuda(0), true), doctest::Contains("to: cannot move a tensor from cpu to cuda:0"),
                         Error);
  }
}
