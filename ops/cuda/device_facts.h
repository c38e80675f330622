// What a kernel's host code finds out about a device once per process (attributes, occupancy,
// shared-memory limits raised for its kernels), kept per device: the skinny GEMM's two
// kernels and the one-launch MLP block each keep a Facts type of their own, all through
// current_device_facts, so none repeats the per-device once-only bookkeeping. Host code only.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <mutex>

namespace kiln::cuda_kernels {

/// Device ordinals the caches hold (a device past it is treated as unusable).
inline constexpr int kMaxFactsDevices = 64;

namespace detail {
/// The per-device store of one Facts type.
template <typename Facts>
struct FactsStore {
  static inline std::array<Facts, kMaxFactsDevices> facts{};
  static inline std::array<std::once_flag, kMaxFactsDevices> once;
};
}  // namespace detail

/// The current device's Facts, filled by `find(device, facts)` on the first call for that
/// device (once, thread-safe), or null when there is no current device, its ordinal is past
/// kMaxFactsDevices, or `find` left `facts.ready` false.
template <typename Facts, typename Find>
const Facts* current_device_facts(Find&& find) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  if (device < 0 || device >= kMaxFactsDevices) return nullptr;
  using Store = detail::FactsStore<Facts>;
  const auto d = static_cast<size_t>(device);
  std::call_once(Store::once[d], [&] { find(device, Store::facts[d]); });
  return Store::facts[d].ready ? &Store::facts[d] : nullptr;
}

}  // namespace kiln::cuda_kernels
