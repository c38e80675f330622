// Cross-device copies through cudaMemcpyAsync / cudaMemcpyPeerAsync on the current stream,
// and pinned host memory. A copy to the host waits for its stream, so to(Device::cpu())
// returns data the caller can read, as PyTorch's non_blocking=false copies do; a copy from
// pinned host memory waits too, so the source may be changed as soon as the call returns.
// Pageable host memory is staged through pinned buffers by the CUDA driver itself (6-16
// GB/s on the H200 host); pin_memory() gives a tensor the DMA engines reach directly
// (~55 GB/s there; docs/BENCHMARKS.md). Pinned tensors are allocated with cudaHostAlloc per
// call and freed with cudaFreeHost, outside the caching allocator: pin once, reuse.
#include "transfer.h"

#include "../core/stream.h"
#include "factory.h"
#include "op_scope.h"

#include <cstring>

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
  // To the host: the data must be readable on return. From pinned memory: the DMA reads the
  // source after this returns unless we wait (pageable sources are staged before return).
  if (dst.device().is_cpu() || src.is_pinned())
    CUDA_CHECK(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream.id())));
#else
  // to() and copy_() refuse cross-device moves in CPU-only builds before they get here.
  KILN_INTERNAL_ASSERT(false, "copy_between_devices in a build without CUDA");
#endif
}

}  // namespace kiln::detail

namespace kiln {

bool Tensor::is_pinned() const {
#ifdef KILN_WITH_CUDA
  if (!defined() || !device().is_cpu() || !cuda::is_available()) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, data_ptr()) != cudaSuccess) {
    (void)cudaGetLastError();  // not memory the runtime knows: pageable
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
#else
  return false;
#endif
}

Tensor Tensor::pin_memory() const {
  KILN_CHECK(defined(), "pin_memory: the tensor is undefined");
  KILN_CHECK(device().is_cpu(), "pin_memory: only CPU tensors can be pinned, got a tensor on {}", device().str());
  KILN_CHECK(cuda::is_built(), "pin_memory: this build of Kiln has no CUDA support");
  KILN_CHECK(cuda::is_available(), "pin_memory: no CUDA GPU is visible on this machine");
#ifdef KILN_WITH_CUDA
  if (is_pinned()) return *this;
  OpScope scope("pin_memory", {this});
  const Tensor dense = contiguous();
  void* data = nullptr;
  CUDA_CHECK(cudaHostAlloc(&data, dense.nbytes() > 0 ? dense.nbytes() : 1, cudaHostAllocDefault));
  if (dense.nbytes() > 0) std::memcpy(data, dense.data_ptr(), dense.nbytes());
  return scope.output(from_blob(data, sizes(), TensorOptions(dtype()), [](void* p) { (void)cudaFreeHost(p); }));
#else
  return *this;  // unreachable: the checks above throw in a CPU-only build
#endif
}

}  // namespace kiln
