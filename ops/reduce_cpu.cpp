// CPU reductions. One prepared walk over the reduced block is reused for every output
// element. Sums accumulate in double (floats) or int64 (integers, bool), so a float32 sum of
// millions of elements stays accurate; max/min propagate NaN; arg-reductions return the
// first index of the extreme value, treating NaN as the extreme, as PyTorch does.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "../tensor/convert.h"
#include "../tensor/dtype_dispatch.h"
#include "../tensor/shape.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "kernels.h"
#include "wrapping.h"

namespace kiln::cpu {

namespace {

template <typename A>
bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) return std::isnan(v);
  else return false;
}

// Reduces the block at `base` (laid out as `block`) to one value, written to `out`.
template <typename T>
struct BlockReducer {
  using A = acc_t<T>;
  using Sum = std::conditional_t<std::is_floating_point_v<A>, double, int64_t>;

  ReduceOp op;
  const Walker<1>& block;
  int64_t block_numel;

  void operator()(char* base, char* out) const {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Mean: {
        Sum acc = 0;
        // Integer sums wrap modulo 2^64 (PyTorch's result) rather than overflow.
        block.run({base}, [&](char** p, const int64_t* s, int64_t n) {
          if (s[0] == static_cast<int64_t>(sizeof(T))) {
            const T* v = reinterpret_cast<const T*>(p[0]);
            for (int64_t i = 0; i < n; ++i) acc = wrapping_add(acc, static_cast<Sum>(static_cast<A>(v[i])));
          } else {
            for (int64_t i = 0; i < n; ++i)
              acc = wrapping_add(acc, static_cast<Sum>(static_cast<A>(*reinterpret_cast<const T*>(p[0] + i * s[0]))));
          }
        });
        if (op == ReduceOp::Sum) {
          if constexpr (std::is_floating_point_v<A>) *reinterpret_cast<T*>(out) = static_cast<T>(static_cast<A>(acc));
          else *reinterpret_cast<int64_t*>(out) = acc;
        } else if constexpr (std::is_floating_point_v<A>) {
          const double m = block_numel == 0 ? std::numeric_limits<double>::quiet_NaN()
                                            : static_cast<double>(acc) / static_cast<double>(block_numel);
          *reinterpret_cast<T*>(out) = static_cast<T>(static_cast<A>(m));
        }
        return;
      }
      case ReduceOp::Max:
      case ReduceOp::Min: {
        const bool want_max = op == ReduceOp::Max;
        bool first = true;
        A best{};
        block.run({base}, [&](char** p, const int64_t* s, int64_t n) {
          for (int64_t i = 0; i < n; ++i) {
            const A v = static_cast<A>(*reinterpret_cast<const T*>(p[0] + i * s[0]));
            if (first || is_nan(v) || (!is_nan(best) && (want_max ? v > best : v < best))) best = v;
            first = false;
          }
        });
        *reinterpret_cast<T*>(out) = static_cast<T>(best);
        return;
      }
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin: {
        const bool want_max = op == ReduceOp::ArgMax;
        int64_t index = 0, best_index = 0;
        A best{};
        block.run({base}, [&](char** p, const int64_t* s, int64_t n) {
          for (int64_t i = 0; i < n; ++i, ++index) {
            const A v = static_cast<A>(*reinterpret_cast<const T*>(p[0] + i * s[0]));
            if (index == 0 || (!is_nan(best) && (is_nan(v) || (want_max ? v > best : v < best)))) {
              best = v;
              best_index = index;
            }
          }
        });
        *reinterpret_cast<int64_t*>(out) = best_index;
        return;
      }
    }
  }
};

// Sum (or mean) over outer dims into one contiguous kept dim of n outputs, e.g. a bias
// gradient (the sum over dim 0 of [B, N]): whole rows are added into one double accumulator per
// output, the rows in the block walk's order, which is each output's own order in BlockReducer,
// so the bits are the same, with one vectorisable pass over the input instead of n strided ones.
template <typename T>
void sum_columns(bool mean, const Tensor& out, char* base, int64_t n, const Walker<1>& block, int64_t block_numel) {
  using A = acc_t<T>;
  std::vector<double> acc(static_cast<size_t>(n), 0.0);
  double* a = acc.data();
  block.run({base}, [&](char** p, const int64_t* s, int64_t rows) {
    for (int64_t i = 0; i < rows; ++i) {
      const T* row = reinterpret_cast<const T*>(p[0] + i * s[0]);
      for (int64_t j = 0; j < n; ++j) a[j] += static_cast<double>(static_cast<A>(row[j]));
    }
  });
  T* o = static_cast<T*>(out.data_ptr());
  for (int64_t j = 0; j < n; ++j) {
    const double v = !mean                ? a[j]
                     : block_numel == 0 ? std::numeric_limits<double>::quiet_NaN()
                                        : a[j] / static_cast<double>(block_numel);
    o[j] = static_cast<T>(static_cast<A>(v));
  }
}

void reduce_cpu(ReduceOp op, const Tensor& out, const Tensor& in, int64_t reduced_dims) {
  const int64_t kept = in.dim() - reduced_dims;
  const WalkOperand whole = operand(in);
  const Shape kept_sizes(in.sizes().begin(), in.sizes().begin() + kept);
  const Shape block_sizes(in.sizes().begin() + kept, in.sizes().end());
  const DimValues kept_strides = leading(whole.byte_strides, static_cast<size_t>(kept));
  const DimValues block_strides = trailing(whole.byte_strides, static_cast<size_t>(kept));
  const Walker<1> block(block_sizes, {&block_strides});
  const int64_t block_numel = shape_numel(block_sizes);

  dispatch_all(in.dtype(), "reduce", [&]<typename T>() {
    if constexpr (std::is_floating_point_v<acc_t<T>>) {
      if ((op == ReduceOp::Sum || op == ReduceOp::Mean) && kept == 1 && kept_sizes[0] >= 8 &&
          kept_strides[0] == static_cast<int64_t>(sizeof(T)) && out.is_contiguous()) {
        sum_columns<T>(op == ReduceOp::Mean, out, whole.data, kept_sizes[0], block, block_numel);
        return;
      }
    }
    const BlockReducer<T> reducer{op, block, block_numel};
    const WalkOperand out_op = operand(out);
    walk<2>(kept_sizes, {out_op, WalkOperand{whole.data, kept_strides}}, [&](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) reducer(p[1] + i * s[1], p[0] + i * s[0]);
    });
  });
}

}  // namespace

void register_reduce_kernels() { dispatch::reduce_kernels.set(DeviceType::CPU, &reduce_cpu); }

}  // namespace kiln::cpu
