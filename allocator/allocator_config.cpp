// Parsing of KILN_ALLOC_CONF / KILN_NO_CACHING.
//
// KILN_ALLOC_CONF takes PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax: comma-separated option:value
// items, where roundup_power2_divisions may take a bracketed list. Every option PyTorch knows
// is handled by name:
//   implemented        max_split_size_mb, max_non_split_rounding_mb, garbage_collection_threshold,
//                      expandable_segments, roundup_power2_divisions, roundup_bypass_threshold_mb
//   accepted, no-op    backend:native (Kiln's only allocator), release_lock_on_cudamalloc:False,
//                      pinned_use_cuda_host_register:False, pinned_use_background_threads:False
//                      (PyTorch's defaults, which are what Kiln does), pinned_num_register_threads:N
//                      (validated as PyTorch does; Kiln registers no host memory, so it is unused)
//   refused, by name   backend:cudaMallocAsync, release_lock_on_cudamalloc:True,
//                      pinned_use_cuda_host_register:True, pinned_use_background_threads:True,
//                      pinned_reserve_segment_size_mb, graph_capture_record_stream_reuse
// An error names the variable and the option, and for a refused option says what to use.
#include "allocator_config.h"

#include <charconv>
#include <cstdlib>
#include <string>
#include <vector>

#include "../core/error.h"

namespace kiln {

namespace {
constexpr size_t kMiB = 1024 * 1024;
// max_split_size must exceed the 20 MiB segments of the large pool: a smaller limit would
// stop every large-pool segment from being split (PyTorch has the same lower bound).
constexpr size_t kMinMaxSplitSizeMb = 20;
constexpr size_t kMinNonSplitRoundingMb = 20;  // PyTorch's lower bound for max_non_split_rounding_mb
constexpr size_t kMaxRegisterThreads = 128;   // PyTorch's pinned_max_register_threads()
constexpr const char* kOptions =
    "max_split_size_mb, max_non_split_rounding_mb, garbage_collection_threshold, expandable_segments, "
    "roundup_power2_divisions, roundup_bypass_threshold_mb, backend, release_lock_on_cudamalloc, "
    "pinned_use_cuda_host_register, pinned_num_register_threads, pinned_use_background_threads";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_power_of_two(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

size_t log2_floor(size_t v) { return 63 - static_cast<size_t>(__builtin_clzll(v)); }

/// The items of `conf` separated by commas outside brackets (a list value keeps its commas).
std::vector<std::string_view> split_items(std::string_view conf) {
  std::vector<std::string_view> items;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= conf.size(); ++i) {
    if (i == conf.size() || (conf[i] == ',' && depth == 0)) {
      items.push_back(trim(conf.substr(start, i - start)));
      start = i + 1;
    } else if (conf[i] == '[') {
      ++depth;
    } else if (conf[i] == ']') {
      depth = depth > 0 ? depth - 1 : 0;
    }
  }
  return items;
}

/// A whole non-negative number, or an error naming `key`.
size_t parse_count(std::string_view key, std::string_view value, const char* what) {
  size_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  KILN_CHECK(ec == std::errc() && end == value.data() + value.size() && !value.empty(),
             "KILN_ALLOC_CONF: {} must be {}, got \"{}\"", key, what, value);
  return n;
}

/// A count of MiB as bytes, checked for overflow.
size_t parse_mib(std::string_view key, std::string_view value) {
  const size_t mb = parse_count(key, value, "a whole number of MiB");
  KILN_CHECK(mb <= std::numeric_limits<size_t>::max() / kMiB, "KILN_ALLOC_CONF: {} {} is too large", key, mb);
  return mb * kMiB;
}

/// True/False (PyTorch's spelling; true/false accepted too).
bool parse_bool(std::string_view key, std::string_view value) {
  if (value == "True" || value == "true") return true;
  if (value == "False" || value == "false") return false;
  KILN_FAIL("KILN_ALLOC_CONF: {} must be True or False, got \"{}\"", key, value);
}

/// roundup_power2_divisions: one power of two for every interval, or a list
/// "[K:D,...,>:D]" read as PyTorch's parser reads it: K (a power of two, in MiB) sets D
/// divisions for requests in [K, 2K) MiB, the first K also for every smaller request; ">:D"
/// sets D from the last K's interval (included) upwards. D is 0 (off) or a power of two.
void parse_roundup(std::string_view value, AllocatorConfig& config) {
  auto& divisions = config.roundup_power2_divisions;
  if (value.empty() || value.front() != '[') {
    const size_t d = parse_count("roundup_power2_divisions", value, "a power of two or a list [MiB:divisions,...]");
    KILN_CHECK(is_power_of_two(d), "KILN_ALLOC_CONF: roundup_power2_divisions must be a power of two, got {}", d);
    divisions.fill(d);
    return;
  }
  KILN_CHECK(value.size() >= 2 && value.back() == ']', "KILN_ALLOC_CONF: roundup_power2_divisions list \"{}\" lacks "
             "its closing ]", value);
  std::string_view rest = value.substr(1, value.size() - 2);
  bool first = true;
  size_t last_index = 0;
  while (!trim(rest).empty()) {
    const size_t comma = rest.find(',');
    const std::string_view entry = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t colon = entry.find(':');
    KILN_CHECK(colon != std::string_view::npos,
               "KILN_ALLOC_CONF: roundup_power2_divisions entries are MiB:divisions or >:divisions, got \"{}\"", entry);
    const std::string_view bound = trim(entry.substr(0, colon)), count = trim(entry.substr(colon + 1));
    const size_t d = parse_count("roundup_power2_divisions", count, "a number of divisions");
    KILN_CHECK(d == 0 || is_power_of_two(d),
               "KILN_ALLOC_CONF: roundup_power2_divisions must be 0 or a power of two, got {} in \"{}\"", d, entry);
    if (bound == ">") {
      for (size_t i = last_index; i < divisions.size(); ++i) divisions[i] = d;
      continue;
    }
    const size_t mb = parse_count("roundup_power2_divisions", bound, "a size in MiB (a power of two) or >");
    KILN_CHECK(is_power_of_two(mb),
               "KILN_ALLOC_CONF: roundup_power2_divisions sizes must be powers of two (MiB), got {} in \"{}\"", mb,
               entry);
    const size_t index = std::min(log2_floor(mb), divisions.size() - 1);
    if (first) {
      for (size_t i = 0; i < index; ++i) divisions[i] = d;
      first = false;
    }
    divisions[index] = d;
    last_index = index;
  }
}

/// An option PyTorch has and Kiln refuses: the error says why and what to use.
[[noreturn]] void refuse(std::string_view key, std::string_view value, std::string_view why) {
  KILN_FAIL("KILN_ALLOC_CONF: {}:{} is not supported: {}", key, value, why);
}

void parse_item(std::string_view item, AllocatorConfig& config) {
  const size_t colon = item.find(':');
  KILN_CHECK(colon != std::string_view::npos, "KILN_ALLOC_CONF: expected option:value, got \"{}\" (options: {})", item,
             kOptions);
  const std::string_view key = trim(item.substr(0, colon)), value = trim(item.substr(colon + 1));
  if (key == "max_split_size_mb") {
    const size_t mb = parse_count(key, value, "a whole number of MiB");
    KILN_CHECK(mb > kMinMaxSplitSizeMb, "KILN_ALLOC_CONF: max_split_size_mb must be greater than {}, got {}",
               kMinMaxSplitSizeMb, mb);
    config.max_split_size = parse_mib(key, value);
  } else if (key == "max_non_split_rounding_mb") {
    const size_t mb = parse_count(key, value, "a whole number of MiB");
    KILN_CHECK(mb >= kMinNonSplitRoundingMb, "KILN_ALLOC_CONF: max_non_split_rounding_mb must be at least {}, got {}",
               kMinNonSplitRoundingMb, mb);
    config.max_non_split_rounding = parse_mib(key, value);
  } else if (key == "garbage_collection_threshold") {
    double f = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), f);
    KILN_CHECK(ec == std::errc() && end == value.data() + value.size(),
               "KILN_ALLOC_CONF: garbage_collection_threshold must be a number, got \"{}\"", value);
    KILN_CHECK(f > 0.0 && f < 1.0, "KILN_ALLOC_CONF: garbage_collection_threshold must be in (0, 1), got {}", f);
    config.garbage_collection_threshold = f;
  } else if (key == "expandable_segments") {
    config.expandable_segments = parse_bool(key, value);
  } else if (key == "roundup_power2_divisions") {
    parse_roundup(value, config);
  } else if (key == "roundup_bypass_threshold_mb") {
    config.roundup_bypass_threshold = parse_mib(key, value);
  } else if (key == "backend") {
    if (value == "cudaMallocAsync")
      refuse(key, value,
             "Kiln has one allocator, its own caching allocator (backend:native); for less fragmentation use "
             "expandable_segments:True");
    KILN_CHECK(value == "native", "KILN_ALLOC_CONF: backend must be native (or PyTorch's cudaMallocAsync, which Kiln "
               "does not have), got \"{}\"", value);
  } else if (key == "release_lock_on_cudamalloc") {
    if (parse_bool(key, value))
      refuse(key, value,
             "Kiln keeps its allocator's lock while it asks the device for memory (PyTorch's default, "
             "release_lock_on_cudamalloc:False, which is accepted)");
  } else if (key == "pinned_use_cuda_host_register") {
    if (parse_bool(key, value))
      refuse(key, value,
             "Kiln's pinned host memory comes from cudaHostAlloc, never from registering malloc'd memory "
             "(pinned_use_cuda_host_register:False, the default, is accepted)");
  } else if (key == "pinned_num_register_threads") {
    const size_t n = parse_count(key, value, "a power of two");
    KILN_CHECK(is_power_of_two(n), "KILN_ALLOC_CONF: pinned_num_register_threads must be a power of two, got {}", n);
    KILN_CHECK(n <= kMaxRegisterThreads, "KILN_ALLOC_CONF: pinned_num_register_threads must be at most {}, got {}",
               kMaxRegisterThreads, n);
    // Accepted with no effect: Kiln registers no host memory (see pinned_use_cuda_host_register).
  } else if (key == "pinned_use_background_threads") {
    if (parse_bool(key, value))
      refuse(key, value,
             "Kiln's pinned allocator checks its events when it allocates, with no background thread "
             "(pinned_use_background_threads:False, the default, is accepted)");
  } else if (key == "pinned_reserve_segment_size_mb" || key == "graph_capture_record_stream_reuse") {
    refuse(key, value, "Kiln does not have this PyTorch option; remove it");
  } else {
    KILN_FAIL("KILN_ALLOC_CONF: unknown option \"{}\" (options: {})", key, kOptions);
  }
}
}  // namespace

AllocatorConfig parse_allocator_config(std::string_view alloc_conf, std::string_view no_caching) {
  AllocatorConfig config;
  for (std::string_view item : split_items(alloc_conf))
    if (!item.empty()) parse_item(item, config);
  const std::string_view nc = trim(no_caching);
  KILN_CHECK(nc.empty() || nc == "0" || nc == "1", "KILN_NO_CACHING: expected 0 or 1, got \"{}\"", nc);
  config.caching = nc != "1";
  return config;
}

const AllocatorConfig& environment_allocator_config() {
  static const AllocatorConfig config = [] {
    const char* conf = std::getenv("KILN_ALLOC_CONF");
    const char* nc = std::getenv("KILN_NO_CACHING");
    return parse_allocator_config(conf ? conf : "", nc ? nc : "");
  }();
  return config;
}

}  // namespace kiln
