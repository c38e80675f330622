// Cross-device copies through cudaMemcpyAsync / cudaMemcpyPeerAsync on the current stream.
// A copy to the host waits for its stream, so to(Device::cpu()) returns data the caller
// can read, as PyTorch's non-blocking=false copies do. Host memory is pageable: the CUDA
// driver stages it through pinned buffers itself.
#include "transfer.h"

#include "../core/stream.h"

#ifdef KILN_WITH_CUDA
#include "../core/cuda_guard.h"
#endif

namespace kiln::detail {

void copy_between_devices(const Tensor& dst, const Tensor& src) {
  KILN_INTERNAL_ASSERT(dst.is_contiguous() && src.is_contiguous() && dst.dtype() == src.dtype() &&
                       dst.numel() == src.numel() && dst.device() != src.device());
#ifdef KILN_WITH_CUDA
  const size_t bytes = dst.nbytes();
  if (bytes == 0) return;
  if (dst.is_cuda() && src.is_cuda()) {
    const Stream stream = cuda::current_stream(dst.device());
    cuda::DeviceGuard guard(dst.device().index());
    CUDA_CHECK(cudaMemcpyPeerAsync(dst.data_ptr(), dst.device().index(), src.data_ptr(), src.device().index(), bytes,
                                   reinterpret_cast<cudaStream_t>(stream.id())));
    return;
  }
  const Device gpu = dst.is_cuda() ? dst.device() : src.device();
  const Stream stream = cuda::current_stream(gpu);
  cuda::DeviceGuard guard(gpu.index());
  CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, cudaMemcpyDefault,
                             reinterpret_cast<cudaStream_t>(stream.id())));
  if (dst.device().is_cpu()) CUDA_CHECK(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream.id())));
#else
  // to() and copy_() refuse cross-device moves in CPU-only builds before they get here.
  KILN_INTERNAL_ASSERT(false, "copy_between_devices in a build without CUDA");
#endif
}

}  // namespace kiln::detail
