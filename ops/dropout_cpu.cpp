// CPU dropout: element i is kept when the i-th Philox uniform is >= p.
#include "../tensor/dtype_dispatch.h"
#include "../tensor/philox.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {
void dropout_cpu(const Tensor& out, const Tensor& in, double p, PhiloxState state) {
  KILN_CHECK(state.graph_state == nullptr, "dropout: a CPU tensor cannot be used inside a CUDA graph capture");
  const int64_t n = in.numel();
  const float threshold = static_cast<float>(p);
  dispatch_floating(in.dtype(), "dropout", [&]<typename T>() {
    const T* x = static_cast<const T*>(in.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    const auto scale = static_cast<acc_t<T>>(p < 1.0 ? 1.0 / (1.0 - p) : 0.0);
    for (int64_t first = 0; first < n; first += 4) {
      const philox::Block blk = philox::block(state.seed, state.first_block + static_cast<uint64_t>(first / 4));
      for (int lane = 0; lane < 4 && first + lane < n; ++lane) {
        const bool keep = philox::uniform_float(blk.x[lane]) >= threshold;
        o[first + lane] = keep ? static_cast<T>(static_cast<acc_t<T>>(x[first + lane]) * scale) : T(0.0f);
      }
    }
  });
}
}  // namespace

void register_dropout_kernels() { dispatch::dropout_kernels.set(DeviceType::CPU, &dropout_cpu); }

}  // namespace kiln::cpu
