// The kernel half of the dispatcher: per-family tables of kernels keyed by device type,
// filled by explicit registration (register_cpu_kernels(), later register_cuda_kernels())
// the first time any kernel is looked up. A missing entry is a clear error, never a crash:
// "[softmax] has no CUDA kernel".
//
// The other half, the op scope every public op opens before running its kernel, lives in
// op_scope.h.
#pragma once

#include <array>

#include "../core/error.h"
#include "../core/device.h"

namespace kiln::dispatch {

/// Fills every kernel table; runs once, on the first lookup.
void register_kernels();

/// Registers the CPU kernels of every op family.
void register_cpu_kernels();
/// Registers the CUDA kernels (CUDA builds only).
void register_cuda_kernels();

/// Makes sure the tables are filled (a cheap check after the first call).
inline void ensure_kernels_registered() {
  static const bool registered = (register_kernels(), true);
  (void)registered;
}

[[noreturn]] void throw_missing_kernel(const char* op, Device device);

/// The kernels of one op family, one slot per device type.
template <typename Fn>
class KernelTable {
 public:
  /// Installs the kernel for `type` (called from the register_*_kernels functions).
  void set(DeviceType type, Fn fn) { fns_[static_cast<int>(type)] = fn; }

  /// The kernel for `device`; throws "[op] has no <DEVICE> kernel" when none is registered.
  Fn get(const char* op, Device device) const {
    ensure_kernels_registered();
    Fn fn = fns_[static_cast<int>(device.type())];
    if (fn == nullptr) [[unlikely]]
      throw_missing_kernel(op, device);
    return fn;
  }

 private:
  std::array<Fn, kNumDeviceTypes> fns_{};
};

}  // namespace kiln::dispatch
