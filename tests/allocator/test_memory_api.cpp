// The user-level memory API on Device::cpu(), driven by real tensors: their storage comes from
// the CPU device's caching allocator. That allocator is process-wide and other cases in this
// binary use it too, so every check compares before/after deltas, never absolute values.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "allocator/allocator_config.h"
#include "allocator/memory.h"
#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const Device kCpu = Device::cpu();

/// A float32 tensor of `bytes` bytes (a multiple of 4).
Tensor tensor_of_bytes(size_t bytes) { return empty({static_cast<int64_t>(bytes / 4)}, kFloat32); }

/// The CPU allocator's snapshot block at `p`, if any.
const BlockInfo* find_block(const MemorySnapshot& snap, const void* p) {
  for (const SegmentInfo& seg : snap.segments)
    for (const BlockInfo& b : seg.blocks)
      if (b.address == reinterpret_cast<uintptr_t>(p)) return &b;
  return nullptr;
}

}  // namespace

TEST_CASE("a CPU tensor's memory comes from the caching allocator: memory_allocated rises and falls with it") {
  const int64_t base = memory_allocated(kCpu);
  const int64_t base_requested = memory_stats(kCpu).at("requested_bytes.all.current");
  {
    Tensor t = tensor_of_bytes(4000);  // rounded to 4096
    CHECK(memory_allocated(kCpu) - base == 4096);
    CHECK(memory_stats(kCpu).at("requested_bytes.all.current") - base_requested == 4000);
    const MemorySnapshot snap = memory_snapshot(kCpu);
    const BlockInfo* b = find_block(snap, t.data_ptr());
    REQUIRE(b != nullptr);
    CHECK(b->state == BlockState::Active);
    CHECK(b->size == 4096);
    CHECK(b->requested_size == 4000);
    {
      Tensor u = empty({3}, kFloat64);  // 24 bytes: one 512-byte block
      CHECK(memory_allocated(kCpu) - base == 4096 + 512);
      Tensor view = u.slice(0, 1, 3);  // a view shares the storage: no new memory
      CHECK(memory_allocated(kCpu) - base == 4096 + 512);
    }
    CHECK(memory_allocated(kCpu) - base == 4096);
  }
  CHECK(memory_allocated(kCpu) == base);
  CHECK(memory_stats(kCpu).at("requested_bytes.all.current") == base_requested);

  // A large tensor is counted in the large pool.
  const int64_t large_base = memory_stats(kCpu).at("allocated_bytes.large_pool.current");
  {
    Tensor big = tensor_of_bytes(30 * kMiB);
    CHECK(memory_stats(kCpu).at("allocated_bytes.large_pool.current") - large_base == i64(30 * kMiB));
  }
  CHECK(memory_stats(kCpu).at("allocated_bytes.large_pool.current") == large_base);
}

TEST_CASE("memory_stats(cpu) has PyTorch's keys, consistent with the shorthand functions") {
  Tensor keep = tensor_of_bytes(64 * kKiB);
  const std::map<std::string, int64_t> m = memory_stats(kCpu);
  std::vector<std::string> expected;
  for (const char* stat : {"allocation", "allocated_bytes", "segment", "reserved_bytes", "active", "active_bytes",
                           "inactive_split", "inactive_split_bytes", "requested_bytes"})
    for (const char* pool : {"all", "large_pool", "small_pool"})
      for (const char* field : {"current", "peak", "allocated", "freed"})
        expected.push_back(fmt::format("{}.{}.{}", stat, pool, field));
  for (const char* stat : {"oversize_allocations", "oversize_segments"})
    for (const char* field : {"current", "peak", "allocated", "freed"}) expected.push_back(fmt::format("{}.{}", stat, field));
  for (const char* key : {"num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free", "max_split_size"})
    expected.push_back(key);
  for (const std::string& key : expected) {
    INFO(key);
    CHECK(m.count(key) == 1);
  }

  // max_split_size is -1 (PyTorch's SIZE_MAX as int64) unless KILN_ALLOC_CONF sets it.
  const AllocatorConfig& env = environment_allocator_config();
  if (std::getenv("KILN_ALLOC_CONF") == nullptr) CHECK(m.at("max_split_size") == -1);
  CHECK(m.at("max_split_size") ==
        (env.max_split_size == std::numeric_limits<size_t>::max() ? -1 : i64(env.max_split_size)));

  CHECK(m.at("allocated_bytes.all.current") == memory_allocated(kCpu));
  CHECK(m.at("allocated_bytes.all.peak") == max_memory_allocated(kCpu));
  CHECK(m.at("reserved_bytes.all.current") == memory_reserved(kCpu));
  CHECK(m.at("reserved_bytes.all.peak") == max_memory_reserved(kCpu));
  for (const char* stat : {"allocation", "allocated_bytes", "segment", "reserved_bytes", "active_bytes"}) {
    INFO(stat);
    CHECK(m.at(fmt::format("{}.all.current", stat)) ==
          m.at(fmt::format("{}.large_pool.current", stat)) + m.at(fmt::format("{}.small_pool.current", stat)));
  }
  CHECK(m.at("allocation.all.current") >= 1);  // `keep`, at least

  // One tensor's life: one more allocation made and one more freed.
  const int64_t made = m.at("allocation.all.allocated"), freed = m.at("allocation.all.freed");
  { Tensor t = tensor_of_bytes(8 * kKiB); }
  const std::map<std::string, int64_t> after = memory_stats(kCpu);
  CHECK(after.at("allocation.all.allocated") - made == 1);
  CHECK(after.at("allocation.all.freed") - freed == 1);
}

TEST_CASE("reset_peak_memory_stats, max_memory_allocated and reset_accumulated_memory_stats") {
  const int64_t base = memory_allocated(kCpu);
  { Tensor big = tensor_of_bytes(8 * kMiB); }
  CHECK(max_memory_allocated(kCpu) >= base + i64(8 * kMiB));
  reset_peak_memory_stats(kCpu);
  CHECK(max_memory_allocated(kCpu) == base);
  CHECK(max_memory_reserved(kCpu) == memory_reserved(kCpu));
  {
    Tensor t = tensor_of_bytes(256 * kKiB);
    CHECK(max_memory_allocated(kCpu) == base + i64(256 * kKiB));
  }
  CHECK(memory_allocated(kCpu) == base);
  CHECK(max_memory_allocated(kCpu) == base + i64(256 * kKiB));  // the peak stays

  reset_accumulated_memory_stats(kCpu);
  std::map<std::string, int64_t> m = memory_stats(kCpu);
  CHECK(m.at("allocation.all.allocated") == 0);
  CHECK(m.at("allocated_bytes.all.freed") == 0);
  CHECK(m.at("num_device_alloc") == 0);
  CHECK(m.at("allocated_bytes.all.current") == base);  // current values are untouched
  { Tensor t = tensor_of_bytes(2 * kKiB); }
  m = memory_stats(kCpu);
  CHECK(m.at("allocation.all.allocated") == 1);
  CHECK(m.at("allocation.all.freed") == 1);
  CHECK(m.at("allocated_bytes.all.allocated") == i64(2 * kKiB));
}

TEST_CASE("empty_cache(cpu) gives cached segments back once nothing in them is alive") {
  empty_cache(kCpu);
  const int64_t r0 = memory_reserved(kCpu);
  const int64_t frees0 = memory_stats(kCpu).at("num_device_free");
  {
    Tensor t = tensor_of_bytes(30 * kMiB);  // a 30 MiB segment of its own
    CHECK(memory_reserved(kCpu) - r0 == i64(30 * kMiB));
  }
  CHECK(memory_reserved(kCpu) - r0 == i64(30 * kMiB));  // cached, not released
  empty_cache(kCpu);
  CHECK(memory_reserved(kCpu) == r0);
  CHECK(memory_stats(kCpu).at("num_device_free") - frees0 == 1);
  // What is left is only segments with something alive in them.
  for (const SegmentInfo& seg : memory_snapshot(kCpu).segments) CHECK(seg.active_size > 0);

  // The all-devices form does the same.
  { Tensor t = tensor_of_bytes(30 * kMiB); }
  CHECK(memory_reserved(kCpu) - r0 == i64(30 * kMiB));
  empty_cache();
  CHECK(memory_reserved(kCpu) == r0);
}

TEST_CASE("record_memory_history: a tensor's alloc and free_completed, and only the newest N entries") {
  record_memory_history(kCpu, true, 1000);
  const void* addr = nullptr;
  {
    Tensor t = tensor_of_bytes(6 * kKiB);
    addr = t.data_ptr();
  }
  std::vector<TraceEntry> history = memory_snapshot(kCpu).history;
  const auto at = reinterpret_cast<uintptr_t>(addr);
  size_t alloc_index = history.size(), free_index = history.size();
  for (size_t i = 0; i < history.size(); ++i) {
    if (history[i].address == at && history[i].action == TraceAction::Alloc) alloc_index = i;
    if (history[i].address == at && history[i].action == TraceAction::FreeCompleted && i > alloc_index) free_index = i;
  }
  REQUIRE(alloc_index < history.size());
  CHECK(free_index < history.size());
  CHECK(history[alloc_index].size == 6 * kKiB);
  CHECK(history[alloc_index].stream == 0);
  for (size_t i = 1; i < history.size(); ++i) CHECK(history[i].time_us >= history[i - 1].time_us);

  // Only the newest 4 entries are kept: the last two tensor lives, oldest first.
  record_memory_history(kCpu, true, 4);
  std::vector<uintptr_t> addresses;
  for (int k = 0; k < 5; ++k) {
    Tensor t = tensor_of_bytes(512 * static_cast<size_t>(k + 1) * 4);
    addresses.push_back(reinterpret_cast<uintptr_t>(t.data_ptr()));
  }
  history = memory_snapshot(kCpu).history;
  REQUIRE(history.size() == 4);
  CHECK(history[0].action == TraceAction::Alloc);
  CHECK(history[0].address == addresses[3]);
  CHECK(history[0].size == 4 * 2048);
  CHECK(history[1].action == TraceAction::FreeCompleted);
  CHECK(history[2].action == TraceAction::Alloc);
  CHECK(history[2].address == addresses[4]);
  CHECK(history[2].size == 5 * 2048);
  CHECK(history[3].action == TraceAction::FreeCompleted);

  // Stopped: nothing more is recorded, and what was recorded stays readable.
  record_memory_history(kCpu, false);
  { Tensor t = tensor_of_bytes(1 * kKiB); }
  const std::vector<TraceEntry> stopped = memory_snapshot(kCpu).history;
  REQUIRE(stopped.size() == 4);
  CHECK(stopped[2].address == addresses[4]);
  CHECK_THROWS_WITH_AS(record_memory_history(kCpu, true, 0), doctest::Contains("record_memory_history:"), Error);
}

// PyTorch's free_completed entry carries the freed block's own address, so a trace consumer
// pairs it with its alloc. Here the freed block merges with a free neighbour first.
TEST_CASE("history: a free_completed entry names the block that was freed, even when it merges") {
  TestAllocator a;
  a->record_history(true);
  void* p = a->allocate(4 * kKiB);
  void* q = a->allocate(4 * kKiB);  // right after p
  a->free(p);
  a->free(q);  // merges into p's free block (and the tail)
  std::vector<TraceEntry> frees;
  for (const TraceEntry& e : a->snapshot().history)
    if (e.action == TraceAction::FreeCompleted) frees.push_back(e);
  REQUIRE(frees.size() == 2);
  CHECK(frees[0].address == reinterpret_cast<uintptr_t>(p));
  CHECK(frees[1].address == reinterpret_cast<uintptr_t>(q));
  CHECK(frees[1].size == 4 * kKiB);
}

TEST_CASE("write_memory_map writes an SVG file, and names itself when the path is not writable") {
  Tensor keep = tensor_of_bytes(100 * kKiB);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("kiln_test_memory_map_{}.svg", ::getpid());
  write_memory_map(path.string(), kCpu);
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string svg = text.str();
  std::filesystem::remove(path);
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("</svg>") > svg.find("<svg"));

  CHECK_THROWS_WITH_AS(write_memory_map("/nonexistent-kiln-directory/map.svg", kCpu),
                       doctest::Contains("write_memory_map: "), Error);
  try {
    write_memory_map("/nonexistent-kiln-directory/map.svg", kCpu);
  } catch (const Error& e) {
    CHECK(std::string(e.what()).rfind("write_memory_map: ", 0) == 0);
  }
}

TEST_CASE("memory_summary(cpu) is the CPU report, and a device without an allocator is an error") {
  Tensor keep = tensor_of_bytes(100 * kKiB);
  CHECK(memory_summary(kCpu).find("Kiln CPU memory summary") != std::string::npos);
  CHECK(memory_summary(kCpu, true).find("Kiln CPU memory summary") != std::string::npos);
  CHECK(&caching_allocator(kCpu) == &caching_allocator(kCpu));
  if (!cuda::is_built()) {
    CHECK_THROWS_WITH_AS(memory_stats(Device::cuda(0)),
                         doctest::Contains("memory_stats: cannot allocate memory on cuda:0: this build of Kiln has "
                                           "no CUDA support"),
                         Error);
  }
}
