// CPU layer norm: two passes per row (mean, then variance of the centred values, which is
// more accurate than E[x^2] - E[x]^2), accumulated in double. Large inputs split their rows
// over the OpenMP threads (bitwise identical results for any thread count).
#include <algorithm>
#include <cmath>

#include "../tensor/dtype_dispatch.h"
#include "cpu/parallel.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {
void layer_norm_cpu(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in, const Tensor& weight,
                    const Tensor& bias, double eps) {
  const int64_t rows = in.sizes()[0], n = in.sizes()[1];
  dispatch_floating(in.dtype(), "layer_norm", [&]<typename T>() {
    const T* x = static_cast<const T*>(in.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    const T* w = weight.defined() ? static_cast<const T*>(weight.data_ptr()) : nullptr;
    const T* b = bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr;
    float* mean_out = mean.data_ptr<float>();
    float* rstd_out = rstd.data_ptr<float>();
    // Rows split over the threads; each row's sums run in the same order whatever the count.
    const int64_t grain_rows = std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(n, 1));
    parallel_for(rows, grain_rows, [&](int64_t first_row, int64_t end_row) {
      for (int64_t r = first_row; r < end_row; ++r) {
        const T* xr = x + r * n;
        double m = 0;
        for (int64_t i = 0; i < n; ++i) m += static_cast<double>(static_cast<acc_t<T>>(xr[i]));
        m /= static_cast<double>(n);
        double var = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double c = static_cast<double>(static_cast<acc_t<T>>(xr[i])) - m;
          var += c * c;
        }
        var /= static_cast<double>(n);
        const double inv = 1.0 / std::sqrt(var + eps);
        mean_out[r] = static_cast<float>(m);
        rstd_out[r] = static_cast<float>(inv);
        for (int64_t i = 0; i < n; ++i) {
          double v = (static_cast<double>(static_cast<acc_t<T>>(xr[i])) - m) * inv;
          if (w) v *= static_cast<double>(static_cast<acc_t<T>>(w[i]));
          if (b) v += static_cast<double>(static_cast<acc_t<T>>(b[i]));
          o[r * n + i] = static_cast<T>(static_cast<acc_t<T>>(v));
        }
      }
    }, 1);
  });
}
}  // namespace

void register_layer_norm_kernels() { dispatch::layer_norm_kernels.set(DeviceType::CPU, &layer_norm_cpu); }

}  // namespace kiln::cpu
