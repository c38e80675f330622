// The allocator's settings: parsing KILN_ALLOC_CONF / KILN_NO_CACHING (every error names its
// variable), caching turned off (each allocation an exact segment of its own, freed straight
// back), and the garbage collection threshold (least recently freed cached segments go first).
#include <limits>
#include <set>
#include <string>

#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

/// The message of the kiln::Error that parsing throws ("" and a failed check if none).
std::string parse_error(std::string_view alloc_conf, std::string_view no_caching = "") {
  try {
    (void)parse_allocator_config(alloc_conf, no_caching);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL_CHECK("no error for KILN_ALLOC_CONF=\"" << std::string(alloc_conf) << "\" KILN_NO_CACHING=\""
                                               << std::string(no_caching) << "\"");
  return "";
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

/// The sizes of the allocator's segments, in order.
std::multiset<uint64_t> segment_sizes(CachingAllocator& a) {
  std::multiset<uint64_t> sizes;
  for (const SegmentInfo& seg : a.snapshot().segments) sizes.insert(seg.total_size);
  return sizes;
}

}  // namespace

TEST_CASE("parse_allocator_config: defaults, and max_split_size_mb above 20 MiB") {
  const AllocatorConfig d = parse_allocator_config("", "");
  CHECK(d.max_split_size == std::numeric_limits<size_t>::max());
  CHECK(d.garbage_collection_threshold == 0.0);
  CHECK(d.caching);

  CHECK(parse_allocator_config("max_split_size_mb:21", "").max_split_size == 21 * kMiB);
  CHECK(parse_allocator_config("max_split_size_mb:64", "").max_split_size == 64 * kMiB);
  CHECK(parse_allocator_config("max_split_size_mb:4096", "").max_split_size == 4096 * kMiB);

  for (const char* bad : {"20", "0", "-1", "abc", "1.5", "", "21abc", "0x40", "99999999999999999999999",
                          "18446744073709551615"}) {
    const std::string msg = parse_error(std::string("max_split_size_mb:") + bad);
    INFO("value \"" << bad << "\": " << msg);
    CHECK(starts_with(msg, "KILN_ALLOC_CONF: "));
    CHECK(msg.find("max_split_size_mb") != std::string::npos);
  }
  CHECK(parse_error("max_split_size_mb:20").find("greater than 20") != std::string::npos);
}

TEST_CASE("parse_allocator_config: garbage_collection_threshold strictly between 0 and 1") {
  CHECK(parse_allocator_config("garbage_collection_threshold:0.5", "").garbage_collection_threshold == 0.5);
  CHECK(parse_allocator_config("garbage_collection_threshold:0.001", "").garbage_collection_threshold == 0.001);
  CHECK(parse_allocator_config("garbage_collection_threshold:0.999", "").garbage_collection_threshold == 0.999);
  for (const char* bad : {"0", "1", "0.0", "1.0", "1.5", "-0.1", "abc", "", "nan", "inf", "0.5x"}) {
    const std::string msg = parse_error(std::string("garbage_collection_threshold:") + bad);
    INFO("value \"" << bad << "\": " << msg);
    CHECK(starts_with(msg, "KILN_ALLOC_CONF: "));
    CHECK(msg.find("garbage_collection_threshold") != std::string::npos);
  }
}

TEST_CASE("parse_allocator_config: spaces and empty items are tolerated; unknown options and missing colons are not") {
  const AllocatorConfig c =
      parse_allocator_config("  max_split_size_mb : 64 ,\tgarbage_collection_threshold: 0.25  ", "");
  CHECK(c.max_split_size == 64 * kMiB);
  CHECK(c.garbage_collection_threshold == 0.25);
  CHECK(parse_allocator_config(",,max_split_size_mb:30,,", "").max_split_size == 30 * kMiB);
  for (const char* empty : {",", " , ,", "   ", ",,,"}) {
    const AllocatorConfig e = parse_allocator_config(empty, "");
    CHECK(e.max_split_size == std::numeric_limits<size_t>::max());
    CHECK(e.garbage_collection_threshold == 0.0);
  }

  for (const char* unknown : {"max_split_size:64", "foo:1", "max_split_size_mb:64,roundup_power2:4"}) {
    const std::string msg = parse_error(unknown);
    INFO(unknown << ": " << msg);
    CHECK(starts_with(msg, "KILN_ALLOC_CONF: unknown option"));
  }
  for (const char* no_colon : {"max_split_size_mb", "max_split_size_mb=64", "max_split_size_mb:64,0.5"}) {
    const std::string msg = parse_error(no_colon);
    INFO(no_colon << ": " << msg);
    CHECK(starts_with(msg, "KILN_ALLOC_CONF: "));
    CHECK(msg.find("option:value") != std::string::npos);
  }
}

TEST_CASE("parse_allocator_config: KILN_NO_CACHING is 1, 0 or empty") {
  CHECK_FALSE(parse_allocator_config("", "1").caching);
  CHECK(parse_allocator_config("", "0").caching);
  CHECK(parse_allocator_config("", "").caching);
  const AllocatorConfig both = parse_allocator_config("max_split_size_mb:32", "1");
  CHECK(both.max_split_size == 32 * kMiB);
  CHECK_FALSE(both.caching);
  for (const char* bad : {"yes", "true", "2", "01", "-1"}) {
    const std::string msg = parse_error("", bad);
    INFO("value \"" << bad << "\": " << msg);
    CHECK(starts_with(msg, "KILN_NO_CACHING: "));
  }
  // A bad KILN_ALLOC_CONF is reported even when KILN_NO_CACHING is fine, and by its own name.
  CHECK(starts_with(parse_error("bogus:1", "1"), "KILN_ALLOC_CONF: "));
}

TEST_CASE("caching off: every allocation is its own exact segment, given back when freed") {
  AllocatorConfig config;
  config.caching = false;
  TestAllocator a(0, config);
  void* p = a->allocate(100);              // 512 B, not a 2 MiB small segment
  void* q = a->allocate(100);              // not carved from p's segment: a second one
  void* r = a->allocate(1 * kMiB + 1);     // 1 MiB + 512 B, not a 20 MiB segment
  void* s = a->allocate(30 * kMiB + 1);    // 30 MiB + 512 B, not rounded to 2 MiB
  const size_t r_size = 1 * kMiB + 512, s_size = 30 * kMiB + 512;
  {
    const MemoryStats st = a->stats();
    CHECK(st.segment[StatPool::Small].current == 2);
    CHECK(st.segment[StatPool::Large].current == 2);
    CHECK(st.reserved_bytes[StatPool::Small].current == 1024);
    CHECK(st.reserved_bytes[StatPool::Large].current == i64(r_size + s_size));
    CHECK(st.allocated_bytes[StatPool::All].current == st.reserved_bytes[StatPool::All].current);
    CHECK(st.inactive_split[StatPool::All].current == 0);
    CHECK(st.num_device_alloc == 4);
  }
  CHECK(segment_sizes(*a.allocator) == std::multiset<uint64_t>{512, 512, r_size, s_size});
  CHECK(a.source->live_bytes() == 1024 + r_size + s_size);

  a->free(p);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(512 + r_size + s_size));
  CHECK(a->stats().num_device_free == 1);
  CHECK(segment_sizes(*a.allocator) == std::multiset<uint64_t>{512, r_size, s_size});
  for (void* x : {q, r, s}) a->free(x);
  {
    const MemoryStats st = a->stats();
    CHECK(st.reserved_bytes[StatPool::All].current == 0);
    CHECK(st.segment[StatPool::All].current == 0);
    CHECK(st.num_device_free == 4);
  }
  CHECK(a.source->live_bytes() == 0);
  // Nothing was cached: the same request goes to the device again.
  void* again = a->allocate(100);
  CHECK(a->stats().num_device_alloc == 5);
  a->free(again);
  CHECK(a->stats().num_device_free == 5);
}

TEST_CASE("caching off: a block used by another stream is given back once its event completes") {
  AllocatorConfig config;
  config.caching = false;
  TestAllocator a(0, config);  // manual events
  void* p = a->allocate(4 * kKiB, 1);
  a->record_stream(p, 2);
  a->free(p);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(4 * kKiB));  // still in use by stream 2
  CHECK(a->stats().num_device_free == 0);
  a.source->complete_all_events();
  void* q = a->allocate(512, 1);  // the next call processes the event
  CHECK(a->stats().num_device_free == 1);
  CHECK(a.current(&MemoryStats::reserved_bytes) == 512);
  a->free(q);
  CHECK(a.current(&MemoryStats::reserved_bytes) == 0);
  CHECK(a.source->live_bytes() == 0);
}

TEST_CASE("garbage collection threshold: least recently freed cached segments go before growing past it") {
  AllocatorConfig config;
  config.garbage_collection_threshold = 0.5;  // of a 100 MiB device: 50 MiB
  TestAllocator a(100 * kMiB, config);
  void* s = a->allocate(4 * kKiB);  // a split 2 MiB small segment: never a candidate
  void* x = a->allocate(20 * kMiB);
  void* y = a->allocate(12 * kMiB);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(34 * kMiB));
  a->free(y);  // freed first: least recently used
  a->free(x);
  // 22 MiB fits no cached block; 34 + 22 > 50, so the 12 MiB segment goes (not the larger,
  // more recently freed 20 MiB one), which is enough: 22 + 22 <= 50.
  void* z = a->allocate(22 * kMiB);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(44 * kMiB));
  CHECK(segment_sizes(*a.allocator) == std::multiset<uint64_t>{2 * kMiB, 20 * kMiB, 22 * kMiB});
  CHECK(a->stats().num_device_free == 1);
  CHECK(a->stats().num_alloc_retries == 0);  // the device never ran out (100 MiB)
  // 28 MiB: 44 + 28 > 50; the 20 MiB segment, then the 22 MiB one (freed later) go.
  a->free(z);
  void* w = a->allocate(28 * kMiB);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(30 * kMiB));
  CHECK(segment_sizes(*a.allocator) == std::multiset<uint64_t>{2 * kMiB, 28 * kMiB});
  CHECK(a->stats().num_device_free == 3);
  // Nothing cached is left to release: the threshold does not stop the allocator growing.
  void* v = a->allocate(40 * kMiB);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(70 * kMiB));
  CHECK(a->stats().num_device_free == 3);
  for (void* p : {s, w, v}) a->free(p);

  // Without the threshold the same sequence keeps every cached segment.
  TestAllocator d(100 * kMiB);
  void* ds = d->allocate(4 * kKiB);
  void* dx = d->allocate(20 * kMiB);
  void* dy = d->allocate(12 * kMiB);
  d->free(dy);
  d->free(dx);
  void* dz = d->allocate(22 * kMiB);
  CHECK(d.current(&MemoryStats::reserved_bytes) == i64(56 * kMiB));
  CHECK(d->stats().num_device_free == 0);
  d->free(dz);
  d->free(ds);
}

TEST_CASE("garbage collection threshold: reaching it exactly releases nothing") {
  AllocatorConfig config;
  config.garbage_collection_threshold = 0.5;
  TestAllocator a(100 * kMiB, config);
  void* x = a->allocate(20 * kMiB);
  a->free(x);
  void* y = a->allocate(30 * kMiB);  // 20 + 30 == 50: at the threshold, not past it
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(50 * kMiB));
  CHECK(a->stats().num_device_free == 0);
  a->free(y);
  void* z = a->allocate(32 * kMiB);  // 50 + 32 > 50: both cached segments go (20 MiB first)
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(32 * kMiB));
  CHECK(a->stats().num_device_free == 2);
  a->free(z);
}
