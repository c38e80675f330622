// KeyAverages::table(): torch.profiler's table layout. Every column is right-aligned in its
// width and followed by two spaces (the last one too); the Name column is as wide as the
// longest name plus 4, at most 55, with longer names cut to 52 characters plus "..."; the
// other columns are 12 wide; Input Shapes is as wide as the longest shapes plus 4, at most
// 80. Times print as %.3f in us, ms or s; shares as %.2f%%. The roofline columns (beyond
// PyTorch; key_averages.h) follow Total FLOPs, 12 wide, as %.3f TFLOP/s, %.1f GB/s, the bound
// and %.1f%% of the roof, with PyTorch's "--" for an empty FLOPs cell wherever one is empty.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "../core/error.h"
#include "key_averages.h"

namespace kiln::profiler {

std::string format_time(double ns) {
  const double us = ns / 1e3;
  if (us >= 1e6) return fmt::format("{:.3f}s", us / 1e6);
  if (us >= 1e3) return fmt::format("{:.3f}ms", us / 1e3);
  return fmt::format("{:.3f}us", us);
}

std::string format_time_share(double part, double total) {
  if (total == 0) return "NaN";
  return fmt::format("{:.2f}%", part * 100.0 / total);
}

std::string format_memory(int64_t bytes) {
  constexpr double kKb = 1024.0, kMb = 1024.0 * kKb, kGb = 1024.0 * kMb;
  const double b = static_cast<double>(bytes), mag = std::fabs(b);
  if (mag >= kGb) return fmt::format("{:.2f} Gb", b / kGb);
  if (mag >= kMb) return fmt::format("{:.2f} Mb", b / kMb);
  if (mag >= kKb) return fmt::format("{:.2f} Kb", b / kKb);
  return fmt::format("{} b", bytes);
}

namespace {

constexpr int kColumnWidth = 12;
constexpr int kSpacing = 2;

// The value a sort_by name selects, as a number to sort on (largest first).
std::function<double(const EventAverage&)> sort_key(const std::string& sort_by) {
  using R = const EventAverage&;
  if (sort_by == "cpu_time_total") return [](R r) { return static_cast<double>(r.cpu_time_total_ns); };
  if (sort_by == "cuda_time_total") return [](R r) { return static_cast<double>(r.cuda_time_total_ns); };
  if (sort_by == "self_cpu_time_total") return [](R r) { return static_cast<double>(r.self_cpu_time_total_ns); };
  if (sort_by == "self_cuda_time_total") return [](R r) { return static_cast<double>(r.self_cuda_time_total_ns); };
  if (sort_by == "cpu_memory_usage") return [](R r) { return static_cast<double>(r.cpu_memory_usage); };
  if (sort_by == "cuda_memory_usage") return [](R r) { return static_cast<double>(r.cuda_memory_usage); };
  if (sort_by == "self_cpu_memory_usage") return [](R r) { return static_cast<double>(r.self_cpu_memory_usage); };
  if (sort_by == "self_cuda_memory_usage") return [](R r) { return static_cast<double>(r.self_cuda_memory_usage); };
  if (sort_by == "count") return [](R r) { return static_cast<double>(r.count); };
  if (sort_by == "cpu_time") return [](R r) { return r.cpu_time_avg_ns(); };
  if (sort_by == "cuda_time") return [](R r) { return r.cuda_time_avg_ns(); };
  KILN_FAIL(
      "table: unknown sort_by \"{}\" (expected cpu_time_total, cuda_time_total, self_cpu_time_total, "
      "self_cuda_time_total, cpu_memory_usage, cuda_memory_usage, self_cpu_memory_usage, "
      "self_cuda_memory_usage, count, cpu_time or cuda_time)",
      sort_by);
}

// Columns added left to right; each row is the cells joined the same way.
class Layout {
 public:
  void add(std::string header, int width) {
    headers_.push_back(std::move(header));
    widths_.push_back(width);
  }
  std::string separator() const {
    std::string s;
    for (int w : widths_) s += std::string(static_cast<size_t>(w), '-') + std::string(kSpacing, ' ');
    return s;
  }
  std::string row(const std::vector<std::string>& cells) const {
    std::string s;
    for (size_t i = 0; i < cells.size(); ++i)
      s += fmt::format("{:>{}}", cells[i], widths_[i]) + std::string(kSpacing, ' ');
    return s;
  }
  const std::vector<std::string>& headers() const { return headers_; }

 private:
  std::vector<std::string> headers_;
  std::vector<int> widths_;
};

// A row's roofline cells (TFLOP/s, GB/s, Bound, Roof %) against `c`: "--" without FLOPs or
// Self CUDA time, and Bound and Roof % "--" too when the peak or the bandwidth is unknown.
std::vector<std::string> roofline_cells(const EventAverage& r, const DeviceCeilings& c) {
  std::vector<std::string> cells(4, "--");
  if (r.flops <= 0 || r.self_cuda_time_total_ns <= 0) return cells;
  const double seconds = static_cast<double>(r.self_cuda_time_total_ns) * 1e-9;
  const double flops_per_s = r.flops / seconds;
  cells[0] = fmt::format("{:.3f}", flops_per_s / 1e12);
  cells[1] = fmt::format("{:.1f}", r.bytes / seconds / 1e9);
  const double peak = c.flops_per_s(r.math), bandwidth = c.memory_bytes_per_s;
  if (peak <= 0 || bandwidth <= 0) return cells;
  // Intensity flops / bytes at or past the ridge peak / bandwidth, multiplied out so that a
  // row moving no bytes is simply compute-bound.
  const bool compute = r.flops * bandwidth >= peak * r.bytes;
  const double roof = compute ? peak : r.flops / r.bytes * bandwidth;
  cells[2] = compute ? "compute" : "memory";
  cells[3] = fmt::format("{:.1f}%", 100.0 * flops_per_s / roof);
  return cells;
}

}  // namespace

std::string KeyAverages::table(const TableOptions& options) const {
  if (rows_.empty()) return "";
  const bool profile_memory = options.profile_memory || profile_memory_;
  std::vector<const EventAverage*> rows;
  for (const EventAverage& r : rows_) rows.push_back(&r);
  if (!options.sort_by.empty()) {
    const auto key = sort_key(options.sort_by);
    std::stable_sort(rows.begin(), rows.end(),
                     [&](const EventAverage* a, const EventAverage* b) { return key(*a) > key(*b); });
  }
  const bool has_cuda_time =
      std::any_of(rows_.begin(), rows_.end(), [](const EventAverage& r) { return r.self_cuda_time_total_ns > 0; });
  const bool has_cuda_memory =
      std::any_of(rows_.begin(), rows_.end(), [](const EventAverage& r) { return r.self_cuda_memory_usage > 0; });
  const bool has_shapes =
      std::any_of(rows_.begin(), rows_.end(), [](const EventAverage& r) { return !r.input_shapes.empty(); });

  size_t longest_name = 0, longest_shapes = 0;
  for (const EventAverage& r : rows_) {
    longest_name = std::max(longest_name, r.key.size());
    longest_shapes = std::max(longest_shapes, r.input_shapes.size());
  }
  const int name_width = std::min(static_cast<int>(longest_name) + 4, options.max_name_column_width);
  const int shapes_width = std::min(static_cast<int>(longest_shapes) + 4, options.max_shapes_column_width);

  Layout layout;
  layout.add("Name", name_width);
  for (const char* h : {"Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"})
    layout.add(h, kColumnWidth);
  if (has_cuda_time)
    for (const char* h : {"Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"}) layout.add(h, kColumnWidth);
  if (profile_memory) {
    layout.add("CPU Mem", kColumnWidth);
    layout.add("Self CPU Mem", kColumnWidth);
    if (has_cuda_memory) {
      layout.add("CUDA Mem", kColumnWidth);
      layout.add("Self CUDA Mem", kColumnWidth);
    }
  }
  layout.add("# of Calls", kColumnWidth);
  if (has_shapes) layout.add("Input Shapes", shapes_width);
  // PyTorch's FLOPs column: one unit for all rows, chosen by the smallest positive count.
  double smallest_flops = 0;
  for (const EventAverage& r : rows_)
    if (r.flops > 0 && (smallest_flops == 0 || r.flops < smallest_flops)) smallest_flops = r.flops;
  const bool flops_column = (options.with_flops || with_flops_) && smallest_flops > 0;
  double flops_scale = 1;
  if (flops_column) {
    static const char* const kUnits[] = {"FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"};
    const int unit = static_cast<int>(std::floor(std::clamp(std::log10(smallest_flops) / 3.0, 0.0, 5.0)));
    flops_scale = std::pow(10.0, -3.0 * unit);
    layout.add(std::string("Total ") + kUnits[unit], kColumnWidth);
  }
  const bool roofline = flops_column && ceilings_.has_value() && has_cuda_time;
  if (roofline)
    for (const char* h : {"TFLOP/s", "GB/s", "Bound", "Roof %"}) layout.add(h, kColumnWidth);

  // Totals over every row, printed or not. Device rows alone make the CUDA total.
  double self_cpu_sum = 0, self_cuda_sum = 0;
  for (const EventAverage& r : rows_) {
    self_cpu_sum += static_cast<double>(r.self_cpu_time_total_ns);
    if (on_device(r.kind)) self_cuda_sum += static_cast<double>(r.self_cuda_time_total_ns);
  }

  std::string out;
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  const std::string sep = layout.separator();
  line(sep);
  line(layout.row(layout.headers()));
  line(sep);
  const auto cut = static_cast<size_t>(std::max(options.max_name_column_width - 3, 0));
  int printed = 0;
  for (const EventAverage* r : rows) {
    if (printed == options.row_limit) break;
    ++printed;
    std::string name = r->key;
    if (name.size() >= cut) name = name.substr(0, cut) + "...";
    std::vector<std::string> cells = {name,
                                      format_time_share(static_cast<double>(r->self_cpu_time_total_ns), self_cpu_sum),
                                      format_time(static_cast<double>(r->self_cpu_time_total_ns)),
                                      format_time_share(static_cast<double>(r->cpu_time_total_ns), self_cpu_sum),
                                      format_time(static_cast<double>(r->cpu_time_total_ns)),
                                      format_time(r->cpu_time_avg_ns())};
    if (has_cuda_time) {
      cells.push_back(format_time(static_cast<double>(r->self_cuda_time_total_ns)));
      cells.push_back(format_time_share(static_cast<double>(r->self_cuda_time_total_ns), self_cuda_sum));
      cells.push_back(format_time(static_cast<double>(r->cuda_time_total_ns)));
      cells.push_back(format_time(r->cuda_time_avg_ns()));
    }
    if (profile_memory) {
      cells.push_back(format_memory(r->cpu_memory_usage));
      cells.push_back(format_memory(r->self_cpu_memory_usage));
      if (has_cuda_memory) {
        cells.push_back(format_memory(r->cuda_memory_usage));
        cells.push_back(format_memory(r->self_cuda_memory_usage));
      }
    }
    cells.push_back(std::to_string(r->count));
    if (has_shapes) cells.push_back(r->input_shapes.substr(0, static_cast<size_t>(shapes_width)));
    if (flops_column) cells.push_back(r->flops <= 0 ? "--" : fmt::format("{:8.3f}", r->flops * flops_scale));
    if (roofline)
      for (std::string& cell : roofline_cells(*r, *ceilings_)) cells.push_back(std::move(cell));
    line(layout.row(cells));
  }
  line(sep);
  line("Self CPU time total: " + format_time(self_cpu_sum));
  if (has_cuda_time) line("Self CUDA time total: " + format_time(self_cuda_sum));
  if (roofline) line(describe(*ceilings_));
  if (dropped_device_records_ > 0)
    line(fmt::format("Warning: CUPTI dropped {} device activity records; the CUDA times above are missing them",
                     dropped_device_records_));
  return out;
}

}  // namespace kiln::profiler
