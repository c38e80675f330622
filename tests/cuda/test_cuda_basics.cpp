// The GPU basics beside the differential tables: seeded random numbers equal to the CPU's,
// moving tensors between host and GPU in every dtype and layout, pin_memory, the 16-bit GELU
// on every input value, bad input on the GPU path, and work on a non-default stream.
#ifdef KILN_WITH_CUDA

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "cuda/differential.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// The 16-bit GELU evaluates erfc with a fit and the hardware's approximate exp2 and
// reciprocal (ops/unary_cuda.cu): every one of the 65536 inputs of each type is checked
// against the float64 value rounded to the type. At most one unit in the last place off;
// results below the type's smallest normal may be flushed toward zero, and so may those below
// `zero_below` (bfloat16: 2^-122, the three inputs in [-13.125, -13] whose erfc(z) / 2 the fit's
// exp2 flushes; gelu_fast.cuh) if they come out as a zero of the right sign.
template <typename H>
void check_gelu_every_value(DType dtype, double smallest_normal, double zero_below) {
  std::vector<H> inputs(65536);
  for (uint32_t b = 0; b < 65536; ++b) inputs[b] = H::from_bits(static_cast<uint16_t>(b));
  const Tensor x = from_blob(inputs.data(), {65536}, dtype).clone();
  const Tensor y = gelu(x.to(kGpu)).cpu();
  const H* got = y.data_ptr<H>();
  int64_t off_by_one = 0, flushed = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const double v = static_cast<float>(inputs[b]);
    const double want = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    const double g = static_cast<float>(got[b]);
    if (std::isnan(want)) {  // NaN in, or -inf * 0
      CHECK_MESSAGE(std::isnan(g), dtype_name(dtype), " gelu(", v, ") = ", g, ", want NaN");
      continue;
    }
    if (std::fabs(want) < smallest_normal) {
      CHECK_MESSAGE(std::fabs(g) <= smallest_normal, dtype_name(dtype), " gelu(", v, ") = ", g, ", want ", want);
      continue;
    }
    if (std::fabs(want) < zero_below && g == 0 && std::signbit(g) == std::signbit(want)) {
      ++flushed;
      continue;
    }
    const int want_bits = H(static_cast<float>(want)).bits, got_bits = got[b].bits;
    CHECK_MESSAGE(std::abs(want_bits - got_bits) <= 1, dtype_name(dtype), " gelu(", v, ") = ", g, ", want ", want);
    off_by_one += want_bits != got_bits;
  }
  MESSAGE(dtype_name(dtype), " gelu: ", off_by_one, " of 65536 results one unit in the last place from the correctly rounded value, ",
          flushed, " normal results below ", zero_below, " flushed to zero");
  CHECK(flushed <= 3);  // the three bfloat16 inputs named above, no more
}

}  // namespace

TEST_CASE("seeded random numbers on the GPU equal the CPU's") {
  for (DType dtype : kFloatDtypes) {
    CAPTURE(dtype_name(dtype));
    for (auto make : {&rand, &randn}) {
      manual_seed(7);
      const Tensor cpu = make({1001}, TensorOptions(dtype));
      manual_seed(7);
      const Tensor gpu = make({1001}, TensorOptions(dtype).device(kGpu));
      if (dtype == kFloat64) {
        // Box-Muller in double through glibc's and CUDA's log/cos: equal to a few ulp.
        check_close(gpu.cpu(), values(cpu), cpu.sizes(), {1e-14, 1e-15}, "random float64");
      } else {
        CHECK(equal(gpu.cpu(), cpu));  // rounded to the dtype: bit-identical
      }
    }
  }
}

TEST_CASE("moving tensors between the host and the GPU keeps every value and dtype") {
  manual_seed(3);
  for (DType dtype : kAll) {
    CAPTURE(dtype_name(dtype));
    const Tensor h = random({5, 17}, dtype, -100, 100);
    const Tensor g = h.to(kGpu);
    CHECK(g.device() == kGpu);
    CHECK(g.dtype() == dtype);
    CHECK(equal(g.cpu(), h));
    CHECK(equal(h.t().to(kGpu).cpu(), h.t()));   // strided source
    Tensor dst = zeros({17, 5}, TensorOptions(dtype).device(kGpu));
    dst.copy_(h.t());                              // host -> device copy_ into a GPU tensor
    CHECK(equal(dst.cpu(), h.t()));
    Tensor host = zeros({5, 17}, TensorOptions(kFloat64));
    host.copy_(g);                                 // device -> host copy_ with a dtype change
    CHECK(equal(host, h.to(kFloat64)));
  }
  // Factories on the device.
  CHECK(equal(zeros({3}, kGpu).cpu(), zeros({3})));
  CHECK(equal(full({2, 2}, 7, kGpu).cpu(), full({2, 2}, 7)));
  CHECK(equal(arange(0, 10, 3, TensorOptions(kInt64).device(kGpu)).cpu(), arange(0, 10, 3)));
  CHECK(equal(eye(3, TensorOptions().device(kGpu)).cpu(), eye(3)));
}

TEST_CASE("pin_memory: page-locked copies that keep every value, in both directions") {
  manual_seed(4);
  const Tensor h = random({300, 37}, kFloat32, -5, 5);
  CHECK_FALSE(h.is_pinned());
  const Tensor p = h.pin_memory();
  CHECK(p.is_pinned());
  CHECK(p.device().is_cpu());
  CHECK(equal(p, h));
  CHECK(p.pin_memory().data_ptr() == p.data_ptr());  // already pinned: itself
  const Tensor g = p.to(kGpu);                        // host -> device from pinned memory
  CHECK(equal(g.cpu(), h));
  Tensor back = zeros({300, 37}).pin_memory();
  back.copy_(g * 2);                                  // device -> pinned host
  CHECK(back.is_pinned());
  CHECK(equal(back, h * 2));
  const Tensor strided = h.t().pin_memory();          // a strided source is made contiguous
  CHECK(strided.is_contiguous());
  CHECK(equal(strided, h.t()));
  CHECK(zeros({0, 3}).pin_memory().numel() == 0);
  CHECK_FALSE(g.is_pinned());
  CHECK_THROWS_WITH_AS(g.pin_memory(), doctest::Contains("pin_memory: only CPU tensors can be pinned, got a tensor on cuda:0"),
                       Error);
}

TEST_CASE("gelu of every float16 and bfloat16 value is within one unit in the last place") {
  check_gelu_every_value<BFloat16>(kBFloat16, 0x1p-126, 0x1p-122);
  check_gelu_every_value<Half>(kFloat16, 0x1p-14, 0x1p-14);
}

TEST_CASE("bad input on the GPU path") {
  const Tensor g = ones({4}, kGpu), c = ones({4});
  CHECK_THROWS_WITH_AS(add(c, g), doctest::Contains("add: expected all tensors to be on the same device"), Error);
  CHECK_THROWS_WITH_AS(empty({2}, Device::cuda(99)), doctest::Contains("CUDA device 99 is out of range"), Error);
  CHECK_THROWS_WITH_AS(ones({2}).to(Device::cuda(99)), doctest::Contains("CUDA device 99 is out of range"), Error);
  // A number may join a GPU op; a 1-element CPU tensor with dims may not.
  CHECK(equal((g + 1).cpu(), full({4}, 2.0f)));
  CHECK_THROWS_WITH_AS(add(g, ones({1})), doctest::Contains("add: expected all tensors to be on the same device"), Error);
  // A class index out of range is found on the device and raised, with the CPU's message, at
  // the next synchronisation (tests/cuda/test_cross_entropy_cuda.cpp has the details).
  const Tensor logp = log_softmax(randn({6, 4}, kGpu), 1);
  const Tensor bad = from_vector<int64_t>({0, 1, 9, 2, -1, 3}).to(kGpu);
  CHECK_NOTHROW(cuda::synchronize(kGpu));
  CHECK_NOTHROW(nll_loss(logp, bad));
  CHECK_THROWS_WITH_AS(cuda::synchronize(kGpu),
                       doctest::Contains("nll_loss: target 9 is out of bounds for 4 classes (at row 2)"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(randn({6, 4}, kGpu), bad).item(),
                       doctest::Contains("cross_entropy: target 9 is out of bounds for 4 classes (at row 2)"), Error);
  // The inputs survive the failed call, and a good call after it works.
  const Tensor good = from_vector<int64_t>({0, 1, 3, 2, -100, 3});
  check_close(nll_loss(logp, good.to(kGpu)).cpu(), values(nll_loss(logp.cpu(), good)), {}, {1e-5, 1e-6},
              "nll_loss after a failed call");
}

TEST_CASE("streams: work queued on a non-default stream is ordered and waited for") {
  const Stream s = Stream::create(kGpu);
  Tensor x;
  {
    cuda::StreamGuard guard(s);
    CHECK(cuda::current_stream(kGpu) == s);
    x = full({1 << 20}, 3.0f, kGpu) * 2;  // allocated and computed on s
  }
  CHECK(cuda::current_stream(kGpu).id() == 0);
  Event start(kGpu, true), stop(kGpu, true);
  start.record(s);
  {
    cuda::StreamGuard guard(s);
    x = x + 1;
  }
  stop.record(s);
  stop.synchronize();
  CHECK(stop.query());
  CHECK(start.elapsed_ms(stop) >= 0.0f);
  s.synchronize();
  CHECK(s.query());
  CHECK(equal(x.cpu(), full({1 << 20}, 7.0f)));
  const cuda::DeviceProperties p = cuda::device_properties(kGpu);
  CHECK(p.multiprocessors > 0);
  CHECK(p.total_memory > 0);
  MESSAGE(p.name << ", compute capability " << p.major << "." << p.minor << ", " << p.multiprocessors << " SMs");
}

#endif  // KILN_WITH_CUDA
