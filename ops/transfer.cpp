// Cross-device copies and pinned host memory: to(device[, non_blocking]), copy_'s moves
// between devices, pin_memory / is_pinned, record_stream and item()'s read.
//
// Copies run through cudaMemcpyAsync on the current stream of the GPU involved.
// - Blocking (PyTorch's non_blocking=false): a copy to the host waits for its stream, so the
//   caller can read the result; a copy from pinned memory waits too, so the caller may change
//   the source at once; from pageable memory the driver stages the bytes through its own
//   pinned buffers before the call returns (6-16 GB/s on the H200 host against ~55 from pinned
//   memory, docs/BENCHMARKS.md).
// - non_blocking: nothing waits for the GPU. A pageable source is copied into a staging block
//   of the pinned host cache (allocator/pinned_host_allocator.h) in slices, each slice's DMA
//   queued as soon as it is filled, so the host pass and the DMA overlap; the block goes back
//   to the cache at once, marked used by the stream (record_stream), and is reused only after
//   an event shows the DMA has read it. A source from pin_memory() is DMA'd directly and
//   marked the same way; a copy to the host lands in a pinned tensor from the cache, marked
//   too, so dropping it early cannot hand its memory to someone else under the DMA.
// - GPU to GPU: PyTorch's two-way barrier. The copy runs on the source device's stream after
//   the destination's stream has reached this point, and the destination's stream waits for
//   the copy, so neither side's earlier or later work races with it.
#include "transfer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../allocator/memory.h"
#include "../allocator/pinned_host_allocator.h"
#include "../core/device_error.h"
#include "../core/stream.h"
#include "../tensor/make.h"
#include "../tensor/object_pool.h"
#include "kernels.h"
#include "op_scope.h"

#ifdef KILN_WITH_CUDA
#include "../core/cuda_guard.h"
#endif

namespace kiln::detail {

namespace {

// Host copies of at least this size are split over the OpenMP threads, in kCopyChunk pieces:
// one core's memcpy reaches a fraction of the host's memory bandwidth, and the DMA engines
// take more. (At 4 MiB, 1 MiB pin_memory() copies ran single-threaded at 1.7x LibTorch's
// time on the H200 host: docs/BENCHMARKS.md, section 6.)
constexpr size_t kParallelCopyBytes = size_t{256} << 10;
constexpr size_t kCopyChunk = size_t{64} << 10;
// A staged non_blocking copy queues its DMA in slices of this size, so the DMA of one slice
// overlaps the host copy of the next.
constexpr size_t kStagingSlice = size_t{8} << 20;

// memcpy, split over the OpenMP threads for large sizes.
void host_memcpy(void* dst, const void* src, size_t bytes) {
#ifdef _OPENMP
  if (bytes >= kParallelCopyBytes) {
    const auto chunks = static_cast<int64_t>((bytes + kCopyChunk - 1) / kCopyChunk);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const size_t begin = static_cast<size_t>(c) * kCopyChunk;
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                  std::min(kCopyChunk, bytes - begin));
    }
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

// src into dst (a CPU tensor of its shape): memcpy when both are dense and of one dtype,
// else the copy kernel (conversion, strides).
void host_copy(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous())
    host_memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
  else
    dispatch::copy_kernels.get("copy_", Device::cpu())(dst, src);
}

#ifdef KILN_WITH_CUDA
cudaStream_t as_cuda(const Stream& s) { return reinterpret_cast<cudaStream_t>(s.id()); }

const StorageImpl& storage_of(const Tensor& t) { return *t.unsafe_impl()->storage(); }

// A blocking copy's wait: a synchronisation point, so a device-side error a kernel recorded
// (a bad class index in cross_entropy, ...) is raised here (Note [Device-side errors],
// core/device_error.h). The copy itself has completed.
void wait_for(const Stream& stream) {
  CUDA_CHECK(cudaStreamSynchronize(as_cuda(stream)));
  cuda::check_device_error(stream.device().index());
}

// A blocking copy or host read cannot be part of a CUDA graph: refused with a clear error
// before anything is queued, so the capture stays valid for its owner to end cleanly (the CUDA
// call itself would fail with "operation not permitted when stream is capturing" and
// invalidate the capture).
void refuse_while_capturing(const Stream& stream, const char* what) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(as_cuda(stream), &status));
  KILN_CHECK(status == cudaStreamCaptureStatusNone,
             "{}: cannot wait for a GPU tensor on the host while a CUDA graph is being captured on its stream "
             "(a captured graph replays device work only; keep the value on the device, or read it after the capture)",
             what);
}

// Keeps the pinned-cache block behind `t` out of reuse until `stream` has run the work
// queued so far (a copy reading or writing it). Memory Kiln does not own is the caller's.
void keep_until_done(const Tensor& t, const Stream& stream) {
  const StorageImpl& storage = storage_of(t);
  if (storage.origin() != StorageOrigin::PinnedHost || storage.data() == nullptr) return;
  pinned_host_allocator("copy_").record_stream(storage.data(), stream);
}

// dst (contiguous, on a GPU) <- src (CPU, dst's shape, any layout and dtype).
void host_to_device(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const Stream stream = cuda::current_stream(dst.device());
  cuda::DeviceGuard guard(dst.device().index());
  const size_t bytes = dst.nbytes();
  if (!non_blocking || !src.is_pinned()) refuse_while_capturing(stream, "copy_ (host to device)");
  if (src.is_contiguous() && src.dtype() == dst.dtype() && src.is_pinned()) {
    CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, cudaMemcpyHostToDevice, as_cuda(stream)));
    if (non_blocking)
      keep_until_done(src, stream);
    else
      wait_for(stream);  // the caller may change src on return
    return;
  }
  if (non_blocking) {
    const Tensor staging = new_pinned(dst.sizes(), dst.dtype(), "copy_");
    // Marked first: the event recorded when the block is freed (at the return, or if a call
    // below throws) follows every slice queued by then.
    keep_until_done(staging, stream);
    char* const to = static_cast<char*>(dst.data_ptr());
    char* const via = static_cast<char*>(staging.data_ptr());
    if (src.is_contiguous() && src.dtype() == dst.dtype()) {
      const char* from = static_cast<const char*>(src.data_ptr());
      for (size_t begin = 0; begin < bytes; begin += kStagingSlice) {
        const size_t n = std::min(kStagingSlice, bytes - begin);
        host_memcpy(via + begin, from + begin, n);
        CUDA_CHECK(cudaMemcpyAsync(to + begin, via + begin, n, cudaMemcpyHostToDevice, as_cuda(stream)));
      }
    } else {
      host_copy(staging, src);  // converts and walks src's strides in the one pass
      CUDA_CHECK(cudaMemcpyAsync(to, via, bytes, cudaMemcpyHostToDevice, as_cuda(stream)));
    }
    return;  // the staging block returns to the cache here, reusable once the DMA has read it
  }
  // Blocking from pageable memory: the driver has read src when the call returns.
  const Tensor dense = src.to(dst.dtype()).contiguous();
  CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), dense.data_ptr(), bytes, cudaMemcpyHostToDevice, as_cuda(stream)));
}

// dst (contiguous, on the CPU) <- src (on a GPU, dst's shape, any layout and dtype).
void device_to_host(const Tensor& dst, const Tensor& src, bool non_blocking) {
  // Converted and made dense on the GPU, on the stream the copy then runs on.
  const Stream stream = cuda::current_stream(src.device());
  if (!non_blocking || !dst.is_pinned()) refuse_while_capturing(stream, "copy_ (device to host)");
  const Tensor dense = src.to(dst.dtype()).contiguous();
  cuda::DeviceGuard guard(src.device().index());
  CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), dense.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToHost, as_cuda(stream)));
  // Into pageable memory the call itself returns only once the copy is done.
  if (non_blocking)
    keep_until_done(dst, stream);
  else
    wait_for(stream);
}

// dst (contiguous, on one GPU) <- src (on another, dst's shape, any layout and dtype).
void device_to_device(const Tensor& dst, const Tensor& src) {
  const Tensor dense = src.to(dst.dtype()).contiguous();  // on src's device and current stream
  const Stream src_stream = cuda::current_stream(src.device()), dst_stream = cuda::current_stream(dst.device());
  Event dst_ready(dst.device());
  dst_ready.record(dst_stream);
  dst_ready.block(src_stream);
  {
    cuda::DeviceGuard guard(src.device().index());
    CUDA_CHECK(cudaMemcpyPeerAsync(dst.data_ptr(), dst.device().index(), dense.data_ptr(), src.device().index(),
                                   dst.nbytes(), as_cuda(src_stream)));
  }
  Event copied(src.device());
  copied.record(src_stream);
  copied.block(dst_stream);
}
#endif

}  // namespace

void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
#ifdef KILN_WITH_CUDA
  if (dst.numel() == 0) return;
  if (!dst.is_contiguous() || src.sizes() != dst.sizes()) {
    // A strided or broadcast destination: move src densely to dst's device first, then the
    // copy kernel writes it through dst's strides there (a host destination waits for it).
    const Tensor moved = src.to(dst.device(), dst.dtype(), non_blocking && dst.is_cuda());
    dispatch::copy_kernels.get("copy_", dst.device())(dst, broadcast_view(moved, dst.sizes()));
    return;
  }
  if (src.device().is_cpu())
    host_to_device(dst, src, non_blocking);
  else if (dst.device().is_cpu())
    device_to_host(dst, src, non_blocking);
  else
    device_to_device(dst, src);
#else
  (void)dst, (void)src, (void)non_blocking;
  // to() and copy_() refuse cross-device moves in CPU-only builds before they get here.
  KILN_INTERNAL_ASSERT(false, "copy_across_devices in a build without CUDA");
#endif
}

Tensor new_pinned(const Shape& sizes, DType dtype, const char* op) {
  int64_t numel = 1;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, "{}: negative dimension {} in shape {}", op, s, shape_str(sizes));
    KILN_CHECK(s == 0 || numel <= INT64_MAX / s, "{}: shape {} has too many elements", op, shape_str(sizes));
    numel *= s;
  }
  const size_t element = element_size(dtype);
  KILN_CHECK(static_cast<uint64_t>(numel) <= SIZE_MAX / element, "{}: shape {} of {} needs more bytes than fit in size_t",
             op, shape_str(sizes), dtype);
  const size_t nbytes = static_cast<size_t>(numel) * element;
  auto storage = std::allocate_shared<StorageImpl>(PoolAllocator<StorageImpl>(),
                                                   pinned_host_allocator(op).allocate(nbytes, op), nbytes,
                                                   Device::cpu(), StorageOrigin::PinnedHost);
  return Tensor(std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>(), std::move(storage), dtype, sizes,
                                                 contiguous_strides(sizes), numel, ContiguousLayout{}));
}

void read_element(const Tensor& t, void* out) {
  const size_t bytes = t.element_size();
  if (t.device().is_cpu()) {
    std::memcpy(out, t.data_ptr(), bytes);
    return;
  }
#ifdef KILN_WITH_CUDA
  const Stream stream = cuda::current_stream(t.device());
  refuse_while_capturing(stream, "item");
  cuda::DeviceGuard guard(t.device().index());
  CUDA_CHECK(cudaMemcpyAsync(out, t.data_ptr(), bytes, cudaMemcpyDeviceToHost, as_cuda(stream)));
  wait_for(stream);
#else
  KILN_INTERNAL_ASSERT(false, "a GPU tensor in a build without CUDA");
#endif
}

}  // namespace kiln::detail

namespace kiln {

Tensor Tensor::to(Device device, bool non_blocking) const {
  if (device == this->device()) return *this;
  KILN_CHECK(cuda::is_built(), "to: cannot move a tensor from {} to {}: this build of Kiln has no CUDA support",
             this->device().str(), device.str());
  OpScope scope(op::to, {this}, device, dtype(), non_blocking);
  OpScope to_copy(op::_to_copy, {this}, device, dtype(), non_blocking);
  // As PyTorch: a non_blocking copy to the host lands in pinned memory, which the DMA writes
  // asynchronously (into pageable memory the driver would wait for it).
  Tensor out = non_blocking && device.is_cpu() ? detail::new_pinned(sizes(), dtype(), "to")
                                               : new_contiguous(sizes(), dtype(), device, "to");
  out.copy_(*this, non_blocking);
  to_copy.output(out);
  return scope.output(out);
}

Tensor Tensor::to(Device device, DType dtype, bool non_blocking) const {
  if (device == this->device()) return to(dtype);
  if (dtype == this->dtype()) return to(device, non_blocking);
  OpScope scope(op::to, {this}, device, dtype, non_blocking);
  // The conversion runs on the GPU: before a move to the host (whose non_blocking result
  // cannot be read yet), after a move to the device.
  Tensor out = device.is_cpu() ? to(dtype).to(device, non_blocking) : to(device, non_blocking).to(dtype);
  return scope.output(out);
}

bool Tensor::is_pinned() const {
  if (!defined() || !device().is_cpu()) return false;
  const StorageImpl& storage = *unsafe_impl()->storage();
  switch (storage.origin()) {
    case StorageOrigin::PinnedHost:
      return true;
    case StorageOrigin::CachingAllocator:
      return false;  // Kiln's own host memory is pageable unless it came from the pinned cache
    case StorageOrigin::External:
      break;  // the user's memory: ask the driver (it may be cudaHostAlloc'd or registered)
  }
#ifdef KILN_WITH_CUDA
  if (storage.data() == nullptr || !cuda::is_available()) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, storage.data()) != cudaSuccess) {
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
  if (is_pinned()) return *this;
  OpScope scope(op::pin_memory, {this});
  OpScope pin(op::_pin_memory, {this});
  Tensor out = detail::new_pinned(sizes(), dtype(), "pin_memory");
  {
    OpScope copy(op::copy_, {&out, this}, false);
    detail::host_copy(out, *this);
    copy.done();
  }
  pin.output(out);
  return scope.output(out);
}

void Tensor::record_stream(const Stream& stream) const {
  KILN_CHECK(defined(), "record_stream: the tensor is undefined");
  KILN_CHECK(stream.device().is_cuda(), "record_stream: expected a CUDA stream, got one on {}", stream.device().str());
  const StorageImpl& storage = *unsafe_impl()->storage();
  if (device().is_cuda()) {
    KILN_CHECK(stream.device() == device(), "record_stream: the tensor is on {} but the stream on {}", device().str(),
               stream.device().str());
  } else {
    KILN_CHECK(storage.origin() == StorageOrigin::PinnedHost,
               "record_stream: a CPU tensor can record a CUDA stream only when its memory comes from pin_memory() "
               "(Kiln's pinned host cache); this tensor's memory is {}",
               storage.origin() == StorageOrigin::External ? "the caller's (from_blob)" : "pageable");
  }
  OpScope scope(op::record_stream, {this});
  // No memory (zero bytes), or memory Kiln does not own (PyTorch skips it too): nothing to keep.
  if (storage.data() == nullptr || storage.origin() == StorageOrigin::External) return;
  if (device().is_cuda())
    caching_allocator(device(), "record_stream").record_stream(storage.data(), stream.id());
  else
    pinned_host_allocator("record_stream").record_stream(storage.data(), stream);
}

}  // namespace kiln
