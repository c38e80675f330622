// CPU nll_loss: gathers -logp[i, target[i]] over the rows that are not ignored and averages
// in double. An out-of-range target is an error, never a read outside the row.
#include <limits>

#include "../tensor/dtype_dispatch.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {
void nll_loss_cpu(const Tensor& out, const Tensor& logp, const Tensor& target, int64_t ignore_index) {
  const int64_t rows = logp.sizes()[0], classes = logp.sizes()[1];
  const int64_t* t = target.data_ptr<int64_t>();
  dispatch_floating(logp.dtype(), "nll_loss", [&]<typename T>() {
    const T* lp = static_cast<const T*>(logp.data_ptr());
    double total = 0;
    int64_t counted = 0;
    for (int64_t i = 0; i < rows; ++i) {
      if (t[i] == ignore_index) continue;
      KILN_CHECK(t[i] >= 0 && t[i] < classes, "nll_loss: target {} is out of bounds for {} classes (at row {})", t[i],
                 classes, i);
      total -= static_cast<double>(static_cast<acc_t<T>>(lp[i * classes + t[i]]));
      ++counted;
    }
    const double v = counted == 0 ? std::numeric_limits<double>::quiet_NaN() : total / static_cast<double>(counted);
    *static_cast<T*>(out.data_ptr()) = static_cast<T>(static_cast<acc_t<T>>(v));
  });
}
}  // namespace

void register_loss_kernels() { dispatch::nll_loss_kernels.set(DeviceType::CPU, &nll_loss_cpu); }

}  // namespace kiln::cpu
