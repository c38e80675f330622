// Moving bytes between devices (host <-> GPU, GPU <-> GPU) for to(device) and copy_.
// Internal to ops/.
#pragma once

#include "../tensor/tensor.h"

namespace kiln::detail {

/// Copies src's bytes into dst: both contiguous, same dtype and numel, on different
/// devices. Runs on the current stream of the GPU involved (of dst for GPU to GPU); returns
/// once the data is usable by the host when dst is on the CPU.
void copy_between_devices(const Tensor& dst, const Tensor& src);

}  // namespace kiln::detail
