// key_averages(): per-event self and total times from the nesting links, then the sums per
// key (definitions in key_averages.h).
#include "key_averages.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "../core/error.h"

namespace kiln::profiler {

std::string format_shapes(const std::vector<std::vector<int64_t>>& shapes) {
  std::string out = "[";
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("[{}]", fmt::join(shapes[i], ", "));
  }
  return out + "]";
}

KeyAverages key_averages(const std::vector<ProfileEvent>& events, bool group_by_input_shape) {
  const auto n = static_cast<int64_t>(events.size());
  // Per event: CPU total, its host children's CPU totals, Self CUDA, CUDA total, memory.
  std::vector<int64_t> cpu_total(events.size(), 0), children_cpu(events.size(), 0);
  std::vector<int64_t> self_cuda(events.size(), 0), cuda_total(events.size(), 0);
  std::vector<int64_t> cpu_mem(events.size(), 0), cuda_mem(events.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const ProfileEvent& e = events[static_cast<size_t>(i)];
    KILN_CHECK(e.end_ns >= e.start_ns, "key_averages: event {} ({}) ends before it starts", i, e.name);
    KILN_CHECK(e.parent < i && e.parent >= -1,
               "key_averages: event {} ({}) has parent {}; a parent is an earlier event", i, e.name, e.parent);
    KILN_CHECK(e.launcher < n && e.launcher >= -1, "key_averages: event {} ({}) has launcher {} of {} events", i,
               e.name, e.launcher, n);
    const auto s = static_cast<size_t>(i);
    cpu_mem[s] = e.cpu_memory_bytes;
    cuda_mem[s] = e.cuda_memory_bytes;
    if (on_device(e.kind)) {
      self_cuda[s] = e.duration_ns();
      if (e.launcher >= 0) {
        KILN_CHECK(!on_device(events[static_cast<size_t>(e.launcher)].kind),
                   "key_averages: device event {} ({}) names device event {} as its launcher", i, e.name, e.launcher);
        self_cuda[static_cast<size_t>(e.launcher)] += e.duration_ns();
      }
    } else {
      cpu_total[s] = e.duration_ns();
    }
  }
  // Children come after their parents: one backward pass adds each total into its parent.
  for (size_t s = 0; s < cuda_total.size(); ++s) cuda_total[s] = self_cuda[s];
  std::vector<int64_t> cpu_mem_total = cpu_mem, cuda_mem_total = cuda_mem;
  for (int64_t i = n - 1; i >= 0; --i) {
    const ProfileEvent& e = events[static_cast<size_t>(i)];
    if (on_device(e.kind) || e.parent < 0) continue;
    const auto s = static_cast<size_t>(i), p = static_cast<size_t>(e.parent);
    children_cpu[p] += cpu_total[s];
    cuda_total[p] += cuda_total[s];
    cpu_mem_total[p] += cpu_mem_total[s];
    cuda_mem_total[p] += cuda_mem_total[s];
  }

  // Rows in the order their keys first appear in time.
  std::vector<size_t> order(events.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return events[a].start_ns < events[b].start_ns; });
  std::vector<EventAverage> rows;
  std::unordered_map<std::string, size_t> row_of;
  for (size_t s : order) {
    const ProfileEvent& e = events[s];
    const std::string shapes = group_by_input_shape ? format_shapes(e.input_shapes) : "";
    // Ops, user scopes and device events of one name stay apart, as in PyTorch.
    const std::string key = fmt::format("{}\x1f{}\x1f{}", e.name, static_cast<int>(e.kind), shapes);
    auto [it, added] = row_of.try_emplace(key, rows.size());
    if (added) {
      EventAverage row;
      row.key = e.name;
      row.input_shapes = shapes;
      row.kind = e.kind;
      rows.push_back(std::move(row));
    }
    EventAverage& row = rows[it->second];
    row.count += 1;
    row.cpu_time_total_ns += cpu_total[s];
    row.self_cpu_time_total_ns += cpu_total[s] - children_cpu[s];
    row.cuda_time_total_ns += cuda_total[s];
    row.self_cuda_time_total_ns += self_cuda[s];
    row.cpu_memory_usage += cpu_mem_total[s];
    row.self_cpu_memory_usage += cpu_mem[s];
    row.cuda_memory_usage += cuda_mem_total[s];
    row.self_cuda_memory_usage += cuda_mem[s];
    row.flops += e.flops;
    row.bytes += e.bytes;
    if (row.math == MathKind::None) row.math = e.math;
  }
  return KeyAverages(std::move(rows));
}

}  // namespace kiln::profiler
