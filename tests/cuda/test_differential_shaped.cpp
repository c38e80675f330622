// The differential harness, ops whose inputs differ in shape: GEMMs (odd sizes, every pair of
// layouts, exact on multiples of 1/8) and the indexing ops (each dim, source and index
// layouts, empty indices), each entry making its own input sets. Adding such an op adds one
// entry to `gemm_entries()` or `indexing_entries()`.
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
      // fused_linear_gelu: linear's operands, both GELU modes, with and without the bias. GELU
      // of exact products is still rounded differently by the two devices (and the GPU's
      // portable path rounds the pre-activation of 16-bit types first): the dtype's tolerance
      // where the sets ask for equality.
      {"fused_linear_gelu", kFloatDtypes,
       [](DType dtype) {
         std::vector<InputSet> sets =
             gemm_sets(dtype, [dtype](int64_t m, int64_t k, int64_t n, Layout la, Layout lb, bool eighths) {
               return Tensors{make_operand({2, m, k}, la, dtype, eighths), make_operand({n, k}, lb, dtype, eighths),
                              make_operand({n}, Layout::Sliced, dtype, eighths)};
             }, /*bias_epilogue=*/true);
         for (InputSet& set : sets)
           if (set.tol.has_value() && set.tol->atol == 0) set.tol = gpu_tolerance(dtype);
         return sets;
       },
       [](const Tensors& in, int64_t) {
         return cat({fused_linear_gelu(in[0], in[1], in[2]), fused_linear_gelu(in[0], in[1], in[2], "tanh"),
                     fused_linear_gelu(in[0], in[1]), fused_linear_gelu(in[0], in[1], {}, "tanh")},
                    0);
       }},
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

#endif  // KILN_WITH_CUDA
