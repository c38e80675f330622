// The CPU elementwise engine: walks N operands of one shape, each with its own strides, and
// hands the kernel 1-D runs along the innermost dimension. Dims that are contiguous across
// every operand are merged first, so a contiguous tensor becomes a single run and the typed
// inner loop vectorises; transposed, sliced and expanded (stride 0) operands take the same
// path with other strides. Large maps are split over the OpenMP threads (cpu/parallel.h):
// each element is computed by the same code whichever thread and run holds it, so results
// are bitwise identical for any thread count.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "../../tensor/tensor.h"
#include "../collapse.h"
#include "parallel.h"

namespace kiln::cpu {

/// One operand of a walk: base address and strides in bytes, one per dim of the walk shape.
struct WalkOperand {
  char* data;
  DimValues byte_strides;
};

/// The walk operand for `t` viewed at its own shape.
inline WalkOperand operand(const Tensor& t) {
  WalkOperand op{static_cast<char*>(t.data_ptr()), {}};
  for (int64_t s : t.strides()) op.byte_strides.push_back(s * static_cast<int64_t>(t.element_size()));
  return op;
}

/// The first `count` values of `strides` (the outer dims of a walk over part of a shape).
inline DimValues leading(const DimValues& strides, size_t count) {
  DimValues out;
  for (size_t i = 0; i < count; ++i) out.push_back(strides[i]);
  return out;
}
/// The values of `strides` from dim `first` on.
inline DimValues trailing(const DimValues& strides, size_t first) {
  DimValues out;
  for (size_t i = first; i < strides.size(); ++i) out.push_back(strides[i]);
  return out;
}

/// A prepared walk over one shape for N operands: construction merges dims (size-1 dims
/// dropped, dims that are contiguous across every operand fused), so walking the same
/// layout many times (one reduction block per output element) pays for it once.
template <size_t N>
class Walker {
 public:
  /// Prepares a walk over `sizes` with each operand's byte strides.
  template <typename Sizes>
  Walker(const Sizes& sizes, const std::array<const DimValues*, N>& byte_strides) {
    CollapsedDims<N> c = collapse_dims<N>(sizes, byte_strides);
    empty_ = c.empty;
    dims_ = std::move(c.sizes);
    steps_ = std::move(c.strides);
    numel_ = empty_ ? 0 : 1;
    for (int64_t d : dims_) numel_ *= d;
  }

  /// The number of elements the walk visits.
  int64_t numel() const { return numel_; }

  /// Calls `run(ptrs, strides, n)` for runs of `n` elements covering every index: ptrs[k]
  /// points at operand k's first element of the run, strides[k] is its step in bytes. A
  /// 0-dim shape gives one run of one element; a shape with a zero size gives none.
  template <typename Run>
  void run(std::array<char*, N> ptrs, Run&& run) const {
    if (empty_) return;
    if (dims_.empty()) {
      const std::array<int64_t, N> zero{};
      run(ptrs.data(), zero.data(), int64_t{1});
      return;
    }
    const size_t inner = dims_.size() - 1;
    const int64_t n = dims_[inner];
    const std::array<int64_t, N>& inner_steps = steps_[inner];
    if (inner == 0) {
      run(ptrs.data(), inner_steps.data(), n);
      return;
    }
    // Odometer over the outer dims, moving each operand's pointer incrementally.
    DimValues counter_store(inner, 0);
    int64_t* counter = counter_store.data();
    while (true) {
      run(ptrs.data(), inner_steps.data(), n);
      size_t d = inner;
      while (true) {
        if (d == 0) return;
        --d;
        if (++counter[d] < dims_[d]) {
          for (size_t k = 0; k < N; ++k) ptrs[k] += steps_[d][k];
          break;
        }
        for (size_t k = 0; k < N; ++k) ptrs[k] -= steps_[d][k] * (dims_[d] - 1);
        counter[d] = 0;
      }
    }
  }

  /// Like run(), over the elements [begin, end) of the walk order only (0 <= begin <= end <=
  /// numel()): the runs are the same, cut at both ends. Several calls over disjoint ranges
  /// visit each element once, which is how a walk is split over threads.
  template <typename Run>
  void run_range(std::array<char*, N> ptrs, int64_t begin, int64_t end, Run&& run) const {
    if (empty_ || begin >= end) return;
    if (dims_.empty()) {
      const std::array<int64_t, N> zero{};
      run(ptrs.data(), zero.data(), int64_t{1});
      return;
    }
    const size_t inner = dims_.size() - 1;
    const int64_t n = dims_[inner];
    const std::array<int64_t, N>& inner_steps = steps_[inner];
    // Start the odometer at the run holding `begin`, `offset` elements into it.
    int64_t offset = begin % n;
    int64_t rest = begin / n;
    DimValues counter_store(inner, 0);
    int64_t* counter = counter_store.data();
    for (size_t d = inner; d-- > 0;) {
      counter[d] = rest % dims_[d];
      rest /= dims_[d];
      for (size_t k = 0; k < N; ++k) ptrs[k] += counter[d] * steps_[d][k];
    }
    for (size_t k = 0; k < N; ++k) ptrs[k] += offset * inner_steps[k];
    int64_t left = end - begin;
    while (true) {
      const int64_t len = std::min(n - offset, left);
      run(ptrs.data(), inner_steps.data(), len);
      left -= len;
      if (left == 0) return;
      for (size_t k = 0; k < N; ++k) ptrs[k] -= offset * inner_steps[k];
      offset = 0;
      size_t d = inner;
      while (true) {
        --d;  // left > 0, so some outer dim has a next position
        if (++counter[d] < dims_[d]) {
          for (size_t k = 0; k < N; ++k) ptrs[k] += steps_[d][k];
          break;
        }
        for (size_t k = 0; k < N; ++k) ptrs[k] -= steps_[d][k] * (dims_[d] - 1);
        counter[d] = 0;
      }
    }
  }

 private:
  bool empty_ = false;
  int64_t numel_ = 0;
  DimValues dims_;
  SmallVector<std::array<int64_t, N>, kInlineDims> steps_;
};

/// Walks `sizes` once over the given operands (see Walker::run).
namespace detail {
/// A walk's operands in the form Walker takes: each operand's byte strides and base pointer.
template <size_t N>
struct WalkArgs {
  std::array<const DimValues*, N> strides;
  std::array<char*, N> ptrs;
};
template <size_t N>
WalkArgs<N> walk_args(const std::array<WalkOperand, N>& ops) {
  WalkArgs<N> a;
  for (size_t k = 0; k < N; ++k) {
    a.strides[k] = &ops[k].byte_strides;
    a.ptrs[k] = ops[k].data;
  }
  return a;
}
/// True when a run's byte steps `s` (out first, then the inputs) are each operand's element
/// size: the run is dense in every operand.
template <typename Out, typename... In, size_t... I>
bool dense_run(const int64_t* s, std::index_sequence<I...>) {
  return s[0] == static_cast<int64_t>(sizeof(Out)) && ((s[I + 1] == static_cast<int64_t>(sizeof(In))) && ...);
}
}  // namespace detail

template <size_t N, typename Sizes, typename Run>
void walk(const Sizes& sizes, const std::array<WalkOperand, N>& ops, Run&& run) {
  const detail::WalkArgs<N> a = detail::walk_args(ops);
  Walker<N>(sizes, a.strides).run(a.ptrs, std::forward<Run>(run));
}

/// Walks `sizes` over the given operands like walk(), split over the OpenMP threads when it
/// has at least 2 * grain elements (cpu/parallel.h): `run` is called from several threads at
/// once, on disjoint runs, and must not throw. On one thread it is walk()'s single pass.
template <size_t N, typename Sizes, typename Run>
void parallel_walk(const Sizes& sizes, const std::array<WalkOperand, N>& ops, int64_t grain, Run&& run) {
  const detail::WalkArgs<N> a = detail::walk_args(ops);
  const Walker<N> walker(sizes, a.strides);
  if (parallel_chunks(walker.numel(), grain) <= 1) {
    walker.run(a.ptrs, run);
    return;
  }
  parallel_for(walker.numel(), grain, [&](int64_t begin, int64_t end) { walker.run_range(a.ptrs, begin, end, run); });
}

namespace detail {
template <typename Out, typename... In, typename F, size_t... I, typename... Ts>
void map_impl(const Tensor& out, F& f, int64_t grain, std::index_sequence<I...>, const Ts&... ins) {
  constexpr size_t N = 1 + sizeof...(In);
  const std::array<WalkOperand, N> ops{operand(out), operand(ins)...};
  parallel_walk<N>(out.sizes(), ops, grain, [&](char** p, const int64_t* s, int64_t n) {
    if (dense_run<Out, In...>(s, std::index_sequence<I...>{})) {
      Out* o = reinterpret_cast<Out*>(p[0]);
      for (int64_t i = 0; i < n; ++i) o[i] = f(reinterpret_cast<const In*>(p[I + 1])[i]...);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const In*>(p[I + 1] + i * s[I + 1])...);
    }
  });
}
}  // namespace detail

/// Elementwise map out[i] = f(in_0[i], ..., in_{M-1}[i]) over tensors of out's shape, with
/// explicit element types: map<float, float, float>(out, f, a, b). Each input must already
/// have out's shape (expand first); the dense case is a plain indexed loop that vectorises.
/// Maps of at least 2 * kGrainCheap elements run on several threads; f must not throw.
template <typename Out, typename... In, typename F, typename... Ts>
void map(const Tensor& out, F&& f, const Ts&... ins) {
  static_assert(sizeof...(In) == sizeof...(Ts), "one element type per input tensor");
  detail::map_impl<Out, In...>(out, f, kGrainCheap, std::index_sequence_for<In...>{}, ins...);
}

/// Elements gathered per call of a block function from strided runs (map_blocks).
inline constexpr int64_t kGatherBlock = 256;

namespace detail {
template <typename Out, typename... In, typename B, size_t... I, typename... Ts>
void map_blocks_impl(const Tensor& out, B& block, int64_t grain, std::index_sequence<I...>, const Ts&... ins) {
  constexpr size_t N = 1 + sizeof...(In);
  const std::array<WalkOperand, N> ops{operand(out), operand(ins)...};
  parallel_walk<N>(out.sizes(), ops, grain, [&](char** p, const int64_t* s, int64_t n) {
    if (dense_run<Out, In...>(s, std::index_sequence<I...>{})) {
      block(reinterpret_cast<Out*>(p[0]), reinterpret_cast<const In*>(p[I + 1])..., n);
      return;
    }
    // Gather a piece of the strided run into dense buffers, compute it, scatter the result.
    std::tuple<std::array<In, kGatherBlock>...> in_buf;
    std::array<Out, kGatherBlock> out_buf;
    for (int64_t first = 0; first < n; first += kGatherBlock) {
      const int64_t m = std::min(kGatherBlock, n - first);
      ((void)[&] {
        for (int64_t i = 0; i < m; ++i)
          std::get<I>(in_buf)[i] = *reinterpret_cast<const In*>(p[I + 1] + (first + i) * s[I + 1]);
      }(), ...);
      block(out_buf.data(), std::get<I>(in_buf).data()..., m);
      for (int64_t i = 0; i < m; ++i) *reinterpret_cast<Out*>(p[0] + (first + i) * s[0]) = out_buf[i];
    }
  });
}
}  // namespace detail

/// Elementwise map computed a block at a time: `block(out, in_0, ..., n)` gets dense arrays
/// of n elements (a dense run of the operands in place, or a strided run gathered into
/// buffers of at most kGatherBlock elements and scattered back), so a vectorised formula
/// (cpu/vec_math.h) sees every element in contiguous memory whatever the layout. Maps of at
/// least 2 * grain elements run on several threads; `block` must not throw.
template <typename Out, typename... In, typename B, typename... Ts>
void map_blocks(const Tensor& out, B&& block, int64_t grain, const Ts&... ins) {
  static_assert(sizeof...(In) == sizeof...(Ts), "one element type per input tensor");
  detail::map_blocks_impl<Out, In...>(out, block, grain, std::index_sequence_for<In...>{}, ins...);
}

}  // namespace kiln::cpu
