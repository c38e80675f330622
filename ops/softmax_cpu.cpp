// CPU softmax: for each position of the other dims, three passes along `dim` (max, sum of
// exponentials, write), accumulating in double so float32 and 16-bit inputs stay accurate.
// Large inputs split their rows over the OpenMP threads; each row is reduced in the same order
// whatever the thread count, so results are bitwise identical for any.
#include <algorithm>
#include <cmath>
#include <limits>

#include "../tensor/dtype_dispatch.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {
void softmax_cpu(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  // Walk every dim but `dim` (its size set to 1); each step handles one row along `dim`.
  Shape outer = in.sizes();
  int64_t n = 1, in_step = 0, out_step = 0;
  if (in.dim() > 0) {
    n = outer[dim];
    outer[dim] = 1;
    in_step = in.strides()[dim];
    out_step = out.strides()[dim];
  }
  if (n == 0) return;
  dispatch_floating(in.dtype(), "softmax", [&]<typename T>() {
    // Rows split over the threads (a row's passes are the same whichever thread runs it).
    const int64_t grain_rows = std::max<int64_t>(1, kGrainTranscendental / n);
    parallel_walk<2>(outer, {operand(out), operand(in)}, grain_rows, [&](char** p, const int64_t* s, int64_t runs) {
      for (int64_t r = 0; r < runs; ++r) {
        T* o = reinterpret_cast<T*>(p[0] + r * s[0]);
        const T* x = reinterpret_cast<const T*>(p[1] + r * s[1]);
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < n; ++i) m = std::fmax(m, static_cast<double>(static_cast<acc_t<T>>(x[i * in_step])));
        if (std::isinf(m) && m < 0) m = 0;  // an all -inf row: exp(x - 0) = 0 everywhere
        double total = 0;
        for (int64_t i = 0; i < n; ++i) total += std::exp(static_cast<double>(static_cast<acc_t<T>>(x[i * in_step])) - m);
        const double log_total = std::log(total);
        for (int64_t i = 0; i < n; ++i) {
          const double shifted = static_cast<double>(static_cast<acc_t<T>>(x[i * in_step])) - m;
          const double v = log ? shifted - log_total : std::exp(shifted) / total;
          o[i * out_step] = static_cast<T>(static_cast<acc_t<T>>(v));
        }
      }
    });
  });
}
}  // namespace

void register_softmax_kernels() { dispatch::softmax_kernels.set(DeviceType::CPU, &softmax_cpu); }

}  // namespace kiln::cpu
