// The CPU elementwise engine: walks N operands of one shape, each with its own strides, and
// hands the kernel 1-D runs along the innermost dimension. Dims that are contiguous across
// every operand are merged first, so a contiguous tensor becomes a single run and the typed
// inner loop vectorises; transposed, sliced and expanded (stride 0) operands take the same
// path with other strides.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "../../tensor/tensor.h"
#include "../collapse.h"

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
  }

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

 private:
  bool empty_ = false;
  DimValues dims_;
  SmallVector<std::array<int64_t, N>, kInlineDims> steps_;
};

/// Walks `sizes` once over the given operands (see Walker::run).
template <size_t N, typename Sizes, typename Run>
void walk(const Sizes& sizes, const std::array<WalkOperand, N>& ops, Run&& run) {
  std::array<const DimValues*, N> strides;
  std::array<char*, N> ptrs;
  for (size_t k = 0; k < N; ++k) {
    strides[k] = &ops[k].byte_strides;
    ptrs[k] = ops[k].data;
  }
  Walker<N>(sizes, strides).run(ptrs, std::forward<Run>(run));
}

namespace detail {
template <typename Out, typename... In, typename F, size_t... I, typename... Ts>
void map_impl(const Tensor& out, F& f, std::index_sequence<I...>, const Ts&... ins) {
  constexpr size_t N = 1 + sizeof...(In);
  const std::array<WalkOperand, N> ops{operand(out), operand(ins)...};
  walk<N>(out.sizes(), ops, [&](char** p, const int64_t* s, int64_t n) {
    const bool dense = s[0] == static_cast<int64_t>(sizeof(Out)) &&
                       ((s[I + 1] == static_cast<int64_t>(sizeof(In))) && ...);
    if (dense) {
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
template <typename Out, typename... In, typename F, typename... Ts>
void map(const Tensor& out, F&& f, const Ts&... ins) {
  static_assert(sizeof...(In) == sizeof...(Ts), "one element type per input tensor");
  detail::map_impl<Out, In...>(out, f, std::index_sequence_for<In...>{}, ins...);
}

}  // namespace kiln::cpu
