// The differential harness, ops whose inputs share one shape: every op with a CUDA kernel
// runs on the CPU and on the GPU on the same inputs, in every dtype it accepts and in every
// layout the kernels must handle (contiguous, transposed, sliced, broadcast, zero-size, odd
// sizes, strided and expanded odd sizes), and the two results agree within the dtype's
// tolerance. Adding such an op adds one entry to `entries()` below; ops whose inputs differ
// in shape (GEMMs, indexing) are in test_differential_shaped.cpp. (The CPU side is itself
// checked against float64 references in tests/ops.)
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

/// One op under test: how to call it on tensors of one device, and its input domain.
struct Entry {
  std::string name;
  int arity;                                                   // tensor inputs
  Op op;                                                       // runs on whatever device the inputs are on
  std::vector<DType> dtypes;
  double lo = -3.0, hi = 3.0;                                  // input domain
  int64_t min_dim = 0;                                         // cases with fewer dims are skipped
  double float64_atol = 0;                                     // wider float64 atol (sums: see below)
  bool normalizes_last_dim = false;                            // layer_norm: see `constant_rows`
};

// An Expanded 1-D input repeats one value, so layer_norm normalises a constant row: x - mean
// is the mean's rounding error (an ulp of x), which 1/sqrt(var + eps) = 1/sqrt(eps) amplifies
// ~300x. Both devices are right to within that, which no dtype tolerance states; such rows
// are skipped (2-D Expanded inputs repeat rows along dim 0 and stay in).
bool constant_rows(const Entry& e, const Shape& shape, Layout layout) {
  return e.normalizes_last_dim && layout == Layout::Expanded && shape.size() == 1;
}

// float64 sums add in a different order on the GPU (a tree) than on the CPU (a loop): an
// output that cancels to ~0 can differ by ~1e-13 absolute for 4097 values of magnitude 3,
// far below any float32 error but above the float64 atol of 1e-14.
constexpr double kSumFloat64Atol = 1e-10;
Entry summing(Entry e) {
  e.float64_atol = kSumFloat64Atol;
  return e;
}


Entry unary(const std::string& name, Tensor (*fn)(const Tensor&), std::vector<DType> dtypes, double lo = -3,
            double hi = 3) {
  return {name, 1, [fn](const std::vector<Tensor>& in) { return fn(in[0]); }, std::move(dtypes), lo, hi};
}

// The mask of the masked_fill entries: where the second input is positive.
Tensor positive(const Tensor& t) { return t > 0; }

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
      // clamp: bounds inside the domain (integer tensors with 1.5 promote to float32).
      {"clamp", 1, [](const std::vector<Tensor>& in) { return clamp(in[0], -1, 1.5); }, kNumeric},
      {"clamp_int_bounds", 1, [](const std::vector<Tensor>& in) { return clamp(in[0], -2, 2); }, kNumeric},
      {"clamp_min", 1, [](const std::vector<Tensor>& in) { return clamp_min(in[0], 0.3); }, kNumeric},
      {"clamp_max", 1, [](const std::vector<Tensor>& in) { return clamp_max(in[0], -0.7); }, kNumeric},
      {"clamp_in_place", 1, [](const std::vector<Tensor>& in) {
         Tensor t = in[0];  // written through its own layout (an expanded input is refused on both devices)
         return clamp_(t, -1, 2); }, kNumeric},
      // masked_fill: the mask is where the second input is positive; also broadcast from one row.
      {"masked_fill", 2, [](const std::vector<Tensor>& in) { return masked_fill(in[0], positive(in[1]), 2.5); }, kAll},
      {"masked_fill_row_mask", 2, [](const std::vector<Tensor>& in) {
         return masked_fill(in[0], positive(in[1]).select(0, 0), -1); }, kAll, -3, 3, 1},
      {"masked_fill_in_place", 2, [](const std::vector<Tensor>& in) {
         Tensor t = in[0];
         return masked_fill_(t, positive(in[1]), 7); }, kAll},
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
       }, kFloatDtypes, -3, 3, 1, 0, true},
      {"layer_norm_plain", 1, [](const std::vector<Tensor>& in) {
         return layer_norm(in[0], {in[0].sizes().back()}); }, kFloatDtypes, -3, 3, 1, 0, true},
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
      // Their gradients (grad_output 0.5), with class 0 ignored in the nll_loss one.
      {"cross_entropy_backward", 2, [](const std::vector<Tensor>& in) {
         const Tensor t = in[0].dim() == 1 ? argmax(in[1]) : argmax(in[1], 1);
         const CrossEntropyForward f = _cross_entropy_forward(in[0], t);
         return _cross_entropy_backward(full({}, 0.5, TensorOptions(in[0].dtype()).device(in[0].device())), in[0], t,
                                        f.logsumexp, f.count); }, kFloatDtypes, -3, 3, 1},
      {"nll_loss_backward_ignore", 2, [](const std::vector<Tensor>& in) {
         const Tensor t = in[0].dim() == 1 ? argmax(in[1]) : argmax(in[1], 1);
         const NllLossForward f = _nll_loss_forward(in[0], t, 0);
         return _nll_loss_backward(full({}, 0.5, TensorOptions(in[0].dtype()).device(in[0].device())), in[0], t,
                                   f.count, 0); }, kFloatDtypes, -3, 3, 1},
      summing({"mse_loss", 2, [](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1]); }, kFloatDtypes}),
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
  // Odd lengths strided (every other element) and expanded (stride 0), not only dense.
  for (int64_t n : {1, 7, 127, 4097}) {
    c.push_back({{n}, Layout::Sliced});
    c.push_back({{n}, Layout::Expanded});
  }
  for (Layout l : kLayouts) {
    c.push_back({{7, 33}, l});
    c.push_back({{3, 4, 129}, l});
    // Odd sizes in every layout: single elements, thin matrices, rows longer than a block.
    c.push_back({{1, 1}, l});
    c.push_back({{127, 3}, l});
    c.push_back({{17, 65}, l});
    c.push_back({{3, 4097}, l});
  }
  c.push_back({{0, 5}, Layout::Contiguous});   // zero-size
  c.push_back({{4, 0}, Layout::Transposed});   // zero-size, strided
  c.push_back({{}, Layout::Contiguous});       // 0-dim
  return c;
}

}  // namespace

TEST_CASE("every op with a CUDA kernel agrees with the CPU on every dtype and layout") {
  manual_seed(2024);
  const int64_t stride = sample_stride();
  int checked = 0;
  for (const Entry& entry : entries()) {
    for (DType dtype : entry.dtypes) {
      int64_t seen = 0;
      for (const Case& c : cases()) {
        if (c.layout == Layout::Transposed && c.shape.size() < 2) continue;
        if (static_cast<int64_t>(c.shape.size()) < entry.min_dim) continue;
        if (constant_rows(entry, c.shape, c.layout)) continue;
        if (seen++ % stride != 0) continue;
        CAPTURE(entry.name);
        CAPTURE(dtype_name(dtype));
        CAPTURE(shape_str(c.shape));
        INFO("c.layout: " << std::string(layout_name(c.layout)));
        std::vector<Tensor> cpu_in;
        for (int k = 0; k < entry.arity; ++k) {
          // Every input in the case's layout (Expanded: broadcast along the first dim); 0-dim
          // and zero-size shapes use the plain random tensor.
          if (c.shape.empty() || shape_numel(c.shape) == 0)
            cpu_in.push_back(random(c.shape, dtype, entry.lo, entry.hi));
          else
            cpu_in.push_back(random_with_layout(c.shape, c.layout, dtype, entry.lo, entry.hi));
        }
        check_on_both(entry.name, entry.op, cpu_in, [&entry](DType t) {
          Tolerance tol = gpu_tolerance(t);
          if (t == kFloat64) tol.atol = std::max(tol.atol, entry.float64_atol);
          return tol;
        });
        ++checked;
      }
    }
  }
  MESSAGE(checked << " (op, dtype, layout) cases agree between CPU and GPU"
                  << (stride > 1 ? fmt::format(" (KILN_TEST_SAMPLE={}: every {}th case)", stride, stride) : ""));
}

#endif  // KILN_WITH_CUDA
