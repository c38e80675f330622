// Out of memory on a host source with a 64 MiB capacity: the release-and-retry path, the
// OutOfMemoryError and what its message says, and that an OOM loses nothing: live blocks keep
// their bytes, statistics move only in their OOM counters, later allocations still work.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr size_t kCapacity = 64 * kMiB;

/// A live block and the pattern it holds.
struct Filled {
  void* ptr;
  size_t bytes;
  uint8_t seed;
};

uint8_t pattern_byte(uint8_t seed, size_t i) { return static_cast<uint8_t>(seed * 131u + i * 7u + (i >> 9)); }

Filled fill(void* p, size_t bytes, uint8_t seed) {
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < bytes; ++i) b[i] = pattern_byte(seed, i);
  return {p, bytes, seed};
}

/// Index of the first byte that does not hold the block's pattern, or bytes when all do.
size_t first_mismatch(const Filled& f) {
  const auto* b = static_cast<const uint8_t*>(f.ptr);
  for (size_t i = 0; i < f.bytes; ++i)
    if (b[i] != pattern_byte(f.seed, i)) return i;
  return f.bytes;
}

/// The message of the OutOfMemoryError that `f` throws ("" and a failed check if none).
template <typename F>
std::string oom_message(F&& f) {
  try {
    f();
  } catch (const OutOfMemoryError& e) {
    return e.what();
  }
  FAIL_CHECK("no OutOfMemoryError was thrown");
  return "";
}

bool stat_equal(const Stat& a, const Stat& b) {
  return a.current == b.current && a.peak == b.peak && a.allocated == b.allocated && a.freed == b.freed;
}

/// Every statistic of `a` and `b` equal, except the counters of the out-of-memory path
/// (num_ooms, num_alloc_retries, and num_sync_all_streams: each retry synchronises).
void check_same_except_oom_counters(const MemoryStats& a, const MemoryStats& b) {
  const std::pair<const char*, StatArray MemoryStats::*> arrays[] = {
      {"allocation", &MemoryStats::allocation},         {"allocated_bytes", &MemoryStats::allocated_bytes},
      {"segment", &MemoryStats::segment},               {"reserved_bytes", &MemoryStats::reserved_bytes},
      {"active", &MemoryStats::active},                 {"active_bytes", &MemoryStats::active_bytes},
      {"inactive_split", &MemoryStats::inactive_split}, {"inactive_split_bytes", &MemoryStats::inactive_split_bytes},
      {"requested_bytes", &MemoryStats::requested_bytes}};
  for (const auto& [name, member] : arrays)
    for (StatPool pool : {StatPool::All, StatPool::Large, StatPool::Small}) {
      INFO(name << " pool " << static_cast<int>(pool));
      CHECK(stat_equal((a.*member)[pool], (b.*member)[pool]));
    }
  CHECK(stat_equal(a.oversize_allocations, b.oversize_allocations));
  CHECK(stat_equal(a.oversize_segments, b.oversize_segments));
  CHECK(a.num_device_alloc == b.num_device_alloc);
  CHECK(a.num_device_free == b.num_device_free);
}

}  // namespace

TEST_CASE("an allocation that fits only after the cache is released succeeds, with one retry") {
  TestAllocator a(kCapacity);
  void* p0 = a->allocate(20 * kMiB);  // three 20 MiB segments: 60 of 64 MiB
  void* p1 = a->allocate(20 * kMiB);
  void* p2 = a->allocate(20 * kMiB);
  a->free(p1);  // a cached whole segment
  // 12 MiB fits the cached block: no device call, no retry.
  void* fits = a->allocate(12 * kMiB);
  CHECK(fits == p1);
  CHECK(a->stats().num_alloc_retries == 0);
  a->free(fits);
  // 22 MiB fits no cached block and not beside 60 MiB: the cached 20 MiB segment is
  // released and the retry succeeds.
  void* big = a->allocate(22 * kMiB);
  REQUIRE(big != nullptr);
  const MemoryStats s = a->stats();
  CHECK(s.num_alloc_retries == 1);
  CHECK(s.num_ooms == 0);
  CHECK(s.num_device_alloc == 4);
  CHECK(s.num_device_free == 1);
  CHECK(s.segment[StatPool::All].current == 3);
  CHECK(s.reserved_bytes[StatPool::All].current == i64(62 * kMiB));
  CHECK(s.allocated_bytes[StatPool::All].current == i64(62 * kMiB));
  CHECK(a.source->live_bytes() == 62 * kMiB);
  for (void* p : {p0, p2, big}) a->free(p);
}

TEST_CASE("an allocation that cannot fit throws OutOfMemoryError; nothing alive is lost or changed") {
  TestAllocator a(kCapacity);
  a->record_history(true);
  // 60 MiB reserved of 64: 20 + 20 + 18 MiB large segments and one 2 MiB small segment
  // holding two blocks. Each block holds its own pattern.
  std::vector<Filled> live;
  live.push_back(fill(a->allocate(20 * kMiB), 20 * kMiB, 1));
  live.push_back(fill(a->allocate(20 * kMiB), 20 * kMiB, 2));
  live.push_back(fill(a->allocate(18 * kMiB), 18 * kMiB, 3));
  live.push_back(fill(a->allocate(1000), 1000, 4));              // a 1 KiB block
  live.push_back(fill(a->allocate(300 * kKiB), 300 * kKiB, 5));  // a 300 KiB block
  const size_t allocated = 58 * kMiB + 1 * kKiB + 300 * kKiB;
  const MemoryStats before = a->stats();
  REQUIRE(before.reserved_bytes[StatPool::All].current == i64(60 * kMiB));
  REQUIRE(before.allocated_bytes[StatPool::All].current == i64(allocated));

  // 10 MiB + 1 needs a 12 MiB segment: 60 + 12 > 64, and nothing is cached to release.
  const size_t ask = 10 * kMiB + 1;
  const std::string msg = oom_message([&] { a->allocate(ask, 0, "my_op"); });
  INFO(msg);
  CHECK(msg.rfind("my_op: ", 0) == 0);  // starts with the op that allocated
  CHECK(msg.find("out of memory on cpu") != std::string::npos);
  CHECK(msg.find("10.00 MiB (10485761 bytes") != std::string::npos);   // the size asked for
  CHECK(msg.find("64.00 MiB in total") != std::string::npos);          // the device total
  CHECK(msg.find("4.00 MiB is free") != std::string::npos);            // and what is left of it
  CHECK(msg.find("58.29 MiB allocated") != std::string::npos);         // Kiln's allocated
  CHECK(msg.find("60.00 MiB reserved") != std::string::npos);          // and reserved
  // The small segment's free 1.71 MiB (2 MiB - 1 KiB - 300 KiB) cannot be released.
  CHECK(msg.find("1.71 MiB of it is non-releasable") != std::string::npos);
  CHECK(msg.find("KILN_ALLOC_CONF=max_split_size_mb") != std::string::npos);
  // An OutOfMemoryError is a kiln::Error too.
  CHECK_THROWS_AS(a->allocate(ask), Error);

  const MemoryStats after = a->stats();
  CHECK(after.num_ooms == before.num_ooms + 2);
  CHECK(after.num_alloc_retries == before.num_alloc_retries + 2);  // each released the cache and retried
  CHECK(after.num_sync_all_streams == before.num_sync_all_streams + 2);  // after waiting for stream events
  check_same_except_oom_counters(before, after);
  CHECK(a.source->live_bytes() == 60 * kMiB);
  for (const Filled& f : live) CHECK(first_mismatch(f) == f.bytes);

  // The history ends with the OOM: the size asked for, on stream 0.
  const MemorySnapshot snap = a->snapshot();
  REQUIRE_FALSE(snap.history.empty());
  const TraceEntry& last = snap.history.back();
  CHECK(last.action == TraceAction::Oom);
  CHECK(last.size == ask);
  CHECK(last.stream == 0);
  CHECK(std::string(trace_action_name(last.action)) == "oom");

  // Later allocations that fit still work: 1 MiB from the small segment's free rest, then a
  // second 2 MiB small segment (62 MiB of 64), then 10 MiB + 1 from a freed 20 MiB block.
  void* s1 = a->allocate(1 * kMiB);
  CHECK(a.current(&MemoryStats::segment) == 4);
  void* s2 = a->allocate(1 * kMiB);
  CHECK(a.current(&MemoryStats::segment) == 5);
  CHECK(a.source->live_bytes() == 62 * kMiB);
  Filled f1 = fill(s1, 1 * kMiB, 6), f2 = fill(s2, 1 * kMiB, 7);
  a->free(live[0].ptr);
  void* reuse = a->allocate(ask);
  CHECK(reuse == live[0].ptr);
  Filled f3 = fill(reuse, ask, 8);
  for (size_t i = 1; i < live.size(); ++i) CHECK(first_mismatch(live[i]) == live[i].bytes);
  for (const Filled& f : {f1, f2, f3}) CHECK(first_mismatch(f) == f.bytes);
  CHECK(a->stats().num_ooms == before.num_ooms + 2);
  for (size_t i = 1; i < live.size(); ++i) a->free(live[i].ptr);
  for (void* p : {s1, s2, reuse}) a->free(p);
  a->empty_cache();
  CHECK(a.source->live_bytes() == 0);
}

TEST_CASE("an OOM caused by fragmentation names the non-releasable memory and the max_split_size knob") {
  TestAllocator a(kCapacity);
  // Three 20 MiB segments, each [9 MiB kept][9 MiB freed + 2 MiB rest = 11 MiB free piece].
  std::vector<void*> keep, drop;
  for (int i = 0; i < 3; ++i) {
    keep.push_back(a->allocate(9 * kMiB));
    drop.push_back(a->allocate(9 * kMiB));
  }
  REQUIRE(a.current(&MemoryStats::segment) == 3);
  for (void* p : drop) a->free(p);
  CHECK(a.current(&MemoryStats::inactive_split_bytes) == i64(33 * kMiB));
  // 12 MiB fits none of the 11 MiB pieces, and a 12 MiB segment does not fit beside 60 MiB.
  const std::string msg = oom_message([&] { a->allocate(12 * kMiB, 0, "linear"); });
  INFO(msg);
  CHECK(msg.rfind("linear: ", 0) == 0);
  CHECK(msg.find("12.00 MiB (12582912 bytes") != std::string::npos);
  CHECK(msg.find("27.00 MiB allocated") != std::string::npos);
  CHECK(msg.find("60.00 MiB reserved") != std::string::npos);
  CHECK(msg.find("33.00 MiB of it is non-releasable") != std::string::npos);
  CHECK(msg.find("KILN_ALLOC_CONF=max_split_size_mb:21") != std::string::npos);
  CHECK(a->stats().num_ooms == 1);
  // The 11 MiB pieces still serve what fits them (equal sizes go by address: the lowest
  // segment's piece).
  void* p = a->allocate(11 * kMiB);
  CHECK(p == static_cast<char*>(*std::min_element(keep.begin(), keep.end())) + 9 * kMiB);
  a->free(p);
  for (void* k : keep) a->free(k);
}

TEST_CASE("requests beyond the device or beyond size_t fail cleanly") {
  TestAllocator a(kCapacity);
  void* p = a->allocate(1 * kMiB);
  fill(p, 1 * kMiB, 9);
  const std::string msg = oom_message([&] { a->allocate(100 * kMiB); });
  CHECK(msg.rfind("allocate: out of memory on cpu", 0) == 0);  // the default op name
  CHECK(msg.find("100.00 MiB (104857600 bytes") != std::string::npos);
  // The largest request whose rounding does not overflow: an OOM, not a wrap-around.
  const size_t largest = std::numeric_limits<size_t>::max() - CachingAllocator::kRoundLarge;
  CHECK_THROWS_AS(a->allocate(largest), OutOfMemoryError);
  // One byte more would overflow the rounding: a plain Error saying so.
  try {
    a->allocate(largest + 1, 0, "huge");
    FAIL_CHECK("no error");
  } catch (const OutOfMemoryError&) {
    FAIL_CHECK("an overflowing size is not an out-of-memory condition");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).rfind("huge: ", 0) == 0);
    CHECK(std::string(e.what()).find("overflows") != std::string::npos);
  }
  CHECK(a->stats().num_ooms == 2);
  CHECK(first_mismatch({p, 1 * kMiB, 9}) == 1 * kMiB);
  a->free(p);
  CHECK(a.current(&MemoryStats::allocation) == 0);
}

// A block freed after record_stream is memory the user has given back; only a stream event
// stands between it and the cache. Before declaring the device out of memory the retry should
// wait for such events, as PyTorch's release_cached_blocks does (synchronize_and_free_events,
// counted in num_sync_all_streams), instead of failing while 20 MiB is about to come free.
TEST_CASE("the out-of-memory retry waits for pending stream events before giving up") {
  TestAllocator a(40 * kMiB);  // manual events
  void* p = a->allocate(20 * kMiB, 1);
  a->record_stream(p, 2);
  a->free(p);  // awaits stream 2's event
  REQUIRE(a.source->pending_events() == 1);
  void* q = nullptr;
  CHECK_NOTHROW(q = a->allocate(30 * kMiB, 1));  // fits once p's segment is released
  const MemoryStats s = a->stats();
  CHECK(s.num_ooms == 0);
  CHECK(s.num_alloc_retries == 1);
  CHECK(s.num_sync_all_streams == 1);
  CHECK(a.source->pending_events() == 0);
  if (q != nullptr) a->free(q);
  a->empty_cache();
  CHECK(a.source->live_bytes() == 0);
}
