// CPU kernels of the factories: fill, arange and the Philox random fills.
#include <cmath>

#include "../tensor/convert.h"
#include "../tensor/dtype_dispatch.h"
#include "../tensor/philox.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {

void fill_cpu(const Tensor& out, const Scalar& value) {
  dispatch_all(out.dtype(), "fill", [&]<typename T>() {
    const T v = value.to<T>();
    walk<1>(out.sizes(), {operand(out)}, [&](char** p, const int64_t* s, int64_t n) {
      if (s[0] == static_cast<int64_t>(sizeof(T))) {
        T* o = reinterpret_cast<T*>(p[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
      }
    });
  });
}

void arange_cpu(const Tensor& out, double start, double step) {
  dispatch_numeric(out.dtype(), "arange", [&]<typename T>() {
    T* o = out.data_ptr<T>();
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
      const double v = start + static_cast<double>(i) * step;
      // Through int64, as PyTorch computes integer aranges, then wrapped to T: no undefined
      // double -> int32 cast past int32's range.
      if constexpr (std::is_integral_v<T>) o[i] = static_cast<T>(convert<int64_t>(v));
      else o[i] = static_cast<T>(static_cast<acc_t<T>>(v));
    }
  });
}

void random_cpu(RandomDist dist, const Tensor& out, double a, double b, PhiloxState state) {
  KILN_CHECK(state.graph_state == nullptr, "random: a CPU tensor cannot be filled inside a CUDA graph capture");
  dispatch_floating(out.dtype(), "random", [&]<typename T>() {
    T* o = out.data_ptr<T>();
    const int64_t n = out.numel();
    const int per = philox::per_block(static_cast<int>(sizeof(T)));
    const int digits = significand_digits(out.dtype());
    const T from = static_cast<T>(static_cast<acc_t<T>>(a));
    for (int64_t first = 0; first < n; first += per) {
      const philox::Block blk = philox::block(state.seed, state.first_block + static_cast<uint64_t>(first / per));
      for (int lane = 0; lane < per && first + lane < n; ++lane) {
        if (dist == RandomDist::Uniform) {
          const T v = static_cast<T>(static_cast<acc_t<T>>(a + (b - a) * philox::uniform(blk, lane, per, digits)));
          // Rounding a + (b - a) * u to T can land on b, which [a, b) excludes.
          o[first + lane] = (b > a && static_cast<double>(static_cast<acc_t<T>>(v)) >= b) ? from : v;
        } else {
          o[first + lane] = static_cast<T>(static_cast<acc_t<T>>(a + b * philox::normal(blk, lane, per)));
        }
      }
    }
  });
}

}  // namespace

void register_factory_kernels() {
  dispatch::fill_kernels.set(DeviceType::CPU, &fill_cpu);
  dispatch::arange_kernels.set(DeviceType::CPU, &arange_cpu);
  dispatch::random_kernels.set(DeviceType::CPU, &random_cpu);
}

}  // namespace kiln::cpu
