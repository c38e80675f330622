// Kiln's half of side_by_side_transfer (see side_by_side_transfer.h).
#include <kiln/kiln.h>

#include "bench_util.h"
#include "side_by_side_transfer.h"

namespace side_by_side::transfer {

namespace {
const kiln::Device kGpu = kiln::Device::cuda(0);
kiln::Tensor g_pageable, g_pinned, g_gpu, g_pinned_dst;
}  // namespace

void kiln_setup(size_t bytes) {
  const auto n = static_cast<int64_t>(bytes / 4);
  kiln::manual_seed(0);
  g_pageable = kiln::randn({n});
  g_pinned = g_pageable.pin_memory();
  g_gpu = g_pageable.to(kGpu);
  g_pinned_dst = kiln::empty({n}).pin_memory();
}

void kiln_copy(Copy c) {
  kiln::Tensor r;
  switch (c) {
    case Copy::ToPageable: r = g_pageable.to(kGpu); break;
    case Copy::ToPinned: r = g_pinned.to(kGpu); break;
    case Copy::ToPinnedAsync: r = g_pinned.to(kGpu, true); break;
    case Copy::ToPageableAsync: r = g_pageable.to(kGpu, true); break;
    case Copy::ToPinMemoryAsync: r = g_pageable.pin_memory().to(kGpu, true); break;
    case Copy::FromPageable: r = g_gpu.cpu(); break;
    case Copy::FromIntoPinned: g_pinned_dst.copy_(g_gpu); break;
    case Copy::FromAsync: r = g_gpu.to(kiln::Device::cpu(), true); break;
  }
  kiln::bench::do_not_optimize(r);
}

void kiln_teardown() {
  kiln::cuda::synchronize(kGpu);
  g_pageable = g_pinned = g_gpu = g_pinned_dst = kiln::Tensor();
  kiln::empty_cache(kGpu);
}

}  // namespace side_by_side::transfer
