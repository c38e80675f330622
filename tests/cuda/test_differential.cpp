// The differential harness: every op with a CUDA kernel runs on the CPU and on the GPU on the
// same inputs, in every dtype it accepts and in every layout the kernels must handle
// (contiguous, transposed, sliced, broadcast, zero-size, odd sizes), and the two results
// agree within the dtype's tolerance. Adding an op adds one entry to a table below.
// (The CPU side is itself checked against float64 references in tests/ops.)
#ifdef KILN_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const Device kGpu = Device::cuda(0);

/// One op under test: how to call it on tensors of one device, and its input domain.
struct Entry {
  std::string name;
  int arity;                                                   // tensor inputs
  std::function<Tensor(const std::vector<Tensor>&)> op;         // runs on whatever device the inputs are on
  std::vector<DType> dtypes;
  double lo = -3.0, hi = 3.0;                                  // input domain
  int64_t min_dim = 0;                                         // cases with fewer dims are skipped
  double float64_atol = 0;                                     // wider float64 atol (sums: see below)
};

// float64 sums add in a different order on the GPU (a tree) than on the CPU (a loop): an
// output that cancels to ~0 can differ by ~1e-13 absolute for 4097 values of magnitude 3,
// far below any float32 error but above the float64 atol of 1e-14.
constexpr double kSumFloat64Atol = 1e-10;
Entry summing(Entry e) {
  e.float64_atol = kSumFloat64Atol;
  return e;
}

const std::vector<DType> kFloatDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16};
const std::vector<DType> kNumeric = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32};
const std::vector<DType> kAll = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};

Entry unary(const std::string& name, Tensor (*fn)(const Tensor&), std::vector<DType> dtypes, double lo = -3,
            double hi = 3) {
  return {name, 1, [fn](const std::vector<Tensor>& in) { return fn(in[0]); }, std::move(dtypes), lo, hi};
}

std::vector<Entry> entries() {
  std::vector<Entry> e = {
      unary("neg", &neg, kNumeric),
      unary("abs", &abs, kNumeric),
      unary("relu", &relu, kNumeric),
      unary("exp", &exp, kFloatDtypes),
      unary("log", &log, kFloatDtypes, 0.05, 4),
      unary("sqrt", &sqrt, kFloatDtypes, 0.0, 4),
      unary("rsqrt", &rsqrt, kFloatDtypes, 0.05, 4),
      unary("tanh", &tanh, kFloatDtypes),
      unary("sigmoid", &sigmoid, kFloatDtypes),
      unary("silu", &silu, kFloatDtypes),
      {"gelu", 1, [](const std::vector<Tensor>& in) { return gelu(in[0]); }, kFloatDtypes},
      {"gelu_tanh", 1, [](const std::vector<Tensor>& in) { return gelu(in[0], "tanh"); }, kFloatDtypes},
      {"exp_of_int", 1, [](const std::vector<Tensor>& in) { return exp(in[0]); }, {kInt64, kInt32, kBool}, -3, 4},
      {"add", 2, [](const std::vector<Tensor>& in) { return add(in[0], in[1]); }, kAll},
      {"add_alpha", 2, [](const std::vector<Tensor>& in) { return add(in[0], in[1], 3); }, kNumeric},
      {"sub", 2, [](const std::vector<Tensor>& in) { return sub(in[0], in[1]); }, kNumeric},
      {"mul", 2, [](const std::vector<Tensor>& in) { return mul(in[0], in[1]); }, kAll},
      {"div", 2, [](const std::vector<Tensor>& in) { return div(in[0], in[1]); }, kNumeric, 0.5, 3},
      {"pow", 2, [](const std::vector<Tensor>& in) { return pow(in[0], in[1]); }, kFloatDtypes, 0.5, 2},
      {"pow_int", 2, [](const std::vector<Tensor>& in) { return pow(in[0], in[1]); }, {kInt64, kInt32}, -2, 4},
      {"add_number", 1, [](const std::vector<Tensor>& in) { return in[0] + 2.5; }, kNumeric},
      {"number_minus", 1, [](const std::vector<Tensor>& in) { return 1.5 - in[0]; }, kNumeric},
      {"number_div", 1, [](const std::vector<Tensor>& in) { return 1.0 / in[0]; }, kFloatDtypes, 0.5, 3},
      {"pow_number", 1, [](const std::vector<Tensor>& in) { return pow(in[0], 3); }, kNumeric},
      {"eq", 2, [](const std::vector<Tensor>& in) { return eq(in[0], in[1]); }, kAll},
      {"ne", 2, [](const std::vector<Tensor>& in) { return ne(in[0], in[1]); }, kAll},
      {"lt", 2, [](const std::vector<Tensor>& in) { return lt(in[0], in[1]); }, kAll},
      {"le", 2, [](const std::vector<Tensor>& in) { return le(in[0], in[1]); }, kNumeric},
      {"gt_number", 1, [](const std::vector<Tensor>& in) { return in[0] > 0.25; }, kNumeric},
      {"ge", 2, [](const std::vector<Tensor>& in) { return ge(in[0], in[1]); }, kNumeric},
      {"where", 3, [](const std::vector<Tensor>& in) { return where(in[0] > 0, in[1], in[2]); }, kAll},
      {"where_numbers", 1, [](const std::vector<Tensor>& in) { return where(in[0] > 0, 1.5, -2.0); }, kNumeric},
      {"contiguous", 1, [](const std::vector<Tensor>& in) { return in[0].contiguous(); }, kAll},
      {"clone", 1, [](const std::vector<Tensor>& in) { return in[0].clone(); }, kAll},
      {"cat", 2, [](const std::vector<Tensor>& in) { return cat({in[0], in[1]}, -1); }, kAll, -3, 3, 1},
      {"stack", 2, [](const std::vector<Tensor>& in) { return stack({in[0], in[1]}, 0); }, kAll},
      // Reductions: whole tensor, last dim, first dim kept, two non-adjacent dims.
      summing({"sum", 1, [](const std::vector<Tensor>& in) { return sum(in[0]); }, kAll}),
      summing({"sum_last", 1, [](const std::vector<Tensor>& in) { return sum(in[0], {-1}); }, kAll}),
      summing({"sum_first_keepdim", 1, [](const std::vector<Tensor>& in) { return sum(in[0], {0}, true); }, kAll}),
      summing({"sum_outer_dims", 1, [](const std::vector<Tensor>& in) {
         return in[0].dim() >= 3 ? sum(in[0], {0, 2}) : sum(in[0], {0}); }, kNumeric}),
      summing({"mean", 1, [](const std::vector<Tensor>& in) { return mean(in[0]); }, kFloatDtypes}),
      summing({"mean_last", 1, [](const std::vector<Tensor>& in) { return mean(in[0], {-1}); }, kFloatDtypes}),
      summing({"mean_first", 1, [](const std::vector<Tensor>& in) { return mean(in[0], {0}); }, kFloatDtypes}),
      {"max", 1, [](const std::vector<Tensor>& in) { return max(in[0]); }, kAll},
      {"max_last", 1, [](const std::vector<Tensor>& in) { return max(in[0], {-1}); }, kAll},
      {"min_first", 1, [](const std::vector<Tensor>& in) { return min(in[0], {0}); }, kAll},
      {"amin_outer_dims", 1, [](const std::vector<Tensor>& in) {
         return in[0].dim() >= 3 ? amin(in[0], {0, 2}) : amin(in[0], {0}); }, kNumeric},
      {"argmax", 1, [](const std::vector<Tensor>& in) { return argmax(in[0]); }, kNumeric},
      {"argmax_last", 1, [](const std::vector<Tensor>& in) { return argmax(in[0], -1); }, kNumeric},
      {"argmin_first", 1, [](const std::vector<Tensor>& in) { return argmin(in[0], 0, true); }, kNumeric},
      // Row ops.
      {"softmax_last", 1, [](const std::vector<Tensor>& in) { return softmax(in[0], -1); }, kFloatDtypes},
      {"softmax_first", 1, [](const std::vector<Tensor>& in) { return softmax(in[0], 0); }, kFloatDtypes},
      {"log_softmax_last", 1, [](const std::vector<Tensor>& in) { return log_softmax(in[0], -1); }, kFloatDtypes},
      {"log_softmax_first", 1, [](const std::vector<Tensor>& in) { return log_softmax(in[0], 0); }, kFloatDtypes},
      {"layer_norm", 3, [](const std::vector<Tensor>& in) {
         // weight and bias: the first n values of the other two inputs
         const int64_t n = in[0].sizes().back();
         return layer_norm(in[0], {n}, in[1].reshape({-1}).narrow(0, 0, n), in[2].reshape({-1}).narrow(0, 0, n));
       }, kFloatDtypes, -3, 3, 1},
      {"layer_norm_plain", 1, [](const std::vector<Tensor>& in) {
         return layer_norm(in[0], {in[0].sizes().back()}); }, kFloatDtypes, -3, 3, 1},
      {"dropout", 1, [](const std::vector<Tensor>& in) {
         manual_seed(11);  // the same mask on both devices
         return dropout(in[0], 0.3, true); }, kFloatDtypes},
      // Losses: class indices drawn from the second input (argmax over the class dim).
      {"cross_entropy", 2, [](const std::vector<Tensor>& in) {
         const int64_t cls = in[0].dim() == 1 ? 0 : 1;
         return cross_entropy(in[0], in[0].dim() == 1 ? argmax(in[1]) : argmax(in[1], cls)); }, kFloatDtypes, -3, 3, 1},
      {"nll_loss_ignore", 2, [](const std::vector<Tensor>& in) {
         if (in[0].dim() < 2) return nll_loss(log_softmax(in[0], 0), argmax(in[1]), 0);
         return nll_loss(log_softmax(in[0], 1), argmax(in[1], 1), 0); }, kFloatDtypes, -3, 3, 1},
  };
  for (DType to : kAll) {
    e.push_back({fmt::format("to_{}", dtype_name(to)), 1,
                 [to](const std::vector<Tensor>& in) { return in[0].to(to); }, kAll, -300, 300});
  }
  return e;
}

// The input layouts and sizes every entry runs on: (shape, layout) pairs.
struct Case {
  Shape shape;
  Layout layout;
};
std::vector<Case> cases() {
  std::vector<Case> c;
  for (int64_t n : {1, 7, 127, 1000, 4097}) c.push_back({{n}, Layout::Contiguous});
  for (Layout l : kLayouts) {
    c.push_back({{7, 33}, l});
    c.push_back({{3, 4, 129}, l});
  }
  c.push_back({{0, 5}, Layout::Contiguous});   // zero-size
  c.push_back({{4, 0}, Layout::Transposed});   // zero-size, strided
  c.push_back({{}, Layout::Contiguous});       // 0-dim
  return c;
}

// Tolerance for comparing the GPU result with the CPU's: the dtype's, widened for float32
// transcendental functions (CUDA's and glibc's differ by a few ulp).
Tolerance gpu_tolerance(DType t) {
  Tolerance tol = tolerance(t);
  if (t == kFloat32) tol = {1e-5, 1e-6};
  if (t == kFloat64) tol = {1e-12, 1e-14};
  return tol;
}

}  // namespace

TEST_CASE("every op with a CUDA kernel agrees with the CPU on every dtype and layout") {
  manual_seed(2024);
  int checked = 0;
  for (const Entry& entry : entries()) {
    for (DType dtype : entry.dtypes) {
      for (const Case& c : cases()) {
        if (c.layout == Layout::Transposed && c.shape.size() < 2) continue;
        if (static_cast<int64_t>(c.shape.size()) < entry.min_dim) continue;
        CAPTURE(entry.name);
        CAPTURE(dtype_name(dtype));
        CAPTURE(shape_str(c.shape));
        CAPTURE(layout_name(c.layout));
        std::vector<Tensor> cpu_in;
        for (int k = 0; k < entry.arity; ++k) {
          // The second input of a binary op is broadcast along the first dim in the
          // Expanded case; 0-dim and zero-size shapes use the plain random tensor.
          if (c.shape.empty() || shape_numel(c.shape) == 0 || (c.layout == Layout::Transposed && c.shape.size() < 2))
            cpu_in.push_back(random(c.shape, dtype, entry.lo, entry.hi));
          else
            cpu_in.push_back(random_with_layout(c.shape, c.layout, dtype, entry.lo, entry.hi));
        }
        // The GPU gets the same values in the same layout: copy the whole storage view.
        std::vector<Tensor> gpu_in;
        for (const Tensor& t : cpu_in) {
          Tensor g = t.contiguous().to(kGpu);
          if (!t.is_contiguous() && t.numel() > 0) {
            // Rebuild the strided layout on the GPU (transpose / slice / expand of a dense copy).
            if (c.layout == Layout::Transposed) g = g.transpose(-1, -2).contiguous().transpose(-1, -2);
            else if (c.layout == Layout::Expanded) g = g.narrow(0, 0, 1).contiguous().expand(t.sizes());
            else if (c.layout == Layout::Sliced) {
              Shape wide = t.sizes();
              wide.back() = 2 * wide.back() + 1;
              Tensor w = zeros(wide, TensorOptions(t.dtype()).device(kGpu));
              w.slice(-1, 1, wide.back(), 2).copy_(g);
              g = w.slice(-1, 1, wide.back(), 2);
            }
            REQUIRE_FALSE(g.is_contiguous());
          }
          gpu_in.push_back(g);
        }
        Tensor want;
        try {
          want = entry.op(cpu_in);
        } catch (const Error& e) {
          // Input the op refuses (e.g. max over a size-0 dim): the GPU must refuse it too.
          CHECK_THROWS_AS(entry.op(gpu_in), Error);
          ++checked;
          continue;
        }
        const Tensor got = entry.op(gpu_in);
        REQUIRE(got.device() == kGpu);
        REQUIRE(got.dtype() == want.dtype());
        Tolerance tol = gpu_tolerance(want.dtype());
        if (want.dtype() == kFloat64) tol.atol = std::max(tol.atol, entry.float64_atol);
        check_close(got.cpu(), values(want), want.sizes(), tol, entry.name);
        ++checked;
      }
    }
  }
  MESSAGE(checked << " (op, dtype, layout) cases agree between CPU and GPU");
}

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

// The 16-bit GELU evaluates erfc with a fit and the hardware's approximate exp2 and
// reciprocal (ops/unary_cuda.cu): every one of the 65536 inputs of each type is checked
// against the float64 value rounded to the type. At most one unit in the last place off;
// results below the type's smallest normal may be flushed toward zero.
template <typename H>
void check_gelu_every_value(DType dtype, double smallest_normal) {
  std::vector<H> inputs(65536);
  for (uint32_t b = 0; b < 65536; ++b) inputs[b] = H::from_bits(static_cast<uint16_t>(b));
  const Tensor x = from_blob(inputs.data(), {65536}, dtype).clone();
  const Tensor y = gelu(x.to(kGpu)).cpu();
  const H* got = y.data_ptr<H>();
  int64_t off_by_one = 0;
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
    const int want_bits = H(static_cast<float>(want)).bits, got_bits = got[b].bits;
    CHECK_MESSAGE(std::abs(want_bits - got_bits) <= 1, dtype_name(dtype), " gelu(", v, ") = ", g, ", want ", want);
    off_by_one += want_bits != got_bits;
  }
  MESSAGE(dtype_name(dtype), " gelu: ", off_by_one, " of 65536 results one unit in the last place from the correctly rounded value");
}

TEST_CASE("gelu of every float16 and bfloat16 value is within one unit in the last place") {
  check_gelu_every_value<BFloat16>(kBFloat16, 0x1p-126);
  check_gelu_every_value<Half>(kFloat16, 0x1p-14);
}

TEST_CASE("bad input on the GPU path") {
  const Tensor g = ones({4}, kGpu), c = ones({4});
  CHECK_THROWS_WITH_AS(add(c, g), doctest::Contains("add: expected all tensors to be on the same device"), Error);
  CHECK_THROWS_WITH_AS(empty({2}, Device::cuda(99)), doctest::Contains("CUDA device 99 is out of range"), Error);
  CHECK_THROWS_WITH_AS(ones({2}).to(Device::cuda(99)), doctest::Contains("CUDA device 99 is out of range"), Error);
  // A number may join a GPU op; a 1-element CPU tensor with dims may not.
  CHECK(equal((g + 1).cpu(), full({4}, 2.0f)));
  CHECK_THROWS_WITH_AS(add(g, ones({1})), doctest::Contains("add: expected all tensors to be on the same device"), Error);
  // A class index out of range is found on the device and reported like the CPU's.
  const Tensor logp = log_softmax(randn({6, 4}, kGpu), 1);
  const Tensor bad = from_vector<int64_t>({0, 1, 9, 2, -1, 3}).to(kGpu);
  CHECK_THROWS_WITH_AS(nll_loss(logp, bad), doctest::Contains("nll_loss: target 9 is out of bounds for 4 classes (at row 2)"),
                       Error);
  CHECK_THROWS_WITH_AS(cross_entropy(randn({6, 4}, kGpu), bad), doctest::Contains("cross_entropy: nll_loss: target 9"),
                       Error);
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
