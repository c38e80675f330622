// Parsing of KILN_ALLOC_CONF / KILN_NO_CACHING.
#include "allocator_config.h"

#include <charconv>
#include <cstdlib>
#include <string>

#include "../core/error.h"

namespace kiln {

namespace {
constexpr size_t kMiB = 1024 * 1024;
// max_split_size must exceed the 20 MiB segments of the large pool: a smaller limit would
// stop every large-pool segment from being split (PyTorch has the same lower bound).
constexpr size_t kMinMaxSplitSizeMb = 20;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace

AllocatorConfig parse_allocator_config(std::string_view alloc_conf, std::string_view no_caching) {
  AllocatorConfig config;
  std::string_view rest = alloc_conf;
  while (!trim(rest).empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    KILN_CHECK(colon != std::string_view::npos,
               "KILN_ALLOC_CONF: expected option:value, got \"{}\" (options: max_split_size_mb, "
               "garbage_collection_threshold)",
               item);
    const std::string_view key = trim(item.substr(0, colon)), value = trim(item.substr(colon + 1));
    if (key == "max_split_size_mb") {
      size_t mb = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), mb);
      KILN_CHECK(ec == std::errc() && end == value.data() + value.size(),
                 "KILN_ALLOC_CONF: max_split_size_mb must be a whole number of MiB, got \"{}\"", value);
      KILN_CHECK(mb > kMinMaxSplitSizeMb, "KILN_ALLOC_CONF: max_split_size_mb must be greater than {}, got {}",
                 kMinMaxSplitSizeMb, mb);
      KILN_CHECK(mb <= std::numeric_limits<size_t>::max() / kMiB, "KILN_ALLOC_CONF: max_split_size_mb {} is too large",
                 mb);
      config.max_split_size = mb * kMiB;
    } else if (key == "garbage_collection_threshold") {
      double f = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), f);
      KILN_CHECK(ec == std::errc() && end == value.data() + value.size(),
                 "KILN_ALLOC_CONF: garbage_collection_threshold must be a number, got \"{}\"", value);
      KILN_CHECK(f > 0.0 && f < 1.0, "KILN_ALLOC_CONF: garbage_collection_threshold must be in (0, 1), got {}", f);
      config.garbage_collection_threshold = f;
    } else {
      KILN_FAIL("KILN_ALLOC_CONF: unknown option \"{}\" (options: max_split_size_mb, garbage_collection_threshold)",
                key);
    }
  }
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
