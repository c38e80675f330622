// The text reports: memory_stats()'s flat key map and the memory_summary() table.
//
// Users of PyTorch read torch.cuda.memory_summary() at a glance, so the table reproduces
// PyTorch 2.11's (torch/cuda/memory.py) character for character: the same rows, the same
// 75-column box, the same unit choice per column (decided by the "all" row) and the same
// integer flooring. Only the title names Kiln, and a CPU device says CPU where PyTorch says
// GPU / CUDA. Below the table Kiln adds what PyTorch leaves out: a line on the expandable
// segments when there are any (pages mapped, address space, map and unmap calls), and a
// one-line verdict on whether fragmentation is the problem.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "expandable_view.h"
#include "memory_report.h"

namespace kiln {

namespace {

/// The per-pool statistics in memory_stats() order, with their PyTorch key names.
struct ArrayKey {
  const char* name;
  StatArray MemoryStats::*member;
};
constexpr ArrayKey kArrayKeys[] = {
    {"allocation", &MemoryStats::allocation},
    {"allocated_bytes", &MemoryStats::allocated_bytes},
    {"segment", &MemoryStats::segment},
    {"reserved_bytes", &MemoryStats::reserved_bytes},
    {"active", &MemoryStats::active},
    {"active_bytes", &MemoryStats::active_bytes},
    {"inactive_split", &MemoryStats::inactive_split},
    {"inactive_split_bytes", &MemoryStats::inactive_split_bytes},
    {"requested_bytes", &MemoryStats::requested_bytes},
};

/// Python's `a // b` for b > 0: rounds towards negative infinity, as PyTorch's formatter does.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

/// PyTorch's unit choice for a column: divide `value` by `base` while the column's preferred
/// value (its "all" row) is at least `threshold`, up to the last of `units`. The preferred
/// value is a float after the first step in Python; dividing a double by 1000 or 1024 keeps
/// the comparisons equal to Python's. Returns the unit chosen.
template <size_t N>
const char* scale(int64_t& value, int64_t preferred, int64_t base, double threshold, const char* const (&units)[N]) {
  const char* unit = units[0];
  double pref = static_cast<double>(preferred);
  for (size_t i = 1; i < N; ++i) {
    if (pref < threshold) break;
    unit = units[i];
    value = floor_div(value, base);
    pref /= static_cast<double>(base);
  }
  return unit;
}

/// PyTorch's _format_size: 1024 steps while the preferred value is at least 768 of the next unit.
std::string format_size(int64_t sz, int64_t pref_sz) {
  static constexpr const char* kPrefixes[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  const char* prefix = scale(sz, pref_sz, 1024, 768.0 * 1024.0, kPrefixes);
  return fmt::format("{:6d} {}", sz, prefix);
}

/// PyTorch's _format_count: 1000 steps while the preferred value is at least 750,000.
std::string format_count(int64_t cnt, int64_t pref_cnt) {
  static constexpr const char* kPrefixes[] = {" ", "K", "M"};
  const char* prefix = scale(cnt, pref_cnt, 1000, 750.0 * 1000.0, kPrefixes);
  return fmt::format("{:7d} {} ", cnt, prefix);
}

using Formatter = std::string (*)(int64_t, int64_t);

/// One row of the table: the four columns formatted against the preferred (all-pool) values.
std::string stat_row(const std::string& name, const Stat& s, const Stat& pref, Formatter f) {
  return fmt::format(" {:<21} | {} | {} | {} | {} ", name, f(s.current, pref.current), f(s.peak, pref.peak),
                     f(s.allocated, pref.allocated), f(s.freed, pref.freed));
}

/// Python's str.center(width): the odd space goes left when `width` is odd.
std::string center(const std::string& s, size_t width) {
  if (s.size() >= width) return s;
  const size_t marg = width - s.size();
  const size_t left = marg / 2 + (marg & width & 1);
  return std::string(left, ' ') + s + std::string(marg - left, ' ');
}

bool is_cpu_device(const std::string& device) { return device == "cpu" || device.rfind("cpu:", 0) == 0; }

/// "0", "3": the index after "cuda:" (0 when the device names none).
std::string device_index(const std::string& device) {
  const size_t colon = device.find(':');
  return colon == std::string::npos ? "0" : device.substr(colon + 1);
}

/// n < r * num / den, exactly, for 0 <= n and 0 < r (no overflow: r is split by den first).
bool below_fraction(int64_t n, int64_t r, int64_t num, int64_t den) {
  const int64_t whole = (r / den) * num, rest = (r % den) * num;
  const int64_t ceil_bound = whole + rest / den + (rest % den != 0 ? 1 : 0);  // ceil(r*num/den)
  return n < ceil_bound;
}

/// A non-negative byte count with one decimal, as the verdict prints sizes.
std::string in_units(int64_t bytes) { return format_bytes(static_cast<uint64_t>(bytes), 1); }

/// 100 * part / whole with one decimal ("30.0%").
std::string percent(int64_t part, int64_t whole) {
  return fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

}  // namespace

std::string format_bytes(uint64_t bytes, int decimals) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  size_t u = 0;
  // Move up while the value would print as 1024 or more in this unit once rounded.
  const double limit = 1024.0 - 0.5 * std::pow(10.0, -decimals);
  while (u + 1 < std::size(kUnits) && v >= limit) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.{}f} {}", v, decimals, kUnits[u]);
}

std::map<std::string, int64_t> stats_to_map(const MemoryStats& stats) {
  std::map<std::string, int64_t> out;
  auto put = [&out](const std::string& prefix, const Stat& s) {
    out[prefix + ".current"] = s.current;
    out[prefix + ".peak"] = s.peak;
    out[prefix + ".allocated"] = s.allocated;
    out[prefix + ".freed"] = s.freed;
  };
  for (const ArrayKey& key : kArrayKeys) {
    const StatArray& array = stats.*key.member;
    put(std::string(key.name) + ".all", array[StatPool::All]);
    put(std::string(key.name) + ".large_pool", array[StatPool::Large]);
    put(std::string(key.name) + ".small_pool", array[StatPool::Small]);
  }
  put("oversize_allocations", stats.oversize_allocations);
  put("oversize_segments", stats.oversize_segments);
  out["num_alloc_retries"] = stats.num_alloc_retries;
  out["num_ooms"] = stats.num_ooms;
  out["num_device_alloc"] = stats.num_device_alloc;
  out["num_device_free"] = stats.num_device_free;
  out["num_map_calls"] = stats.num_map_calls;
  out["num_unmap_calls"] = stats.num_unmap_calls;
  out["num_unmap_waits"] = stats.num_unmap_waits;
  out["num_sync_all_streams"] = stats.num_sync_all_streams;
  out["max_split_size"] = stats.max_split_size;
  return out;
}

std::string format_memory_summary(const MemorySnapshot& snapshot, bool abbreviated) {
  const MemoryStats& stats = snapshot.stats;
  const bool cpu = is_cpu_device(snapshot.device);
  const char* dev = cpu ? "CPU" : "GPU";  // "GPU reserved memory" in PyTorch

  struct Metric {
    StatArray MemoryStats::*member;
    std::string name;
    Formatter formatter;
  };
  const Metric metrics[] = {
      {&MemoryStats::allocated_bytes, "Allocated memory", format_size},
      {&MemoryStats::active_bytes, "Active memory", format_size},
      {&MemoryStats::requested_bytes, "Requested memory", format_size},
      {&MemoryStats::reserved_bytes, fmt::format("{} reserved memory", dev), format_size},
      {&MemoryStats::inactive_split_bytes, "Non-releasable memory", format_size},
      {&MemoryStats::allocation, "Allocations", format_count},
      {&MemoryStats::active, "Active allocs", format_count},
      {&MemoryStats::segment, fmt::format("{} reserved segments", dev), format_count},
      {&MemoryStats::inactive_split, "Non-releasable allocs", format_count},
  };

  std::vector<std::string> lines;
  lines.push_back(std::string(75, '='));
  lines.push_back(center(cpu ? std::string("Kiln CPU memory summary")
                             : "Kiln CUDA memory summary, device ID " + device_index(snapshot.device),
                         75));
  lines.push_back(std::string(75, '-'));
  // PyTorch: "  {_:9} CUDA OOMs: {num_ooms:<12d} | {_:6} cudaMalloc retries: {...:<8d}  ".
  // The CPU labels are shorter; the padding grows so the "|" stays in column 36.
  if (cpu) {
    lines.push_back(fmt::format("  {:10} CPU OOMs: {:<12d} | {:10} malloc retries: {:<8d}  ", "", stats.num_ooms,
                                "", stats.num_alloc_retries));
  } else {
    lines.push_back(fmt::format("  {:9} CUDA OOMs: {:<12d} | {:6} cudaMalloc retries: {:<8d}  ", "", stats.num_ooms,
                                "", stats.num_alloc_retries));
  }
  lines.push_back(std::string(75, '='));
  lines.push_back("        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ");

  for (const Metric& m : metrics) {
    lines.push_back(std::string(75, '-'));
    const StatArray& array = stats.*m.member;
    const Stat& pref = array[StatPool::All];
    lines.push_back(stat_row(m.name, pref, pref, m.formatter));
    if (!abbreviated) {
      lines.push_back(stat_row("      from large pool", array[StatPool::Large], pref, m.formatter));
      lines.push_back(stat_row("      from small pool", array[StatPool::Small], pref, m.formatter));
    }
  }
  const std::pair<std::string, const Stat*> oversize[] = {
      {"Oversize allocations", &stats.oversize_allocations},
      {fmt::format("Oversize {} segments", dev), &stats.oversize_segments},
  };
  for (const auto& [name, stat] : oversize) {
    lines.push_back(std::string(75, '-'));
    lines.push_back(stat_row(name, *stat, *stat, format_count));
  }
  lines.push_back(std::string(75, '='));

  std::string out;
  for (const std::string& line : lines) out += "|" + line + "|\n";
  const std::string expandable = expandable_summary(snapshot);
  if (!expandable.empty()) out += expandable + "\n";
  const std::string pools = private_pools_summary(snapshot);
  if (!pools.empty()) out += pools + "\n";
  return out + fragmentation_verdict(snapshot) + "\n";
}

std::string private_pools_summary(const MemorySnapshot& snapshot) {
  struct PoolTotals {
    size_t segments = 0;
    uint64_t reserved = 0, allocated = 0;
  };
  std::map<uint64_t, PoolTotals> pools;
  for (const SegmentInfo& seg : snapshot.segments) {
    if (seg.pool_id == 0) continue;
    PoolTotals& p = pools[seg.pool_id];
    ++p.segments;
    p.reserved += seg.mapped_size;
    p.allocated += seg.allocated_size;
  }
  if (pools.empty()) return "";
  std::string out = "Private pools (CUDA graphs; counted in the table above):";
  for (const auto& [id, p] : pools)
    out += fmt::format("\n  pool {}: {} segment{}, {} reserved, {} allocated to tensors", id, p.segments,
                       p.segments == 1 ? "" : "s", in_units(static_cast<int64_t>(p.reserved)),
                       in_units(static_cast<int64_t>(p.allocated)));
  return out;
}

std::string expandable_summary(const MemorySnapshot& snapshot) {
  size_t segments = 0, large = 0;
  uint64_t mapped = 0, address_space = 0, page = 0;
  for (const SegmentInfo& seg : snapshot.segments) {
    if (!seg.is_expandable) continue;
    ++segments;
    large += seg.is_large ? 1 : 0;
    mapped += seg.mapped_size;
    address_space += seg.total_size;
    page = seg.page_size;
  }
  if (segments == 0) return "";
  const uint64_t pages = page > 0 ? mapped / page : 0;
  return fmt::format(
      "Expandable segments: {} ({} large pool, {} small pool), {} mapped in {} page{} of {}, {} of address space; "
      "{} page{} mapped and {} unmapped so far, {} wait{} for the GPU before unmapping.",
      segments, large, segments - large, in_units(static_cast<int64_t>(mapped)), pages, pages == 1 ? "" : "s",
      in_units(static_cast<int64_t>(page)), in_units(static_cast<int64_t>(address_space)),
      snapshot.stats.num_map_calls, snapshot.stats.num_map_calls == 1 ? "" : "s", snapshot.stats.num_unmap_calls,
      snapshot.stats.num_unmap_waits, snapshot.stats.num_unmap_waits == 1 ? "" : "s");
}

std::string fragmentation_verdict(const MemorySnapshot& snapshot) {
  const int64_t reserved = snapshot.stats.reserved_bytes[StatPool::All].current;
  const int64_t non_releasable = snapshot.stats.inactive_split_bytes[StatPool::All].current;
  if (reserved <= 0) return "Fragmentation: none \u2014 nothing is reserved.";

  // Non-releasable memory is the free pieces of split segments: the cache cannot return it to
  // the device, and a request larger than every piece cannot use it. Under 10% of reserved is
  // the ordinary cost of splitting; from 10% a noticeable share of the reservation is stranded
  // (max_split_size_mb helps); from 30% nearly a third is, and fragmentation is likely why the
  // reservation is far above what tensors use.
  const char* level = below_fraction(non_releasable, reserved, 1, 10)   ? "low"
                      : below_fraction(non_releasable, reserved, 3, 10) ? "moderate"
                                                                        : "high";
  int64_t largest_free = 0, total_free = 0;
  bool any_expandable = false;
  for (const SegmentInfo& seg : snapshot.segments) {
    if (seg.is_expandable) {
      // Free memory is the free bytes on mapped pages; address space with no page is none.
      any_expandable = true;
      int64_t run = 0;
      size_t run_block = SIZE_MAX;
      for (const Piece& p : expandable_pieces(seg, expandable_shown_end(seg))) {
        if (p.kind == PieceKind::Live || p.kind == PieceKind::Unmapped) {
          run = 0;
          continue;
        }
        run = p.block == run_block ? run + static_cast<int64_t>(p.size) : static_cast<int64_t>(p.size);
        run_block = p.block;
        total_free += static_cast<int64_t>(p.size);
        largest_free = std::max(largest_free, run);
      }
      continue;
    }
    for (const BlockInfo& b : seg.blocks) {
      if (b.state != BlockState::Inactive) continue;
      const auto size = static_cast<int64_t>(b.size);
      total_free += size;
      largest_free = size > largest_free ? size : largest_free;
    }
  }
  std::string line = fmt::format(
      "Fragmentation: {} \u2014 {} of {} reserved ({}) is non-releasable ({}); ", level, in_units(non_releasable),
      in_units(reserved), percent(non_releasable, reserved),
      any_expandable ? "free bytes on pages that hold live blocks, and free pieces of split segments"
                     : "free pieces of split segments");
  if (total_free == 0) return line + "no free blocks are cached.";
  return line + fmt::format("largest free block {} of {} free ({}).", in_units(largest_free), in_units(total_free),
                            percent(largest_free, total_free));
}

}  // namespace kiln
