// key_averages(): the profiler's events summed per key (the name, and the input shapes when
// grouping by shape), with PyTorch's definitions, and table(): those rows printed in
// torch.profiler's layout.
//
// Definitions (as torch.autograd.profiler_util, with one deliberate difference):
//   CPU total        a host event's duration
//   Self CPU         CPU total minus the CPU totals of its direct host children
//   Self CUDA        the durations of the device events an op launched directly
//   CUDA total       Self CUDA plus the CUDA totals of its host children
//   CPU Mem (total)  bytes allocated minus freed inside the event, children included
//   Self CPU Mem     the same without the children's
// A device event (kernel, memcpy, memset) is a row of its own whose Self CUDA and CUDA total
// are its duration. The difference: PyTorch also adds an op's kernels to its CUDA total a
// second time (profiling nn.Linear shows addmm at twice its kernel's time); here each
// device microsecond counts once in every total that contains it.
// "Self CPU time total" sums Self CPU over all rows; "Self CUDA time total" sums the device
// rows only, so a kernel is never counted twice there either.
//
// Roofline columns (beyond PyTorch): with the FLOPs column shown, device ceilings set
// (set_device_ceilings) and device time in the profile, each row with FLOPs and Self CUDA
// time gets its achieved TFLOP/s and GB/s (FLOPs and ideal bytes over Self CUDA), the roof
// that bounds it ("compute" when its FLOPs per byte reach the ridge point peak / bandwidth,
// else "memory") and the achieved share of that roof, min(peak, intensity x bandwidth); the
// ceilings print under the totals.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "device_ceilings.h"
#include "event.h"

namespace kiln::profiler {

/// One row of key_averages(): every event with the same key, summed (times in ns).
struct EventAverage {
  std::string key;           ///< the events' name
  std::string input_shapes;  ///< "[[64, 1024], [4096, 1024], [4096]]" when grouped by shape, else ""
  EventKind kind = EventKind::CpuOp;
  int64_t count = 0;
  int64_t cpu_time_total_ns = 0;
  int64_t self_cpu_time_total_ns = 0;
  int64_t cuda_time_total_ns = 0;
  int64_t self_cuda_time_total_ns = 0;
  int64_t cpu_memory_usage = 0;
  int64_t self_cpu_memory_usage = 0;
  int64_t cuda_memory_usage = 0;
  int64_t self_cuda_memory_usage = 0;
  double flops = 0;                ///< with_flops: the calls' FLOPs, summed
  double bytes = 0;                ///< with_flops: the calls' ideal bytes moved, summed
  MathKind math = MathKind::None;  ///< with_flops: the arithmetic of the first call that has one

  /// CPU total per call.
  double cpu_time_avg_ns() const { return count == 0 ? 0.0 : static_cast<double>(cpu_time_total_ns) / count; }
  /// CUDA total per call.
  double cuda_time_avg_ns() const { return count == 0 ? 0.0 : static_cast<double>(cuda_time_total_ns) / count; }
};

/// How table() prints (torch.profiler's table() arguments).
struct TableOptions {
  /// "" (first-seen order), or one of cpu_time_total, cuda_time_total, self_cpu_time_total,
  /// self_cuda_time_total, cpu_memory_usage, cuda_memory_usage, self_cpu_memory_usage,
  /// self_cuda_memory_usage, count: rows sorted by it, largest first.
  std::string sort_by{};
  /// Rows printed at most (the totals below the table still cover every row).
  int row_limit = 100;
  /// Adds the memory columns (CPU Mem, Self CPU Mem, and CUDA's when any row has them);
  /// they also appear when the profile was recorded with profile_memory.
  bool profile_memory = false;
  /// Adds PyTorch's "Total FLOPs" column (scaled to KFLOPs, MFLOPs, ... by the smallest
  /// count); it also appears when the profile was recorded with with_flops. With device
  /// ceilings set and device time recorded, the roofline columns follow it.
  bool with_flops = false;
  /// Width above which names are cut to width - 3 characters plus "..." (PyTorch: 55).
  int max_name_column_width = 55;
  /// Width above which the Input Shapes column is cut (PyTorch: 80).
  int max_shapes_column_width = 80;
};

/// The rows of a profile, summed per key.
class KeyAverages {
 public:
  KeyAverages() = default;
  /// Wraps rows already summed (key_averages() makes them from events).
  explicit KeyAverages(std::vector<EventAverage> rows) : rows_(std::move(rows)) {}

  /// The rows, in first-seen order.
  const std::vector<EventAverage>& rows() const { return rows_; }
  /// The table in torch.profiler's layout; throws kiln::Error for an unknown sort_by.
  std::string table(const TableOptions& options = {}) const;
  /// Shows the memory columns in every table (a profile recorded with profile_memory).
  void set_profile_memory(bool on) { profile_memory_ = on; }
  /// Shows the FLOPs column in every table (a profile recorded with with_flops).
  void set_with_flops(bool on) { with_flops_ = on; }
  /// Sets the GPU ceilings the roofline columns compare against (std::nullopt: no columns).
  void set_device_ceilings(std::optional<DeviceCeilings> ceilings) { ceilings_ = std::move(ceilings); }
  /// The ceilings set by set_device_ceilings, if any.
  const std::optional<DeviceCeilings>& ceilings() const { return ceilings_; }
  /// Records that CUPTI dropped `count` device records; the table then says so under its
  /// totals (those CUDA times are short by the missing records).
  void set_dropped_device_records(uint64_t count) { dropped_device_records_ = count; }

 private:
  std::vector<EventAverage> rows_;
  bool profile_memory_ = false;
  bool with_flops_ = false;
  std::optional<DeviceCeilings> ceilings_;
  uint64_t dropped_device_records_ = 0;
};

/// Sums `events` per name (and per input shapes when `group_by_input_shape`).
KeyAverages key_averages(const std::vector<ProfileEvent>& events, bool group_by_input_shape = false);

/// "12.345us", "1.234ms" or "1.234s", as PyTorch prints times (input in ns).
std::string format_time(double ns);
/// "12.34%" of `total`, or "NaN" when `total` is zero.
std::string format_time_share(double part, double total);
/// "512 b", "1.50 Kb", "2.00 Mb", "1.25 Gb", as PyTorch prints memory (binary units).
std::string format_memory(int64_t bytes);
/// "[[64, 1024], [4096]]": shapes as Python prints a list of lists.
std::string format_shapes(const std::vector<std::vector<int64_t>>& shapes);

}  // namespace kiln::profiler
