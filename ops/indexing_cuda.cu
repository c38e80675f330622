// CUDA bodies of the indexing ops, the twins of indexing_cpu.cpp: the index range check,
// gather and scatter, each a grid-stride loop over one shape whose operands are located with
// the elementwise engine's Indexer (dims collapsed first).
//
// The range check finds the first bad index with an atomicMin over flat positions, then
// reads that position back (8 bytes, a synchronizing copy on the current stream: the price
// of a kiln::Error instead of PyTorch's device-side assert); only when one is found is its
// value read too. While the stream is captured into a CUDA graph nothing can be waited for:
// the check reports nothing, and the kernels guard every index anyway (a gather reads 0, a
// scatter drops the element), so no access ever leaves the tensors.
//
// scatter_add uses hardware atomics: float, double, __half (sm_70+), __nv_bfloat16 (sm_80+),
// int32, and int64 through the unsigned 64-bit atomicAdd (wrapping, as the CPU does). The
// order of floating additions into one element varies from run to run.
#include <type_traits>

#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

__device__ __forceinline__ bool in_range(int64_t i, int64_t size) {
  return static_cast<uint64_t>(i) < static_cast<uint64_t>(size);
}

/// The Indexer of N tensors walked over `sizes` (each tensor viewed at that shape).
template <size_t N>
Indexer<static_cast<int>(N)> make_indexer(const char* op, const Shape& sizes, const std::array<const Tensor*, N>& ts) {
  std::array<DimValues, N> strides;
  std::array<const DimValues*, N> ptrs;
  for (size_t k = 0; k < N; ++k) {
    for (int64_t s : ts[k]->strides()) strides[k].push_back(s);
    ptrs[k] = &strides[k];
  }
  const CollapsedDims<N> dims = collapse_dims<N>(sizes, ptrs);
  KILN_CHECK(static_cast<int>(dims.sizes.size()) <= kMaxDims,
             "{}: the operands' layout needs {} dims after collapsing; the CUDA kernels index at most {} (call "
             "contiguous() on the inputs)", op, dims.sizes.size(), kMaxDims);
  Indexer<static_cast<int>(N)> idx;
  idx.ndim = static_cast<int>(dims.sizes.size());
  for (int d = 0; d < idx.ndim; ++d) {
    idx.sizes[d] = dims.sizes[static_cast<size_t>(d)];
    for (size_t k = 0; k < N; ++k) idx.strides[d][k] = dims.strides[static_cast<size_t>(d)][k];
  }
  return idx;
}

// ---- range check ------------------------------------------------------------------------

__global__ void index_check_kernel(int64_t n, Indexer<1> idx, const int64_t* index, int64_t size,
                                   unsigned long long* first_bad) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[1];
    idx.offsets(i, off);
    if (!in_range(index[off[0]], size)) atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
}

IndexCheck index_check_cuda(const Tensor& index, int64_t size) {
  const int64_t n = index.numel();
  if (n == 0) return {};
  cuda::DeviceGuard guard(index.device().index());
  const cudaStream_t stream = stream_of(index);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return {};  // see the file comment
  const Indexer<1> idx = make_indexer<1>("index check", index.sizes(), {&index});
  // The first bad flat position, starting above any position (0x7f7f... > every numel).
  const Tensor scratch = new_contiguous({1}, DType::Int64, index.device(), "index check");
  auto* first_bad = static_cast<unsigned long long*>(scratch.data_ptr());
  CUDA_CHECK(cudaMemsetAsync(first_bad, 0x7f, sizeof(unsigned long long), stream));
  index_check_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, idx, static_cast<const int64_t*>(index.data_ptr()),
                                                             size, first_bad);
  CUDA_CHECK(cudaGetLastError());
  unsigned long long host_first = 0;
  CUDA_CHECK(cudaMemcpyAsync(&host_first, first_bad, sizeof(host_first), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (host_first >= static_cast<unsigned long long>(n)) return {};
  // The error path: read the bad value itself (element offset from the flat position).
  const auto position = static_cast<int64_t>(host_first);
  int64_t offset = 0, rest = position;
  for (int64_t d = index.dim(); d-- > 0;) {
    offset += rest % index.sizes()[d] * index.strides()[d];
    rest /= index.sizes()[d];
  }
  int64_t value = 0;
  CUDA_CHECK(cudaMemcpyAsync(&value, static_cast<const int64_t*>(index.data_ptr()) + offset, sizeof(value),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return {position, value};
}

// ---- gather -----------------------------------------------------------------------------

template <typename T>
__global__ void gather_kernel(int64_t n, Indexer<3> idx, T* out, const T* src, const int64_t* index,
                              int64_t src_dim_stride, int64_t dim_size) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[3];
    idx.offsets(i, off);
    const int64_t j = index[off[2]];
    out[off[0]] = in_range(j, dim_size) ? src[off[1] + j * src_dim_stride] : T{};
  }
}

void gather_cuda(const Tensor& out, const Tensor& src, const Tensor& index, int64_t src_dim_stride,
                 int64_t dim_size) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(out.device().index());
  const Indexer<3> idx = make_indexer<3>("gather", out.sizes(), {&out, &src, &index});
  dispatch_all(out.dtype(), "gather", [&]<typename K>() {
    using T = device_t<K>;
    gather_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(out)>>>(
        n, idx, static_cast<T*>(out.data_ptr()), static_cast<const T*>(src.data_ptr()),
        static_cast<const int64_t*>(index.data_ptr()), src_dim_stride, dim_size);
  });
  CUDA_CHECK(cudaGetLastError());
}

// ---- scatter ----------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ void atomic_add(T* dst, T v) {
  if constexpr (std::is_same_v<T, int64_t>) {
    // Two's-complement addition is the same bit operation unsigned: wraps like the CPU.
    static_assert(sizeof(int64_t) == sizeof(unsigned long long));
    atomicAdd(reinterpret_cast<unsigned long long*>(dst), static_cast<unsigned long long>(v));
  } else {
    atomicAdd(dst, v);  // float, double, int, __half, __nv_bfloat16
  }
}

template <typename T, ScatterMode Mode>
__global__ void scatter_kernel(int64_t n, Indexer<3> idx, T* self, const T* src, const int64_t* index,
                               int64_t self_dim_stride, int64_t dim_size) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[3];
    idx.offsets(i, off);
    const int64_t j = index[off[2]];
    if (!in_range(j, dim_size)) continue;
    T* dst = self + off[0] + j * self_dim_stride;
    if constexpr (Mode == ScatterMode::Add) atomic_add(dst, src[off[1]]);
    else *dst = src[off[1]];
  }
}

template <typename K, ScatterMode Mode>
void launch_scatter(const Tensor& self, const Tensor& src, const Tensor& index, int64_t self_dim_stride,
                    int64_t dim_size) {
  using T = device_t<K>;
  const int64_t n = index.numel();
  const Indexer<3> idx = make_indexer<3>("scatter", index.sizes(), {&self, &src, &index});
  scatter_kernel<T, Mode><<<blocks_for(n), kThreads, 0, stream_of(self)>>>(
      n, idx, static_cast<T*>(self.data_ptr()), static_cast<const T*>(src.data_ptr()),
      static_cast<const int64_t*>(index.data_ptr()), self_dim_stride, dim_size);
  CUDA_CHECK(cudaGetLastError());
}

void scatter_cuda(ScatterMode mode, const Tensor& self, const Tensor& src, const Tensor& index,
                  int64_t self_dim_stride, int64_t dim_size) {
  if (index.numel() == 0) return;
  cuda::DeviceGuard guard(self.device().index());
  if (mode == ScatterMode::Assign) {
    dispatch_all(self.dtype(), "scatter", [&]<typename K>() {
      launch_scatter<K, ScatterMode::Assign>(self, src, index, self_dim_stride, dim_size);
    });
  } else {
    dispatch_numeric(self.dtype(), "scatter_add", [&]<typename K>() {
      launch_scatter<K, ScatterMode::Add>(self, src, index, self_dim_stride, dim_size);
    });
  }
}

}  // namespace

void register_indexing_kernels() {
  dispatch::index_check_kernels.set(DeviceType::CUDA, &index_check_cuda);
  dispatch::gather_kernels.set(DeviceType::CUDA, &gather_cuda);
  dispatch::scatter_kernels.set(DeviceType::CUDA, &scatter_cuda);
}

}  // namespace kiln::cuda_kernels
