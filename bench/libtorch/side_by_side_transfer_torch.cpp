// LibTorch's half of side_by_side_transfer (see side_by_side_transfer.h).
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/torch.h>

#include "bench_util.h"
#include "side_by_side_transfer.h"

namespace side_by_side::transfer {

namespace {
at::Tensor g_pageable, g_pinned, g_gpu, g_pinned_dst;
at::TensorOptions on_gpu() { return torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA, 0); }
at::TensorOptions on_cpu() { return torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU); }
}  // namespace

void torch_setup(size_t bytes) {
  const auto n = static_cast<int64_t>(bytes / 4);
  torch::manual_seed(0);
  g_pageable = torch::randn({n}, on_cpu());
  g_pinned = g_pageable.pin_memory();
  g_gpu = g_pageable.to(on_gpu());
  g_pinned_dst = torch::empty({n}, on_cpu()).pin_memory();
}

void torch_copy(Copy c) {
  at::Tensor r;
  switch (c) {
    case Copy::ToPageable: r = g_pageable.to(on_gpu()); break;
    case Copy::ToPinned: r = g_pinned.to(on_gpu()); break;
    case Copy::ToPinnedAsync: r = g_pinned.to(on_gpu(), /*non_blocking=*/true); break;
    case Copy::ToPageableAsync: r = g_pageable.to(on_gpu(), /*non_blocking=*/true); break;
    case Copy::ToPinMemoryAsync: r = g_pageable.pin_memory().to(on_gpu(), /*non_blocking=*/true); break;
    case Copy::FromPageable: r = g_gpu.cpu(); break;
    case Copy::FromIntoPinned: g_pinned_dst.copy_(g_gpu); break;
    case Copy::FromAsync: r = g_gpu.to(on_cpu(), /*non_blocking=*/true); break;
  }
  kiln::bench::do_not_optimize(r);
}

void torch_teardown() {
  torch::cuda::synchronize();
  g_pageable = g_pinned = g_gpu = g_pinned_dst = at::Tensor();
  c10::cuda::CUDACachingAllocator::emptyCache();
}

const char* torch_version_string() { return TORCH_VERSION; }

}  // namespace side_by_side::transfer
