// What the profiler records: one ProfileEvent per op call, user scope, kernel, memcpy or
// memset, with times on one clock (nanoseconds since the profiler started) and the links
// that the tables need: a CPU event's parent (the op or scope that was open when it began)
// and a device event's launcher (the op or scope that launched it, found from the launching
// thread and time CUPTI reports, or the correlation id of the launch; device_tracer.h).
//
// Events are plain data so that aggregation and formatting (key_averages.h) can be tested
// on synthetic streams, without a profiler running.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "../ops/op_record.h"

namespace kiln::profiler {

/// The kind of an event; kernels, memcpys and memsets run on a device.
enum class EventKind : uint8_t { CpuOp, UserScope, Kernel, Memcpy, Memset };

/// True for the kinds that run on a device.
inline bool on_device(EventKind kind) { return kind >= EventKind::Kernel; }

/// The arithmetic an op's FLOPs run in (with_flops), which picks the device's peak rate.
using kiln::MathKind;  // ops/op_record.h: the arithmetic of an op's FLOPs

/// One recorded interval.
struct ProfileEvent {
  std::string name;  ///< "add", "linear_forward", a kernel's demangled name, ...
  EventKind kind = EventKind::CpuOp;
  int64_t start_ns = 0;  ///< since the profiler started
  int64_t end_ns = 0;
  uint64_t thread = 0;                             ///< CPU thread (host events) or stream (device events)
  int device = -1;                                 ///< the GPU of a device event, -1 for host events
  int64_t parent = -1;                             ///< host events: index of the enclosing host event, or -1
  int64_t launcher = -1;                           ///< device events: index of the op that launched it, or -1
  std::vector<std::vector<int64_t>> input_shapes;  ///< with record_shapes; [] for a non-tensor input
  int64_t cpu_memory_bytes = 0;                    ///< host bytes allocated minus freed while this event was innermost
  int64_t cuda_memory_bytes = 0;   ///< device bytes allocated minus freed while this event was innermost
  double flops = 0;                ///< with_flops: the op's floating-point operations (profiler/op_cost.h)
  double bytes = 0;                ///< with_flops: the bytes an ideal kernel for the op moves
  MathKind math = MathKind::None;  ///< with_flops: the arithmetic of those FLOPs
  // Device events (from CUPTI activity records):
  uint64_t correlation = 0;          ///< CUPTI's correlation id of the launch
  int64_t launch_ns = -1;            ///< when it was launched: a kernel's queued time, a copy's call (-1: unknown)
  std::array<int32_t, 3> grid{};     ///< kernels: grid size (blocks)
  std::array<int32_t, 3> block{};    ///< kernels: block size (threads)
  int32_t registers_per_thread = 0;  ///< kernels
  int64_t shared_memory_bytes = 0;   ///< kernels: static + dynamic shared memory per block
  int64_t transfer_bytes = 0;        ///< memcpys and memsets: bytes copied or set
  std::string detail;                ///< memcpys: "HtoD", "DtoH", "DtoD", ...

  /// end_ns - start_ns.
  int64_t duration_ns() const { return end_ns - start_ns; }
};

}  // namespace kiln::profiler
