// Random numbers: Philox4x32-10 against the Random123 known-answer vectors, the documented
// mapping from (seed, element index) to values, reproducibility under manual_seed, statistical
// sanity of rand/randn at n = 200000 (bounds at 5-6 standard errors, fixed seeds), and the
// in-place uniform_/normal_ on strided views.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ops/kernels.h"
#include "tensor/generator.h"
#include "tensor/philox.h"
#include "testing.h"

using namespace kiln;

namespace {
const std::vector<DType> kFloats = {kFloat32, kFloat64, kFloat16, kBFloat16};

struct Moments {
  double mean, std, skew, kurt_excess;
};
Moments moments(const std::vector<double>& v) {
  const double n = static_cast<double>(v.size());
  double m = 0;
  for (double x : v) m += x;
  m /= n;
  double m2 = 0, m3 = 0, m4 = 0;
  for (double x : v) {
    const double d = x - m;
    m2 += d * d;
    m3 += d * d * d;
    m4 += d * d * d * d;
  }
  m2 /= n;
  m3 /= n;
  m4 /= n;
  return {m, std::sqrt(m2), m3 / std::pow(m2, 1.5), m4 / (m2 * m2) - 3.0};
}

double lag1_correlation(const std::vector<double>& v) {
  const Moments mo = moments(v);
  double c = 0;
  for (size_t i = 0; i + 1 < v.size(); ++i) c += (v[i] - mo.mean) * (v[i + 1] - mo.mean);
  return c / static_cast<double>(v.size() - 1) / (mo.std * mo.std);
}
}  // namespace

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors") {
  // Random123 kat_vectors, "philox4x32 10" lines: counter x4, key x2 -> output x4.
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}, {0x00000000u, 0x00000000u},
       {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    const philox::Block out =
        philox::philox4x32_10(philox::Block{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}}, k.key[0], k.key[1]);
    for (int lane = 0; lane < 4; ++lane) {
      INFO("counter " << std::hex << k.ctr[0] << " lane " << lane);
      CHECK(out.x[lane] == k.out[lane]);
    }
  }
}

TEST_CASE("philox::block puts the counter in the low words and the seed in the key") {
  for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0x0123456789abcdefull}}) {
    for (uint64_t ctr : {uint64_t{0}, uint64_t{7}, uint64_t{0xfedcba9876543210ull}}) {
      const philox::Block a = philox::block(seed, ctr);
      const philox::Block b = philox::philox4x32_10(
          philox::Block{{static_cast<uint32_t>(ctr & 0xffffffffu), static_cast<uint32_t>(ctr >> 32), 0u, 0u}},
          static_cast<uint32_t>(seed & 0xffffffffu), static_cast<uint32_t>(seed >> 32));
      for (int lane = 0; lane < 4; ++lane) CHECK(a.x[lane] == b.x[lane]);
    }
  }
  // Neighbouring counters and seeds give unrelated blocks.
  CHECK(philox::block(1, 0).x[0] != philox::block(1, 1).x[0]);
  CHECK(philox::block(1, 0).x[0] != philox::block(2, 0).x[0]);
}

TEST_CASE("uniform conversions of raw bits stay in [0, 1)") {
  CHECK(philox::uniform_float(0u) == 0.0f);
  CHECK(philox::uniform_float(0xffffffffu) == 1.0f - std::ldexp(1.0f, -24));
  CHECK(philox::uniform_float(0x80000000u) == 0.5f);
  CHECK(philox::uniform_float(0x000000ffu) == 0.0f);  // the low 8 bits are dropped
  CHECK(philox::uniform_double(0u, 0u) == 0.0);
  CHECK(philox::uniform_double(0xffffffffu, 0xffffffffu) == 1.0 - std::ldexp(1.0, -53));
  CHECK(philox::uniform_double(0x80000000u, 0u) == 0.5);
  CHECK(philox::per_block(2) == 4);
  CHECK(philox::per_block(4) == 4);
  CHECK(philox::per_block(8) == 2);
}

TEST_CASE("rand and randn follow the documented (seed, index) -> value mapping") {
  const uint64_t seed = 1234;
  manual_seed(seed);
  const std::vector<double> u32 = rand({11}).to_vector<double>();
  for (int64_t i = 0; i < 11; ++i) {
    const philox::Block b = philox::block(seed, static_cast<uint64_t>(i / 4));
    CHECK(u32[i] == static_cast<double>(philox::uniform_float(b.x[i % 4])));
  }
  // The next op continues after the 3 blocks the first one reserved.
  const std::vector<double> u64 = rand({5}, kFloat64).to_vector<double>();
  for (int64_t i = 0; i < 5; ++i) {
    const philox::Block b = philox::block(seed, 3 + static_cast<uint64_t>(i / 2));
    const int lane = static_cast<int>(i % 2);
    CHECK(u64[i] == philox::uniform_double(b.x[2 * lane], b.x[2 * lane + 1]));
  }
  // randn: Box-Muller over lane pairs (0, 1) and (2, 3), computed here from the definition.
  manual_seed(seed);
  const std::vector<double> n32 = randn({8}).to_vector<double>();
  for (int64_t i = 0; i < 8; ++i) {
    const philox::Block b = philox::block(seed, static_cast<uint64_t>(i / 4));
    const int pair = static_cast<int>(i % 4) / 2;
    const double u1 = 1.0 - static_cast<double>(philox::uniform_float(b.x[2 * pair]));
    const double u2 = static_cast<double>(philox::uniform_float(b.x[2 * pair + 1]));
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    const double want = i % 2 == 0 ? r * std::cos(angle) : r * std::sin(angle);
    CHECK(n32[i] == doctest::Approx(want).epsilon(1e-6));
  }
}

TEST_CASE("manual_seed makes every random factory reproducible") {
  for (DType dt : kFloats) {
    INFO("dtype " << dtype_name(dt));
    manual_seed(77);
    const std::vector<double> a = rand({5, 7}, dt).to_vector<double>();
    const std::vector<double> na = randn({13}, dt).to_vector<double>();
    manual_seed(77);
    const std::vector<double> b = rand({5, 7}, dt).to_vector<double>();
    const std::vector<double> nb = randn({13}, dt).to_vector<double>();
    CHECK(a == b);
    CHECK(na == nb);
    manual_seed(78);
    CHECK(rand({5, 7}, dt).to_vector<double>() != a);
    CHECK(randn({13}, dt).to_vector<double>() != na);
  }
  CHECK(default_generator().seed() == 78);
  // A seed with high bits set differs from its low half.
  manual_seed(5);
  const std::vector<double> low = rand({8}).to_vector<double>();
  manual_seed((uint64_t{1} << 40) | 5);
  CHECK(rand({8}).to_vector<double>() != low);
}

TEST_CASE("a second call continues the stream") {
  manual_seed(9);
  const std::vector<double> first = rand({8}).to_vector<double>();
  CHECK(default_generator().offset() == 2);
  const std::vector<double> second = rand({8}).to_vector<double>();
  CHECK(default_generator().offset() == 4);
  CHECK(first != second);
  // The two draws are exactly one longer draw cut in two (8 values fill whole blocks).
  manual_seed(9);
  const std::vector<double> both = rand({16}).to_vector<double>();
  CHECK(std::vector<double>(both.begin(), both.begin() + 8) == first);
  CHECK(std::vector<double>(both.begin() + 8, both.end()) == second);
  // A partial block is not reused: 5 values reserve 2 blocks, so the next op starts at block 2.
  manual_seed(9);
  (void)rand({5});
  CHECK(default_generator().offset() == 2);
  CHECK(rand({8}).to_vector<double>() == second);
  // float64 takes 2 values per block; empty tensors take none.
  manual_seed(9);
  (void)rand({5}, kFloat64);
  CHECK(default_generator().offset() == 3);
  (void)randn({0});
  CHECK(default_generator().offset() == 3);
  (void)randn({3}, kFloat16);
  CHECK(default_generator().offset() == 4);
}

TEST_CASE("element i does not depend on the tensor's size (counter-based prefix)") {
  for (DType dt : kFloats) {
    INFO("dtype " << dtype_name(dt));
    manual_seed(2024);
    const std::vector<double> longer = randn({1000}, dt).to_vector<double>();
    manual_seed(2024);
    const std::vector<double> shorter = randn({37}, dt).to_vector<double>();
    CHECK(std::vector<double>(longer.begin(), longer.begin() + 37) == shorter);
    manual_seed(2024);
    const std::vector<double> shaped = rand({3, 5}, dt).to_vector<double>();
    manual_seed(2024);
    const std::vector<double> flat = rand({15}, dt).to_vector<double>();
    CHECK(shaped == flat);
  }
}

TEST_CASE("rand is uniform on [0, 1) in every floating dtype") {
  for (DType dt : kFloats) {
    INFO("dtype " << dtype_name(dt));
    manual_seed(31);
    const Tensor r = rand({200000}, dt);
    CHECK(r.dtype() == dt);
    const std::vector<double> v = r.to_vector<double>();
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    CHECK(*lo >= 0.0);
    CHECK(*hi < 1.0);
    CHECK(*lo < 0.001);
    CHECK(*hi > 0.99);
    // 16-bit values lie on the grid of their significand (2^-11, 2^-8), as in PyTorch's CPU
    // generator, which is what keeps them below 1.
    if (dt == kFloat16 || dt == kBFloat16) {
      const double scale = std::ldexp(1.0, dt == kFloat16 ? 11 : 8);
      for (double x : v) REQUIRE(x * scale == std::floor(x * scale));
    }
    // Mean 1/2 and std sqrt(1/12) = 0.2887; standard errors 0.00065 and 0.00045. The 16-bit
    // grids shift the moments by at most half a step (2^-9 for bfloat16).
    const Moments m = moments(v);
    const double grid = dt == kBFloat16 ? std::ldexp(1.0, -8) : dt == kFloat16 ? std::ldexp(1.0, -11) : 0.0;
    CHECK(std::abs(m.mean - 0.5) < 0.004 + grid / 2);
    CHECK(std::abs(m.std - std::sqrt(1.0 / 12.0)) < 0.003 + grid / 2);
    // Ten equal buckets, each expected to hold 20000 +- 134 (one standard deviation).
    std::vector<int64_t> buckets(10, 0);
    for (double x : v) ++buckets[std::min<int64_t>(9, static_cast<int64_t>(x * 10.0))];
    for (int64_t b = 0; b < 10; ++b) {
      INFO("bucket " << b);
      CHECK(std::abs(buckets[b] - 20000) < 800);
    }
    CHECK(std::abs(lag1_correlation(v)) < 0.015);
  }
}

TEST_CASE("randn is standard normal in every floating dtype") {
  for (DType dt : kFloats) {
    INFO("dtype " << dtype_name(dt));
    manual_seed(32);
    const std::vector<double> v = randn({200000}, dt).to_vector<double>();
    const Moments m = moments(v);
    // Standard errors at n = 200000: mean 0.0022, std 0.0016, skew 0.0055, kurtosis 0.011.
    CHECK(std::abs(m.mean) < 0.012);
    CHECK(std::abs(m.std - 1.0) < 0.008);
    CHECK(std::abs(m.skew) < 0.03);
    CHECK(std::abs(m.kurt_excess) < 0.07);
    int64_t within1 = 0, within2 = 0;
    for (double x : v) {
      within1 += std::abs(x) < 1.0;
      within2 += std::abs(x) < 2.0;
    }
    // P(|z| < 1) = 0.682689, P(|z| < 2) = 0.954500; standard errors 0.0010 and 0.00047.
    CHECK(std::abs(static_cast<double>(within1) / 200000.0 - 0.682689) < 0.006);
    CHECK(std::abs(static_cast<double>(within2) / 200000.0 - 0.954500) < 0.003);
    CHECK(std::abs(lag1_correlation(v)) < 0.015);
    for (double x : v) REQUIRE(std::isfinite(x));
  }
}

TEST_CASE("random values need a floating dtype") {
  manual_seed(61);
  CHECK_THROWS_WITH_AS(rand({2}, kInt64), "rand: random values need a floating dtype, got int64", Error);
  CHECK_THROWS_WITH_AS(randn({2}, kInt32), "randn: random values need a floating dtype, got int32", Error);
  CHECK_THROWS_WITH_AS(rand({2}, kBool), doctest::Contains("rand: random values need a floating dtype, got bool"), Error);
  Tensor i = zeros({3}, kInt64);
  CHECK_THROWS_WITH_AS(i.uniform_(), "uniform_: random values need a floating dtype, got int64", Error);
  CHECK_THROWS_WITH_AS(i.normal_(), "normal_: random values need a floating dtype, got int64", Error);
  for (int64_t x : i.to_vector<int64_t>()) CHECK(x == 0);
}

TEST_CASE("uniform_ and normal_ with parameters") {
  manual_seed(41);
  Tensor u = empty({200000}, kFloat64);
  u.uniform_(-3.0, -1.0);
  const std::vector<double> uv = u.to_vector<double>();
  for (double x : uv) REQUIRE((x >= -3.0 && x < -1.0));
  const Moments mu = moments(uv);
  CHECK(std::abs(mu.mean + 2.0) < 0.008);
  CHECK(std::abs(mu.std - 2.0 / std::sqrt(12.0)) < 0.006);

  Tensor n = empty({200000});
  n.normal_(5.0, 2.0);
  const Moments mn = moments(n.to_vector<double>());
  CHECK(std::abs(mn.mean - 5.0) < 0.024);
  CHECK(std::abs(mn.std - 2.0) < 0.016);

  Tensor c = empty({10});
  c.normal_(3.0, 0.0);
  for (double x : c.to_vector<double>()) CHECK(x == 3.0);
  Tensor d = empty({10}, kBFloat16);
  d.uniform_(0.5, 0.5);
  for (double x : d.to_vector<double>()) CHECK(x == 0.5);
  // Narrow 16-bit ranges never reach the excluded upper bound.
  Tensor h = empty({100000}, kBFloat16);
  h.uniform_(1.0, 2.0);
  for (double x : h.to_vector<double>()) REQUIRE((x >= 1.0 && x < 2.0));

  CHECK_THROWS_WITH_AS(u.uniform_(2.0, 1.0), "uniform_: expects from <= to, but got from=2 to=1", Error);
  CHECK_THROWS_WITH_AS(n.normal_(0.0, -1.0), "normal_: expects std >= 0.0, but got std=-1", Error);
}

TEST_CASE("uniform_ and normal_ on a strided view touch only the view's elements") {
  for (DType dt : kFloats) {
    INFO("dtype " << dtype_name(dt));
    manual_seed(51);
    Tensor base = full({6, 8}, 7.25, dt);
    Tensor cols = base.slice(1, 1, 8, 2);  // columns 1, 3, 5, 7
    cols.uniform_();
    std::vector<double> b = base.to_vector<double>();
    for (int64_t i = 0; i < 6; ++i) {
      for (int64_t j = 0; j < 8; ++j) {
        const double x = b[i * 8 + j];
        if (j % 2 == 1) CHECK((x >= 0.0 && x < 1.0));
        else CHECK(x == 7.25);
      }
    }
    // The view receives the numbers a contiguous draw of its shape would get.
    manual_seed(51);
    const std::vector<double> dense = rand({6, 4}, dt).to_vector<double>();
    CHECK(cols.to_vector<double>() == dense);

    Tensor base2 = full({5, 4}, 7.25, dt);
    Tensor block = base2.narrow(0, 1, 3).t();  // rows 1..3, transposed
    block.normal_();
    b = base2.to_vector<double>();
    int64_t changed = 0;
    for (int64_t i = 0; i < 5; ++i) {
      for (int64_t j = 0; j < 4; ++j) {
        const double x = b[i * 4 + j];
        if (i == 0 || i == 4) CHECK(x == 7.25);
        else changed += x != 7.25;
      }
    }
    CHECK(changed == 12);
  }
}

TEST_CASE("Generator during a CUDA graph capture: relative offsets, tagged for kernels, counted, one capture at a time") {
  Generator gen(42);
  (void)gen.reserve(10);
  const uint64_t device_state[2] = {0, 0};  // stands for the graph's device memory (never read here)
  CHECK_THROWS_WITH_AS(gen.begin_graph_capture(nullptr),
                       doctest::Contains("Generator::begin_graph_capture: the device state pointer is null"), Error);
  gen.begin_graph_capture(device_state);
  CHECK_THROWS_WITH_AS(gen.begin_graph_capture(device_state),
                       doctest::Contains("a CUDA graph capture is already drawing from this generator"), Error);
  const PhiloxState a = gen.reserve(3), b = gen.reserve(5);
  CHECK(a.first_block == 0);  // relative to the capture's start
  CHECK(b.first_block == 3);
  CHECK(a.graph_state == nullptr);
  CHECK(gen.for_kernel(b).graph_state == device_state);
  CHECK(gen.for_kernel(b).first_block == 3);
  CHECK(gen.offset() == 10);  // capturing draws nothing from the stream
  CHECK(gen.end_graph_capture() == 8);
  CHECK(gen.for_kernel(b).graph_state == nullptr);
  const PhiloxState c = gen.reserve(2);
  CHECK(c.first_block == 10);
  CHECK(c.seed == 42);
  // A CPU kernel refuses a state meant for a graph.
  gen.begin_graph_capture(device_state);
  Tensor t = empty({4});
  const PhiloxState tagged = gen.for_kernel(gen.reserve(1));
  CHECK_THROWS_WITH_AS(dispatch::random_kernels.get("rand", Device::cpu())(RandomDist::Uniform, t, 0.0, 1.0, tagged),
                       doctest::Contains("random: a CPU tensor cannot be filled inside a CUDA graph capture"), Error);
  (void)gen.end_graph_capture();
}
