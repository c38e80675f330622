// A GPU's ceilings for the roofline columns of key_averages().table(): its peak FLOP rate
// per MathKind and its memory bandwidth. An op whose arithmetic intensity (FLOPs per byte)
// lies below the ridge point peak / bandwidth cannot beat the memory roof; above it, the
// compute roof.
//
// Peak FLOP rates are computed, not measured: SMs x the device's max clock x FLOPs per clock
// per SM for the compute capability (a table of NVIDIA's published per-SM figures). Memory
// bandwidth is measured once per device and process (a device-to-device copy), because
// copies reach ~90% of the theoretical figure and that is the roof kernels actually see;
// when the measurement cannot run, it falls back to the theoretical figure. Every number
// says where it came from (memory_source, flops_source), printed under the table.
//
// This header includes no CUDA header, so key_averages.h can hold a DeviceCeilings in
// CPU-only builds, where device_ceilings() returns std::nullopt.
#pragma once

#include <optional>
#include <string>

#include "event.h"

namespace kiln::profiler {

/// Peak rates of one GPU (FLOP/s per arithmetic, bytes/s of memory); 0 means unknown.
struct DeviceCeilings {
  int device = 0;                  ///< the CUDA device index
  std::string device_name;         ///< "NVIDIA H200", ...
  double memory_bytes_per_s = 0;   ///< memory bandwidth (bytes read + written per second)
  std::string memory_source;       ///< how memory_bytes_per_s was found ("measured D2D copy ...")
  double float64_flops_per_s = 0;  ///< float64 (tensor cores where the device has FP64 ones)
  double float32_flops_per_s = 0;  ///< float32 without tensor cores (FFMA)
  double tf32_flops_per_s = 0;     ///< TF32 tensor cores, dense
  double half_flops_per_s = 0;     ///< float16 / bfloat16 tensor cores, dense, float32 accumulate
  std::string flops_source;        ///< how the FLOP rates were found ("132 SMs x 1980 MHz x ...")

  /// The peak FLOP rate for `math` (0 for MathKind::None or an unknown rate).
  double flops_per_s(MathKind math) const;
};

/// The ceilings of CUDA device `device`, found once per device and process (thread-safe);
/// std::nullopt in CPU-only builds, without a visible GPU `device`, or after a CUDA error.
/// Never throws for a CUDA failure. The first call per device times a few 256 MiB copies
/// on it (a few ms), so call it outside a recording that traces device activity.
std::optional<DeviceCeilings> device_ceilings(int device);

/// The footer the table prints under its totals: device, memory bandwidth, peak FLOP rates,
/// and their sources (two lines, no trailing newline).
std::string describe(const DeviceCeilings& ceilings);

}  // namespace kiln::profiler
