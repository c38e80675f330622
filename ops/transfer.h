// Moving bytes between devices (host <-> GPU, GPU <-> GPU) for to(device) and copy_, and the
// pinned host tensors they use. Internal to ops/.
#pragma once

#include "../tensor/tensor.h"

namespace kiln::detail {

/// copy_'s work across devices: `src` (any layout and dtype, broadcastable to dst's shape,
/// on another device) into `dst`. Runs on the current stream of the GPU involved (of dst for
/// GPU to GPU). Blocking, it returns once dst may be read on the host and src changed;
/// non_blocking, once the copy is queued (see Tensor::to(Device, bool)).
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking);

/// A contiguous CPU tensor in pinned memory from the pinned host cache (`op` names the
/// caller in errors); needs a CUDA build with a visible GPU.
Tensor new_pinned(const Shape& sizes, DType dtype, const char* op);

/// Copies the element of a one-element tensor `t` (any device) into `out` (element_size
/// bytes), waiting for the current stream when t is on a GPU: item()'s read.
void read_element(const Tensor& t, void* out);

}  // namespace kiln::detail
