// CPU bodies of the indexing ops: the index range check, gather and scatter, each one walk
// (ops/cpu/loops.h) over three operands. Walks visit elements in row-major order, so the
// check reports the first bad index and scatter_ keeps the last of duplicate indices.
// Integer scatter_add wraps on overflow through unsigned arithmetic (no undefined
// behaviour); 16-bit floats add in float and round once per add, as PyTorch's CPU does.
#include <type_traits>

#include "../tensor/dtype_dispatch.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {

bool in_range(int64_t i, int64_t size) { return static_cast<uint64_t>(i) < static_cast<uint64_t>(size); }

IndexCheck index_check_cpu(const Tensor& index, int64_t size) {
  IndexCheck bad;
  int64_t position = 0;  // flat position of the run's first element
  walk<1>(index.sizes(), {operand(index)}, [&](char** p, const int64_t* s, int64_t n) {
    if (bad.position >= 0) return;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = *reinterpret_cast<const int64_t*>(p[0] + i * s[0]);
      if (!in_range(v, size)) {
        bad = {position + i, v};
        return;
      }
    }
    position += n;
  });
  return bad;
}

void gather_cpu(const Tensor& out, const Tensor& src, const Tensor& index, int64_t src_dim_stride, int64_t dim_size) {
  dispatch_all(out.dtype(), "gather", [&]<typename T>() {
    const int64_t step = src_dim_stride * static_cast<int64_t>(sizeof(T));
    walk<3>(out.sizes(), {operand(out), operand(src), operand(index)}, [&](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t j = *reinterpret_cast<const int64_t*>(p[2] + i * s[2]);
        *reinterpret_cast<T*>(p[0] + i * s[0]) =
            in_range(j, dim_size) ? *reinterpret_cast<const T*>(p[1] + i * s[1] + j * step) : T{};
      }
    });
  });
}

// dst + v without undefined behaviour: integers wrap, 16-bit floats add in float.
template <typename T>
T add(T dst, T v) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(dst) + static_cast<U>(v)));
  } else {
    return static_cast<T>(static_cast<acc_t<T>>(dst) + static_cast<acc_t<T>>(v));
  }
}

template <typename T, ScatterMode Mode>
void scatter_typed(const Tensor& self, const Tensor& src, const Tensor& index, int64_t self_dim_stride,
                   int64_t dim_size) {
  const int64_t step = self_dim_stride * static_cast<int64_t>(sizeof(T));
  walk<3>(index.sizes(), {operand(self), operand(src), operand(index)}, [&](char** p, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = *reinterpret_cast<const int64_t*>(p[2] + i * s[2]);
      if (!in_range(j, dim_size)) continue;
      T* dst = reinterpret_cast<T*>(p[0] + i * s[0] + j * step);
      const T v = *reinterpret_cast<const T*>(p[1] + i * s[1]);
      if constexpr (Mode == ScatterMode::Add) *dst = add(*dst, v);
      else *dst = v;
    }
  });
}

void scatter_cpu(ScatterMode mode, const Tensor& self, const Tensor& src, const Tensor& index, int64_t self_dim_stride,
                 int64_t dim_size) {
  if (mode == ScatterMode::Assign) {
    dispatch_all(self.dtype(), "scatter", [&]<typename T>() {
      scatter_typed<T, ScatterMode::Assign>(self, src, index, self_dim_stride, dim_size);
    });
  } else {
    dispatch_numeric(self.dtype(), "scatter_add", [&]<typename T>() {
      scatter_typed<T, ScatterMode::Add>(self, src, index, self_dim_stride, dim_size);
    });
  }
}

}  // namespace

void register_indexing_kernels() {
  dispatch::index_check_kernels.set(DeviceType::CPU, &index_check_cpu);
  dispatch::gather_kernels.set(DeviceType::CPU, &gather_cpu);
  dispatch::scatter_kernels.set(DeviceType::CPU, &scatter_cpu);
}

}  // namespace kiln::cpu
