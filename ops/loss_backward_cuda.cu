// CUDA gradients of cross_entropy and nll_loss (mean reduction) wrt their [rows, C] input,
// matching ops/loss_cpu.cpp: one kernel each, one read of the logits (cross_entropy) and
// one write of the gradient, rows split over groups of lanes as in the forward
// (ops/cuda/class_rows.cuh), 16-byte loads and stores where the two rows share a phase.
//   cross_entropy: grad[i, c] = grad_out * (exp(x[i, c] - lse[i]) - (c == t[i])) / count
//   nll_loss:      grad[i, c] = -grad_out / count where c == t[i], else 0
// Ignored rows get 0. grad_out and count are read on the device, so nothing waits for the
// GPU. A target outside [0, C) is never used as an index: its row gets NaN and a
// device-side error is recorded (Note [Device-side errors], core/device_error.h); with
// several such rows the first to record wins, which need not be the lowest row.
#include <limits>

#include "../tensor/dtype_dispatch.h"
#include "cuda/class_rows.cuh"
#include "cuda/device_error.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

template <typename T>
struct LossBackwardArgs {
  const T* logits;             // [rows, C]; cross_entropy only
  T* grad;                     // [rows, C]
  const int64_t* target;       // [rows]
  const acc_t<T>* lse;         // [rows]; cross_entropy only
  const T* grad_out;           // 0-dim
  const long long* count;      // 0-dim
  long long rows, classes, ignore_index;
  int lanes;                   // per row (blockDim.x: a block per row)
  bool vec;                    // logits and grad rows share their 16-byte phase
  cuda::DeviceErrorSlot slot;
  uint32_t kind;               // the registered "target out of bounds" message
};

/// kSoftmax: cross_entropy's gradient, else nll_loss's.
template <typename T, bool kSoftmax>
__global__ void __launch_bounds__(kRowBlockMax) loss_backward_kernel(LossBackwardArgs<T> a) {
  using A = acc_t<T>;
  const int lane = static_cast<int>(threadIdx.x) % a.lanes;
  const int64_t per_block = static_cast<int64_t>(blockDim.x) / a.lanes;
  const int64_t group = static_cast<int64_t>(threadIdx.x) / a.lanes;
  const int64_t classes = a.classes;
  // The scale of every counted row; with no counted row it is never used.
  const A scale = widen(*a.grad_out) / static_cast<A>(*a.count);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * per_block + group; row < a.rows;
       row += static_cast<int64_t>(gridDim.x) * per_block) {
    const long long t = a.target[row];
    T* out = a.grad + row * classes;
    const T* in = kSoftmax ? a.logits + row * classes : out;  // nll_loss reads nothing
    if (t == a.ignore_index) {
      map_row_elements<false>(in, out, classes, lane, a.lanes, a.vec, [](A, int64_t) { return A(0); });
    } else if (t < 0 || t >= classes) {
      if (lane == 0) report_device_error(a.slot, a.kind, t, classes, row);
      map_row_elements<false>(in, out, classes, lane, a.lanes, a.vec,
                              [](A, int64_t) { return std::numeric_limits<A>::quiet_NaN(); });
    } else if constexpr (kSoftmax) {
      const A m = a.lse[row];
      map_row_elements<true>(in, out, classes, lane, a.lanes, a.vec,
                             [=](A x, int64_t c) { return scale * (acc_exp(x - m) - (c == t ? A(1) : A(0))); });
    } else {
      map_row_elements<false>(in, out, classes, lane, a.lanes, a.vec,
                              [=](A, int64_t c) { return c == t ? -scale : A(0); });
    }
  }
}

template <bool kSoftmax>
void launch_loss_backward(const char* op, uint32_t kind, const Tensor& grad, const Tensor& grad_out,
                          const Tensor& logits, const Tensor& target, const Tensor& lse, const Tensor& count,
                          int64_t ignore_index) {
  const int64_t rows = grad.sizes()[0], classes = grad.sizes()[1];
  KILN_INTERNAL_ASSERT(grad.is_contiguous() && target.is_contiguous() && target.dtype() == DType::Int64 &&
                           target.numel() == rows && (!kSoftmax || (logits.is_contiguous() && lse.numel() == rows)),
                       "{}: the CUDA kernel expects contiguous [N, C] rows and [N] int64 targets", op);
  if (grad.numel() == 0) return;
  const int device = grad.device().index();
  cuda::DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(grad);
  const ClassRowsLaunch l = class_rows_launch(rows, classes, element_size(grad.dtype()), int64_t{1} << 20);
  bool vec = true;
  if constexpr (kSoftmax)
    vec = (reinterpret_cast<uintptr_t>(logits.data_ptr()) - reinterpret_cast<uintptr_t>(grad.data_ptr())) % 16 == 0;
  dispatch_floating(grad.dtype(), op, [&]<typename K>() {
    using T = device_t<K>;
    const LossBackwardArgs<T> a{kSoftmax ? static_cast<const T*>(logits.data_ptr()) : nullptr,
                                static_cast<T*>(grad.data_ptr()),
                                static_cast<const int64_t*>(target.data_ptr()),
                                kSoftmax ? static_cast<const acc_t<T>*>(lse.data_ptr()) : nullptr,
                                static_cast<const T*>(grad_out.data_ptr()),
                                static_cast<const long long*>(count.data_ptr()),
                                rows,
                                classes,
                                ignore_index,
                                l.lanes == 0 ? l.threads : l.lanes,
                                vec,
                                cuda::device_error_slot(device),
                                kind};
    loss_backward_kernel<T, kSoftmax><<<l.blocks, l.threads, 0, stream>>>(a);
    CUDA_CHECK(cudaGetLastError());
  });
}

void cross_entropy_backward_cuda(const Tensor& grad, const Tensor& grad_out, const Tensor& logits,
                                 const Tensor& target, const Tensor& lse, const Tensor& count, int64_t ignore_index) {
  static const uint32_t kBadTarget =
      cuda::register_device_error("cross_entropy_backward: target {0} is out of bounds for {1} classes (at row {2})");
  launch_loss_backward<true>("cross_entropy_backward", kBadTarget, grad, grad_out, logits, target, lse, count,
                             ignore_index);
}

void nll_loss_backward_cuda(const Tensor& grad, const Tensor& grad_out, const Tensor& target, const Tensor& count,
                            int64_t ignore_index) {
  static const uint32_t kBadTarget =
      cuda::register_device_error("nll_loss_backward: target {0} is out of bounds for {1} classes (at row {2})");
  launch_loss_backward<false>("nll_loss_backward", kBadTarget, grad, grad_out, Tensor(), target, Tensor(), count,
                              ignore_index);
}

}  // namespace

void register_loss_backward_kernels() {
  dispatch::cross_entropy_backward_kernels.set(DeviceType::CUDA, &cross_entropy_backward_cuda);
  dispatch::nll_loss_backward_kernels.set(DeviceType::CUDA, &nll_loss_backward_cuda);
}

}  // namespace kiln::cuda_kernels
