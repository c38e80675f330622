// launch_updatable: a kernel launch whose arguments a CUDA graph replay may rewrite
// (core/graph_capture.h). Eagerly it is a plain launch. Inside run_updatable during a capture
// it also remembers the graph node the launch added; in an update pass it launches nothing and
// sets the new arguments on that node of the instantiated graph instead.
#pragma once

#include <cuda_runtime.h>

#include "../../core/cuda_check.h"
#include "../../core/graph_capture.h"

namespace kiln::cuda_kernels {

/// Launches kernel<<<grid, block, 0, stream>>>(args...) or, in an update pass, rewrites the
/// captured launch's arguments (see the file comment).
template <typename... Params, typename... Args>
void launch_updatable(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args&&... args) {
  using cuda::detail::LaunchMode;
  const LaunchMode mode = cuda::detail::updatable_launch_mode();
  const void* func = reinterpret_cast<const void*>(kernel);
  if (mode == LaunchMode::Update) {
    void* exec = nullptr;
    void* node = cuda::detail::next_updatable_node(func, &exec);
    // The arguments converted to the kernel's parameter types, kept alive for the call.
    auto values = std::tuple<Params...>(std::forward<Args>(args)...);
    void* pointers[sizeof...(Params) > 0 ? sizeof...(Params) : 1];
    std::apply([&](auto&... v) {
      size_t i = 0;
      ((pointers[i++] = static_cast<void*>(&v)), ...);
    }, values);
    cudaKernelNodeParams params{};
    params.func = const_cast<void*>(func);
    params.gridDim = grid;
    params.blockDim = block;
    params.sharedMemBytes = 0;
    params.kernelParams = pointers;
    params.extra = nullptr;
    CUDA_CHECK(cudaGraphExecKernelNodeSetParams(static_cast<cudaGraphExec_t>(exec), static_cast<cudaGraphNode_t>(node),
                                                &params));
    return;
  }
  kernel<<<grid, block, 0, stream>>>(std::forward<Args>(args)...);
  CUDA_CHECK(cudaGetLastError());
  if (mode == LaunchMode::Capture) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t* deps = nullptr;
    size_t count = 0;
    CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &deps, nullptr, &count));
    KILN_CHECK(status == cudaStreamCaptureStatusActive && count == 1,
               "launch_updatable: expected the launch to be captured on its stream (status {}, {} dependencies)",
               static_cast<int>(status), count);
    cuda::detail::record_updatable_node(static_cast<void*>(deps[0]), func);
  }
}

}  // namespace kiln::cuda_kernels
