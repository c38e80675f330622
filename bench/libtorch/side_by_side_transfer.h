// The two halves of side_by_side_transfer: each library's host <-> device copies behind plain
// functions, in translation units of their own (Kiln's and Torch's headers never meet).
#pragma once

#include <cstddef>

namespace side_by_side::transfer {

/// The ways a copy can be made; each library does the same thing for each.
enum class Copy {
  ToPageable,        ///< host to device from a pageable tensor: x.to(cuda)
  ToPinned,          ///< from a pinned tensor: p.to(cuda)
  ToPinnedAsync,     ///< from a pinned tensor, non_blocking: p.to(cuda, true)
  ToPageableAsync,   ///< from a pageable tensor, non_blocking: x.to(cuda, true)
  ToPinMemoryAsync,  ///< staged by hand: x.pin_memory().to(cuda, true)
  FromPageable,      ///< device to host into a new pageable tensor: y.cpu()
  FromIntoPinned,    ///< into an existing pinned tensor: pinned.copy_(y)
  FromAsync,         ///< non_blocking, into a new pinned tensor: y.to(cpu, true)
};

/// Kiln: float32 operands of `bytes` (a pageable and a pinned host tensor, a GPU tensor, a
/// pinned host destination), random values.
void kiln_setup(size_t bytes);
/// One copy of kind `c`, result discarded.
void kiln_copy(Copy c);
/// Releases Kiln's operands (its GPU cache is emptied; the pinned cache stays, as Torch's).
void kiln_teardown();

/// LibTorch: the same operands.
void torch_setup(size_t bytes);
/// One copy of kind `c`, result discarded.
void torch_copy(Copy c);
/// Releases LibTorch's operands (its GPU cache is emptied).
void torch_teardown();

/// LibTorch's version string.
const char* torch_version_string();

}  // namespace side_by_side::transfer
