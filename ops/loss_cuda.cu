// CUDA nll_loss, matching ops/loss_cpu.cpp: the mean over the rows whose target is not
// ignore_index of -logp[i, target[i]], summed in double; NaN when no row counts. A thread per
// row gathers its one element; the mean and the bad-target report are ops/cuda/loss_mean.cuh's
// (deterministic, no host synchronisation: a bad target gives a NaN loss and a
// kiln::Error at the next synchronisation, Note [Device-side errors]).
#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "cuda/elementwise.cuh"
#include "cuda/loss_mean.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

inline constexpr int kNllThreads = 256;
/// Rows per block (so few rows need a single launch).
inline constexpr int64_t kNllRowsPerBlock = 8 * kNllThreads;

/// Block b sums the rows of its grid-stride share, then end_loss_block.
template <typename T>
__global__ void __launch_bounds__(kNllThreads)
    nll_loss_kernel(const T* __restrict__ logp, long long ignore_index, LossPartial* partials, LossOutput<T> o) {
  LossPartial p{0.0, 0, o.rows};
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < o.rows;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long t = o.target[i];
    if (t == ignore_index) continue;
    if (t < 0 || t >= o.classes) {
      if (i < p.bad) p.bad = i;
      continue;
    }
    p.sum -= static_cast<double>(widen(logp[i * o.classes + t]));
    ++p.count;
  }
  end_loss_block(p, partials, o);
}

/// The device-side error a bad target records (registered on first use).
uint32_t bad_target_kind() {
  static const uint32_t kind =
      cuda::register_device_error("nll_loss: target {0} is out of bounds for {1} classes (at row {2})");
  return kind;
}

void nll_loss_cuda(const Tensor& out, const Tensor& count, const Tensor& logp, const Tensor& target,
                   int64_t ignore_index) {
  const int64_t rows = logp.sizes()[0], classes = logp.sizes()[1];
  KILN_INTERNAL_ASSERT(logp.is_contiguous() && target.is_contiguous() && target.dtype() == DType::Int64 &&
                           target.numel() == rows && target.device() == logp.device(),
                       "nll_loss: the CUDA kernel expects contiguous [N, C] log-probabilities and [N] int64 targets on "
                       "one device");
  const uint32_t bad_target = bad_target_kind();
  const int device = out.device().index();
  cuda::DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(out);
  const int64_t blocks = std::clamp<int64_t>((rows + kNllRowsPerBlock - 1) / kNllRowsPerBlock, 1, kLossMaxBlocks);
  const Tensor scratch = blocks > 1 ? new_contiguous({3 * blocks}, DType::Int64, out.device(), "nll_loss") : Tensor();
  auto* partials = blocks > 1 ? static_cast<LossPartial*>(scratch.data_ptr()) : nullptr;
  dispatch_floating(logp.dtype(), "nll_loss", [&]<typename K>() {
    using T = device_t<K>;
    const LossOutput<T> o{static_cast<T*>(out.data_ptr()), static_cast<long long*>(count.data_ptr()),
                          static_cast<const int64_t*>(target.data_ptr()), rows, classes,
                          cuda::device_error_slot(device), bad_target};
    nll_loss_kernel<T><<<static_cast<unsigned int>(blocks), kNllThreads, 0, stream>>>(
        static_cast<const T*>(logp.data_ptr()), ignore_index, partials, o);
    CUDA_CHECK(cudaGetLastError());
    launch_loss_combine(partials, blocks, o, stream);
  });
}

}  // namespace

void register_loss_kernels() { dispatch::nll_loss_kernels.set(DeviceType::CUDA, &nll_loss_cuda); }

}  // namespace kiln::cuda_kernels
