// The differential harness: every op with a CUDA kernel runs on the CPU and on the GPU on the
// same inputs, in every dtype it accepts and in every layout the kernels must handle
// (contiguous, transposed, sliced, broadcast, zero-size, odd sizes, strided and expanded odd
// sizes), and the two results agree within the dtype's tolerance. Adding an op adds one entry
// to a table below: `entries()` for ops whose inputs share one shape, `shaped_entries()` for
// ops whose inputs differ in shape (GEMMs, indexing), which make their own input sets.
// (The CPU side is itself checked against float64 references in tests/ops.)
//
// The GPU gets each input in exactly the CPU input's layout (same sizes and strides: the
// storage span the view reaches is copied whole and viewed the same way), so a strided or
// expanded case exercises the GPU kernels' strided paths, not a contiguous copy.
#ifdef KILN_WITH_CUDA

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const Device kGpu = Device::cuda(0);

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

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

const std::vector<DType> kFloatDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16};
const std::vector<DType> kNumeric = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32};
const std::vector<DType> kAll = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};

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

// Tolerance for comparing the GPU result with the CPU's: the dtype's, widened for float32
// transcendental functions (CUDA's and glibc's differ by a few ulp).
Tolerance gpu_tolerance(DType t) {
  Tolerance tol = tolerance(t);
  if (t == kFloat32) tol = {1e-5, 1e-6};
  if (t == kFloat64) tol = {1e-12, 1e-14};
  return tol;
}

/// `t`'s values on `device` in t's exact layout (sizes and strides): the storage span the
/// view reaches is copied whole, and the same view is taken on the copy.
Tensor same_layout_on(const Tensor& t, Device device) {
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
void check_on_both(const std::string& name, const Op& op, const std::vector<Tensor>& cpu_in,
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

// ---- ops whose inputs differ in shape: GEMMs and indexing ---------------------------------

/// One set of CPU inputs (any layouts) for a shaped entry, with the dim an indexing op takes
/// and, where the values make it known, the tolerance (otherwise gpu_tolerance).
struct InputSet {
  std::string what;
  std::vector<Tensor> tensors;
  int64_t dim = 0;
  std::optional<Tolerance> tol = std::nullopt;
};

/// An op whose inputs it makes itself, for one dtype.
struct ShapedEntry {
  std::string name;
  std::vector<DType> dtypes;
  std::function<std::vector<InputSet>(DType)> inputs;
  std::function<Tensor(const std::vector<Tensor>&, int64_t dim)> op;
};

/// A CPU tensor of `shape` in `layout` (as random_with_layout) whose values are uniform in
/// [lo, hi) (integer dtypes: their floor) or, with `eighths`, random_eighths values.
Tensor make_operand(const Shape& shape, Layout layout, DType dtype, bool eighths, double lo = -1, double hi = 1) {
  auto draw = [&](const Shape& s) { return eighths ? random_eighths(s, dtype) : random(s, dtype, lo, hi); };
  if (shape.empty() || shape_numel(shape) == 0) return draw(shape);
  switch (layout) {
    case Layout::Contiguous: return draw(shape);
    case Layout::Transposed: {
      if (shape.size() < 2) return draw(shape);
      Shape swapped = shape;
      std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
      return draw(swapped).transpose(-1, -2);
    }
    case Layout::Sliced: {
      Shape wide = shape;
      wide.back() = 2 * shape.back() + 1;
      return draw(wide).slice(-1, 1, wide.back(), 2);
    }
    case Layout::Expanded: {
      Shape one = shape;
      one[0] = 1;
      return draw(one).expand(shape);
    }
  }
  return {};
}

/// Random int64 indices in [0, size) of `shape` in `layout`.
Tensor make_index(const Shape& shape, int64_t size, Layout layout) {
  return make_operand(shape, layout, kInt64, false, 0, static_cast<double>(size));
}

/// `t`'s values in another layout: transposed storage or every other element of a wider buffer.
Tensor relayout(const Tensor& t, Layout layout) {
  if (t.numel() == 0 || t.dim() == 0) return t;
  if (layout == Layout::Transposed && t.dim() >= 2) return t.transpose(-1, -2).contiguous().transpose(-1, -2);
  if (layout == Layout::Sliced) {
    Shape wide = t.sizes();
    wide.back() = 2 * wide.back();
    Tensor w = zeros(wide, t.dtype());
    w.slice(-1, 0, wide.back(), 2).copy_(t);
    return w.slice(-1, 0, wide.back(), 2);
  }
  return t.contiguous();
}

/// int64 indices of `shape` whose values along `dim` are distinct within each line (the
/// first shape[dim] entries of a random permutation of [0, size)): a scatter then writes
/// each element at most once, and its result does not depend on the order of the writes.
Tensor unique_index(const Shape& shape, int64_t dim, int64_t size, Layout layout) {
  Shape lines_shape = shape;  // `dim` moved last
  lines_shape.erase(lines_shape.begin() + dim);
  const int64_t lines = shape_numel(lines_shape), per_line = shape[static_cast<size_t>(dim)];
  REQUIRE(per_line <= size);
  const std::vector<double> keys = rand({std::max<int64_t>(lines, 1), size}, kFloat64).to_vector<double>();
  std::vector<int64_t> picks;
  for (int64_t l = 0; l < lines; ++l) {
    std::vector<int64_t> perm(static_cast<size_t>(size));
    std::iota(perm.begin(), perm.end(), 0);
    std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return keys[l * size + a] < keys[l * size + b]; });
    picks.insert(picks.end(), perm.begin(), perm.begin() + per_line);
  }
  lines_shape.push_back(per_line);
  const Tensor moved = from_vector(picks, lines_shape).movedim(-1, dim).contiguous();
  return relayout(moved, layout);
}

const std::vector<Layout> kMatrixLayouts = {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::Expanded};
const std::vector<int64_t> kOddSizes = {1, 3, 17, 65, 127};
// (m, k, n) for the layout sweeps: every odd size in each position, square and thin.
const std::vector<std::array<int64_t, 3>> kOddTriples = {{1, 1, 1},   {3, 17, 1},  {17, 65, 3},   {65, 127, 17},
                                                         {127, 3, 65}, {1, 127, 127}, {127, 1, 127}};

/// GEMM input sets for one dtype, made by `make(m, k, n, layout_a, layout_b, eighths)`:
///   - every (m, k, n) of odd sizes, contiguous, on eighths: products and sums of multiples of
///     1/8 with k <= 127 are exact in float32 and float64 and accumulate exactly in the float
///     accumulators of the 16-bit GEMMs (both devices then round once), so results are equal;
///   - the odd triples in every pair of layouts (transposed, sliced, expanded), on eighths;
///   - the odd triples on uniform values in [-1, 1) (contiguous and transposed), where the
///     devices add in different orders: the dtype's rtol, and its atol scaled by sqrt(k),
///     the growth of a k-term sum's rounding error. (TF32 would miss the float32 bound.)
/// `bias_epilogue`: the op adds a vector bias in cuBLASLt's epilogue. In bfloat16 that
/// epilogue rounds the product to bfloat16 before adding the bias (seen on the H200: results
/// one bfloat16 ulp from the CPU's single rounding, float16 unaffected), so there "equal"
/// means within one ulp of the 8-bit significand (rtol 2^-7).
std::vector<InputSet> gemm_sets(DType dtype,
                                const std::function<std::vector<Tensor>(int64_t, int64_t, int64_t, Layout, Layout,
                                                                        bool)>& make,
                                bool bias_epilogue = false) {
  std::vector<InputSet> sets;
  const Tolerance exactly = bias_epilogue && dtype == kBFloat16 ? Tolerance{0x1p-7, 0} : Tolerance{0, 0};
  for (int64_t m : kOddSizes)
    for (int64_t k : kOddSizes)
      for (int64_t n : kOddSizes)
        sets.push_back({fmt::format("m={} k={} n={} contiguous eighths", m, k, n),
                        make(m, k, n, Layout::Contiguous, Layout::Contiguous, true), 0, exactly});
  for (const auto& [m, k, n] : kOddTriples) {
    for (Layout la : kMatrixLayouts)
      for (Layout lb : kMatrixLayouts)
        sets.push_back({fmt::format("m={} k={} n={} a {} b {} eighths", m, k, n, layout_name(la), layout_name(lb)),
                        make(m, k, n, la, lb, true), 0, exactly});
    if (!is_floating(dtype)) continue;  // integer GEMMs are exact on any values: the eighths cover them
    Tolerance tol = tolerance(dtype);
    tol.atol *= std::sqrt(static_cast<double>(k));
    for (Layout l : {Layout::Contiguous, Layout::Transposed})
      sets.push_back({fmt::format("m={} k={} n={} {} uniform", m, k, n, layout_name(l)), make(m, k, n, l, l, false),
                      0, tol});
  }
  return sets;
}

std::vector<ShapedEntry> gemm_entries() {
  using Tensors = std::vector<Tensor>;
  return {
      {"mm", kNumeric,
       [](DType dtype) {
         return gemm_sets(dtype, [dtype](int64_t m, int64_t k, int64_t n, Layout la, Layout lb, bool eighths) {
           return Tensors{make_operand({m, k}, la, dtype, eighths), make_operand({k, n}, lb, dtype, eighths)};
         });
       },
       [](const Tensors& in, int64_t) { return mm(in[0], in[1]); }},
      // Batched: [2, m, k] @ [k, n] (b broadcast over the batch) and an expanded batch dim.
      {"matmul_batched", kNumeric,
       [](DType dtype) {
         return gemm_sets(dtype, [dtype](int64_t m, int64_t k, int64_t n, Layout la, Layout lb, bool eighths) {
           return Tensors{make_operand({2, m, k}, la, dtype, eighths), make_operand({k, n}, lb, dtype, eighths)};
         });
       },
       [](const Tensors& in, int64_t) { return matmul(in[0], in[1]); }},
      {"matmul_broadcast_batch", kNumeric,
       [](DType dtype) {
         return gemm_sets(dtype, [dtype](int64_t m, int64_t k, int64_t n, Layout la, Layout lb, bool eighths) {
           return Tensors{make_operand({3, 1, m, k}, la, dtype, eighths), make_operand({2, k, n}, lb, dtype, eighths)};
         });
       },
       [](const Tensors& in, int64_t) { return matmul(in[0], in[1]); }},
      // 1-D operands: vector @ matrix, matrix @ vector, dot (the vector is a's first row / b's first column).
      {"matmul_vectors", kNumeric,
       [](DType dtype) {
         return gemm_sets(dtype, [dtype](int64_t m, int64_t k, int64_t n, Layout la, Layout lb, bool eighths) {
           return Tensors{make_operand({m, k}, la, dtype, eighths), make_operand({k, n}, lb, dtype, eighths)};
         });
       },
       [](const Tensors& in, int64_t) {
         const Tensor v = in[0].select(0, 0), w = in[1].select(1, 0);
         return cat({matmul(v, in[1]), matmul(in[0], w), matmul(v, w).reshape({1})}, 0);
       }},
      // addmm: bias [n] broadcast over the rows, then [m, n] with alpha and beta.
      {"addmm", kFloatDtypes,
       [](DType dtype) {
         return gemm_sets(dtype, [dtype](int64_t m, int64_t k, int64_t n, Layout la, Layout lb, bool eighths) {
           return Tensors{make_operand({m, k}, la, dtype, eighths), make_operand({k, n}, lb, dtype, eighths),
                          make_operand({n}, Layout::Contiguous, dtype, eighths),
                          make_operand({m, n}, lb, dtype, eighths)};
         }, /*bias_epilogue=*/true);
       },
       [](const Tensors& in, int64_t) {
         return cat({addmm(in[2], in[0], in[1]), addmm(in[3], in[0], in[1], 0.5, 2)}, 0);
       }},
      // linear: x [2, m, k] @ weight [n, k]^T + bias [n], with and without the bias.
      {"linear", kFloatDtypes,
       [](DType dtype) {
         return gemm_sets(dtype, [dtype](int64_t m, int64_t k, int64_t n, Layout la, Layout lb, bool eighths) {
           return Tensors{make_operand({2, m, k}, la, dtype, eighths), make_operand({n, k}, lb, dtype, eighths),
                          make_operand({n}, Layout::Sliced, dtype, eighths)};
         }, /*bias_epilogue=*/true);
       },
       [](const Tensors& in, int64_t) { return cat({linear(in[0], in[1], in[2]), linear(in[0], in[1])}, 0); }},
  };
}

/// Index-op input sets over a source of shape {5, 17, 3}: each dim, each source layout and
/// several index layouts, plus empty indices.
std::vector<ShapedEntry> indexing_entries() {
  using Tensors = std::vector<Tensor>;
  const Shape src_shape{5, 17, 3};
  // The index shape of gather / scatter along `dim`: smaller than the source elsewhere,
  // `along` at dim.
  auto index_shape = [](int64_t dim, int64_t along) {
    Shape s{4, 9, 2};
    s[static_cast<size_t>(dim)] = along;
    return s;
  };
  return {
      {"index_select", kAll,
       [src_shape](DType dtype) {
         std::vector<InputSet> sets;
         for (Layout l : kLayouts)
           for (int64_t dim : {0, 1, 2})
             for (Layout il : {Layout::Contiguous, Layout::Sliced, Layout::Expanded}) {
               const int64_t size = src_shape[static_cast<size_t>(dim)];
               sets.push_back({fmt::format("dim {} source {} index {}", dim, layout_name(l), layout_name(il)),
                               {make_operand(src_shape, l, dtype, false, -4, 4), make_index({11}, size, il)}, dim});
               sets.push_back({fmt::format("dim {} int32 index", dim),
                               {make_operand(src_shape, l, dtype, false, -4, 4), make_index({11}, size, il).to(kInt32)},
                               dim});
             }
         sets.push_back(
             {"empty index", {make_operand(src_shape, Layout::Contiguous, dtype, false), zeros({0}, kInt64)}, 1});
         return sets;
       },
       [](const Tensors& in, int64_t dim) { return index_select(in[0], dim, in[1]); }},
      {"gather", kAll,
       [src_shape, index_shape](DType dtype) {
         std::vector<InputSet> sets;
         for (Layout l : kLayouts)
           for (int64_t dim : {0, 1, 2})
             for (Layout il : kLayouts) {
               const int64_t size = src_shape[static_cast<size_t>(dim)];
               sets.push_back({fmt::format("dim {} source {} index {}", dim, layout_name(l), layout_name(il)),
                               {make_operand(src_shape, l, dtype, false, -4, 4),
                                make_index(index_shape(dim, 23), size, il)},
                               dim});
             }
         sets.push_back(
             {"empty index", {make_operand(src_shape, Layout::Contiguous, dtype, false), zeros({0, 3, 2}, kInt64)}, 1});
         return sets;
       },
       [](const Tensors& in, int64_t dim) { return gather(in[0], dim, in[1]); }},
      // scatter: indices distinct along dim, so the result is the same whatever order the
      // GPU's writes land in; in place through the target's own layout, and out of place.
      {"scatter", kAll,
       [src_shape, index_shape](DType dtype) {
         std::vector<InputSet> sets;
         for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced})
           for (int64_t dim : {0, 1, 2})
             for (Layout il : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
               const int64_t size = src_shape[static_cast<size_t>(dim)];
               const Shape is = index_shape(dim, std::min<int64_t>(size, 5));
               sets.push_back({fmt::format("dim {} target {} index {}", dim, layout_name(l), layout_name(il)),
                               {make_operand(src_shape, l, dtype, false, -4, 4), unique_index(is, dim, size, il),
                                make_operand({5, 11, 4}, l, dtype, false, -4, 4)},
                               dim});
             }
         return sets;
       },
       [](const Tensors& in, int64_t dim) {
         Tensor target = in[0];
         const Tensor copy = scatter(in[0], dim, in[1], in[2]);
         const Tensor number = scatter(in[0], dim, in[1], 1.5);
         scatter_(target, dim, in[1], in[2]);
         return stack({copy, number, target.contiguous()});
       }},
      // scatter_add: duplicates on purpose (twice as many picks as slots). Eighths make every
      // partial sum exact, so the atomics' order cannot change the result.
      {"scatter_add", kNumeric,
       [src_shape](DType dtype) {
         std::vector<InputSet> sets;
         const Tolerance exactly{0, 0};
         for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced})
           for (int64_t dim : {0, 1, 2})
             for (Layout il : kLayouts) {
               const int64_t size = src_shape[static_cast<size_t>(dim)];
               Shape is = src_shape;
               is[static_cast<size_t>(dim)] *= 2;
               sets.push_back({fmt::format("dim {} target {} index {}", dim, layout_name(l), layout_name(il)),
                               {make_operand(src_shape, l, dtype, true), make_index(is, size, il),
                                make_operand(is, l, dtype, true)},
                               dim, exactly});
             }
         const Tensor target = make_operand(src_shape, Layout::Contiguous, dtype, true);
         sets.push_back({"empty index", {target, zeros({0, 1, 1}, kInt64), zeros({0, 1, 1}, dtype)}, 0, exactly});
         return sets;
       },
       [](const Tensors& in, int64_t dim) {
         Tensor target = in[0];
         const Tensor copy = scatter_add(in[0], dim, in[1], in[2]);
         scatter_add_(target, dim, in[1], in[2]);
         return stack({copy, target.contiguous()});
       }},
      // scatter_add on uniform values: the float atomics add in an order that varies, so the
      // result may differ from the CPU's by the roundings of the partial sums: at most half a
      // unit of a partial sum (below 2 * (adds + 1) with values below 2) per addition, on
      // each device. 34 picks into 17 slots: about 2, rarely more than 8, adds per element.
      {"scatter_add_uniform", kFloatDtypes,
       [](DType dtype) {
         std::vector<InputSet> sets;
         const double unit = std::ldexp(1.0, -significand_digits(dtype));
         const double most = 12;  // a bound on adds per element; checked by the reference below
         Tolerance tol = tolerance(dtype);
         tol.atol += 2 * most * 2 * (most + 1) * unit;
         for (Layout l : {Layout::Contiguous, Layout::Transposed})
           for (int seed = 0; seed < 4; ++seed) {
             const Tensor index = make_index({3, 34}, 17, l);
             // Check the bound's premise on this draw: no element receives more than `most` adds.
             const std::vector<double> vi = values(index);
             std::vector<int> adds(3 * 17, 0);
             for (size_t p = 0; p < vi.size(); ++p) ++adds[(p / 34) * 17 + static_cast<size_t>(vi[p])];
             REQUIRE(*std::max_element(adds.begin(), adds.end()) <= most);
             sets.push_back({fmt::format("{} draw {}", layout_name(l), seed),
                             {make_operand({3, 17}, l, dtype, false, -2, 2), index,
                              make_operand({3, 34}, l, dtype, false, -2, 2)},
                             1, tol});
           }
         return sets;
       },
       [](const Tensors& in, int64_t dim) { return scatter_add(in[0], dim, in[1], in[2]); }},
      {"embedding", kAll,
       [](DType dtype) {
         std::vector<InputSet> sets;
         for (Layout wl : {Layout::Contiguous, Layout::Transposed, Layout::Sliced})
           for (Layout il : kLayouts) {
             sets.push_back({fmt::format("weight {} indices {}", layout_name(wl), layout_name(il)),
                             {make_operand({11, 5}, wl, dtype, false, -4, 4), make_index({3, 7}, 11, il)}});
             sets.push_back({fmt::format("weight {} int32 indices {}", layout_name(wl), layout_name(il)),
                             {make_operand({11, 5}, wl, dtype, false, -4, 4), make_index({3, 7}, 11, il).to(kInt32)}});
           }
         const Tensor table = make_operand({11, 5}, Layout::Contiguous, dtype, false);
         sets.push_back({"0-dim indices", {table, tensor(int64_t{10})}});
         sets.push_back({"empty indices", {table, zeros({0}, kInt64)}});
         return sets;
       },
       [](const Tensors& in, int64_t) { return embedding(in[0], in[1]); }},
  };
}

}  // namespace

// KILN_TEST_SAMPLE=N runs the first case of every (op, dtype) and every Nth after it: what
// scripts/gpu_check.sh uses under compute-sanitizer, where the full tables would take many
// minutes. Unset, every case runs.
int64_t sample_stride() {
  const char* v = std::getenv("KILN_TEST_SAMPLE");
  const int64_t n = v != nullptr ? std::atoll(v) : 1;
  return n > 1 ? n : 1;
}

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

TEST_CASE("GEMMs and indexing ops agree with the CPU on odd sizes, strided and expanded operands") {
  manual_seed(2025);
  std::vector<ShapedEntry> all = gemm_entries();
  for (ShapedEntry& e : indexing_entries()) all.push_back(std::move(e));
  const int64_t stride = sample_stride();
  int checked = 0;
  for (const ShapedEntry& entry : all) {
    for (DType dtype : entry.dtypes) {
      int64_t seen = 0;
      for (const InputSet& set : entry.inputs(dtype)) {
        if (seen++ % stride != 0) continue;
        CAPTURE(entry.name);
        CAPTURE(dtype_name(dtype));
        CAPTURE(set.what);
        const Op op = [&entry, dim = set.dim](const std::vector<Tensor>& in) { return entry.op(in, dim); };
        check_on_both(entry.name, op, set.tensors,
                      [&set](DType t) { return set.tol.has_value() ? *set.tol : gpu_tolerance(t); });
        ++checked;
      }
    }
  }
  MESSAGE(checked << " (op, dtype, input set) cases agree between CPU and GPU"
                  << (stride > 1 ? fmt::format(" (KILN_TEST_SAMPLE={}: every {}th case)", stride, stride) : ""));
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
