// PyTorch's PYTORCH_CUDA_ALLOC_CONF options in KILN_ALLOC_CONF, each by name: the ones Kiln
// implements (expandable_segments, roundup_power2_divisions in both forms,
// roundup_bypass_threshold_mb, max_non_split_rounding_mb) parse and act; the ones whose
// accepted values are what Kiln does anyway parse as no-ops; the rest are refused with an
// error that names the variable and the option and says what to use instead.
#include <array>
#include <string>

#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::string parse_error(std::string_view conf) {
  try {
    (void)parse_allocator_config(conf, "");
  } catch (const Error& e) {
    return e.what();
  }
  FAIL_CHECK("no error for KILN_ALLOC_CONF=\"" << std::string(conf) << "\"");
  return "";
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }
bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

using Divisions = std::array<size_t, AllocatorConfig::kRoundupIntervals>;

/// The bytes of the block an allocator with `conf` hands out for `bytes`.
int64_t block_bytes(const std::string& conf, size_t bytes) {
  TestAllocator a(0, parse_allocator_config(conf, ""));
  void* p = a->allocate(bytes);
  const int64_t size = a.current(&MemoryStats::allocated_bytes);
  a->free(p);
  return size;
}

}  // namespace

TEST_CASE("KILN_ALLOC_CONF expandable_segments: True or False") {
  CHECK_FALSE(parse_allocator_config("", "").expandable_segments);
  CHECK(parse_allocator_config("expandable_segments:True", "").expandable_segments);
  CHECK(parse_allocator_config("expandable_segments:true", "").expandable_segments);
  CHECK_FALSE(parse_allocator_config("expandable_segments:False", "").expandable_segments);
  const AllocatorConfig both = parse_allocator_config("max_split_size_mb:64, expandable_segments:True", "");
  CHECK(both.expandable_segments);
  CHECK(both.max_split_size == 64 * kMiB);
  for (const char* bad : {"yes", "1", "", "TRUE "}) {
    const std::string msg = parse_error(std::string("expandable_segments:") + bad + "x");
    CHECK(starts_with(msg, "KILN_ALLOC_CONF: expandable_segments must be True or False, got"));
  }
}

TEST_CASE("KILN_ALLOC_CONF roundup_power2_divisions: one value for every size, or PyTorch's list per size range") {
  CHECK(parse_allocator_config("", "").roundup_power2_divisions == Divisions{});
  Divisions four;
  four.fill(4);
  CHECK(parse_allocator_config("roundup_power2_divisions:4", "").roundup_power2_divisions == four);
  // The list, read as PyTorch's parser reads it: K sets [K, 2K) MiB, the first K also every
  // smaller size, and ">" the last K's range (included) and above.
  CHECK(parse_allocator_config("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", "").roundup_power2_divisions ==
        Divisions{1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8});
  CHECK(parse_allocator_config("roundup_power2_divisions:[1:2, 4:4]", "").roundup_power2_divisions ==
        Divisions{2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(parse_allocator_config("roundup_power2_divisions:[>:2]", "").roundup_power2_divisions ==
        Divisions{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2});
  // Sizes past the last range land in it (65536 MiB = 64 GiB -> the last interval).
  CHECK(parse_allocator_config("roundup_power2_divisions:[65536:0,>:4]", "").roundup_power2_divisions[15] == 4);
  // With the list, a comma inside the brackets does not end the option.
  const AllocatorConfig c =
      parse_allocator_config("roundup_power2_divisions:[1:2,2:2,>:4],garbage_collection_threshold:0.5", "");
  CHECK(c.roundup_power2_divisions[0] == 2);
  CHECK(c.roundup_power2_divisions[1] == 4);  // ">" includes the last K's range, as in PyTorch
  CHECK(c.garbage_collection_threshold == 0.5);

  CHECK(contains(parse_error("roundup_power2_divisions:3"), "roundup_power2_divisions must be a power of two, got 3"));
  CHECK(contains(parse_error("roundup_power2_divisions:0"), "must be a power of two, got 0"));
  CHECK(contains(parse_error("roundup_power2_divisions:[256:3]"), "must be 0 or a power of two, got 3"));
  CHECK(contains(parse_error("roundup_power2_divisions:[300:2]"), "sizes must be powers of two (MiB), got 300"));
  CHECK(contains(parse_error("roundup_power2_divisions:[256:2"), "lacks its closing ]"));
  CHECK(contains(parse_error("roundup_power2_divisions:[256]"), "entries are MiB:divisions or >:divisions"));
  CHECK(contains(parse_error("roundup_power2_divisions:x"), "roundup_power2_divisions must be"));
  for (const char* bad : {"roundup_power2_divisions:3", "roundup_power2_divisions:[256:3]"})
    CHECK(starts_with(parse_error(bad), "KILN_ALLOC_CONF: roundup_power2_divisions"));
}

TEST_CASE("roundup_power2_divisions rounds requests up to the next division, as PyTorch's round_size does") {
  CHECK(block_bytes("", 4608) == 4608);                            // plain 512-byte rounding
  CHECK(block_bytes("roundup_power2_divisions:2", 4608) == 6144);  // 4096 + 2048
  CHECK(block_bytes("roundup_power2_divisions:4", 4608) == 5120);  // 4096 + 1024
  CHECK(block_bytes("roundup_power2_divisions:4", 4096) == 4096);  // a power of two stays
  CHECK(block_bytes("roundup_power2_divisions:4", 2000) == 2048);  // 2000 <= 512 * 4: plain rounding
  CHECK(block_bytes("roundup_power2_divisions:8", (1 << 20) + 1) == i64(kMiB + kMiB / 8));
  CHECK(block_bytes("roundup_power2_divisions:4", 3 * kMiB + 1) == i64(3 * kMiB + kMiB / 2));  // 2 MiB + 3 * 512 KiB
  // Per range: [2, 4) MiB gets 2 divisions, everything below 1.
  CHECK(block_bytes("roundup_power2_divisions:[1:1,2:2]", 2 * kMiB + 1) == i64(3 * kMiB));
  CHECK(block_bytes("roundup_power2_divisions:[1:1,2:2]", kMiB + 1) == i64(kMiB + 512));
  // roundup_bypass_threshold_mb: larger requests keep the plain rounding.
  CHECK(block_bytes("roundup_power2_divisions:2,roundup_bypass_threshold_mb:2", 3 * kMiB + 1) == i64(3 * kMiB + 512));
  CHECK(block_bytes("roundup_power2_divisions:2,roundup_bypass_threshold_mb:4", 3 * kMiB + 1) == i64(4 * kMiB));
  CHECK(parse_allocator_config("roundup_bypass_threshold_mb:128", "").roundup_bypass_threshold == 128 * kMiB);
  CHECK(starts_with(parse_error("roundup_bypass_threshold_mb:-1"),
                    "KILN_ALLOC_CONF: roundup_bypass_threshold_mb must be a whole number of MiB"));
}

TEST_CASE("KILN_ALLOC_CONF max_non_split_rounding_mb: how much larger a cached block an oversize request may take") {
  CHECK(parse_allocator_config("", "").max_non_split_rounding == 20 * kMiB);
  CHECK(parse_allocator_config("max_non_split_rounding_mb:64", "").max_non_split_rounding == 64 * kMiB);
  CHECK(contains(parse_error("max_non_split_rounding_mb:19"), "max_non_split_rounding_mb must be at least 20, got 19"));
  // A cached 64 MiB block and a 40 MiB request (both oversize with max_split_size_mb:32):
  // 24 MiB too large for the default 20 MiB, within 30 MiB.
  for (const auto& [conf, reused] : {std::pair{"max_split_size_mb:32", false},
                                     std::pair{"max_split_size_mb:32,max_non_split_rounding_mb:30", true}}) {
    CAPTURE(conf);
    TestAllocator a(0, parse_allocator_config(conf, ""));
    void* big = a->allocate(64 * kMiB);
    a->free(big);
    void* p = a->allocate(40 * kMiB);
    CHECK((p == big) == reused);
    CHECK(a->stats().num_device_alloc == (reused ? 1 : 2));
    a->free(p);
  }
}

TEST_CASE("KILN_ALLOC_CONF: PyTorch's other options are accepted where Kiln already does what they ask") {
  for (const char* ok : {"backend:native", "release_lock_on_cudamalloc:False", "pinned_use_cuda_host_register:False",
                         "pinned_use_background_threads:False", "pinned_num_register_threads:1",
                         "pinned_num_register_threads:8", "pinned_num_register_threads:128"}) {
    CAPTURE(ok);
    CHECK_NOTHROW((void)parse_allocator_config(ok, ""));
  }
  for (const char* bad : {"pinned_num_register_threads:3", "pinned_num_register_threads:0"})
    CHECK(contains(parse_error(bad), "KILN_ALLOC_CONF: pinned_num_register_threads must be a power of two"));
  CHECK(contains(parse_error("pinned_num_register_threads:256"), "must be at most 128, got 256"));
  CHECK(contains(parse_error("pinned_num_register_threads:many"),
                 "pinned_num_register_threads must be a power of two"));
  CHECK(contains(parse_error("backend:jemalloc"), "KILN_ALLOC_CONF: backend must be native"));
  CHECK(contains(parse_error("release_lock_on_cudamalloc:maybe"), "must be True or False"));
}

TEST_CASE("KILN_ALLOC_CONF: PyTorch options Kiln does not support are refused by name, saying what to use") {
  const struct {
    const char* conf;
    const char* says;
  } refused[] = {
      {"backend:cudaMallocAsync", "use expandable_segments:True"},
      {"release_lock_on_cudamalloc:True", "release_lock_on_cudamalloc:False, which is accepted"},
      {"pinned_use_cuda_host_register:True", "cudaHostAlloc"},
      {"pinned_use_background_threads:True", "no background thread"},
      {"pinned_reserve_segment_size_mb:64", "remove it"},
      {"graph_capture_record_stream_reuse:True", "remove it"},
  };
  for (const auto& r : refused) {
    const std::string msg = parse_error(r.conf);
    INFO(r.conf << ": " << msg);
    CHECK(starts_with(msg, std::string("KILN_ALLOC_CONF: ") + r.conf + " is not supported: "));
    CHECK(contains(msg, r.says));
  }
  // An unknown option lists the ones Kiln knows.
  const std::string unknown = parse_error("roundup_power2:4");
  CHECK(starts_with(unknown, "KILN_ALLOC_CONF: unknown option \"roundup_power2\""));
  CHECK(contains(unknown, "expandable_segments"));
  CHECK(contains(unknown, "pinned_num_register_threads"));
}
