// The pinned host cache's logic on the host test double (hand-completed events), so it runs on
// any machine: blocks on the one pseudo host stream, record_stream with the streams of any
// GPU (the default stream included: it is never the block's "own" stream), reuse deferred
// until every recorded stream's event completed, the process-wide stream keys, statistics,
// and the host_memory_* API before first use. tests/cuda/test_transfer.cpp runs the real
// thing (cudaHostAlloc, CUDA events) on a GPU.
#include <cstring>
#include <thread>

#include "allocator/pinned_host_allocator.h"
#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// A PinnedHostAllocator over host memory with manual events, with its source at hand.
struct TestPinned {
  HostSegmentSource* source;
  std::unique_ptr<PinnedHostAllocator> pinned;
  TestPinned() {
    auto src = std::make_unique<HostSegmentSource>(HostSegmentSource::Options{0, true});
    source = src.get();
    pinned = std::make_unique<PinnedHostAllocator>(std::move(src));
  }
  CachingAllocator& cache() { return pinned->caching_allocator(); }
};

const Stream kDefault0(Device::cuda(0), 0);
const Stream kDefault1(Device::cuda(1), 0);
const Stream kSide0(Device::cuda(0), 0x7000);

}  // namespace

TEST_CASE("pinned host cache: blocks are cached, split and reused on the host pseudo stream") {
  TestPinned t;
  CHECK_FALSE(static_cast<bool>(t.pinned->allocate(0)));  // nothing for 0 bytes, as the device allocators
  void* first = nullptr;
  {
    DataPtr a = t.pinned->allocate(3000);
    REQUIRE(static_cast<bool>(a));
    first = a.get();
    std::memset(a.get(), 0x5a, 3000);  // real, writable memory
    DataPtr b = t.pinned->allocate(5 * kMiB);
    const MemoryStats s = t.cache().stats();
    CHECK(s.allocation[StatPool::All].current == 2);
    CHECK(s.allocated_bytes[StatPool::Small].current == 3072);
    CHECK(s.segment[StatPool::All].current == 2);  // a 2 MiB small segment and a 20 MiB large one
    CHECK(s.reserved_bytes[StatPool::All].current == i64(22 * kMiB));
    CHECK(segment_of(t.cache(), a.get()).stream == PinnedHostAllocator::kHostStream);
  }
  // Freed when the DataPtrs died; the segments stay cached and serve the next request.
  MemoryStats s = t.cache().stats();
  CHECK(s.allocation[StatPool::All].current == 0);
  CHECK(s.reserved_bytes[StatPool::All].current == i64(22 * kMiB));
  {
    DataPtr again = t.pinned->allocate(2000);
    CHECK(again.get() == first);
  }
  CHECK(t.cache().stats().num_device_alloc == 2);
  t.cache().empty_cache();
  CHECK(t.cache().stats().reserved_bytes[StatPool::All].current == 0);
  CHECK(t.source->live_bytes() == 0);
}

TEST_CASE("pinned host cache: a block used by a stream waits for that stream's event, the default stream too") {
  TestPinned t;
  void* used = nullptr;
  {
    DataPtr a = t.pinned->allocate(64 * kKiB);
    used = a.get();
    // The legacy default stream's handle is 0; the host pseudo stream is not, so the use counts.
    t.pinned->record_stream(a.get(), kDefault0);
    t.pinned->record_stream(a.get(), kDefault0);  // once per stream
    t.pinned->record_stream(a.get(), kDefault1);  // the same handle on another GPU is another stream
  }
  CHECK(t.source->pending_events() == 2);
  CHECK(block_at(t.cache(), used).state == BlockState::AwaitingFree);
  // Not reused while an event is pending: the same request gets the next block.
  {
    DataPtr b = t.pinned->allocate(64 * kKiB);
    CHECK(b.get() != used);
  }
  t.source->complete_all_events();
  // The next allocator call returns the block to the cache, and best fit hands it out again.
  DataPtr c = t.pinned->allocate(64 * kKiB);
  CHECK(c.get() == used);
  CHECK(t.source->pending_events() == 0);
}

TEST_CASE("pinned host cache: empty_cache waits for pending events, then releases whole segments") {
  TestPinned t;
  {
    DataPtr a = t.pinned->allocate(12 * kMiB);
    t.pinned->record_stream(a.get(), kSide0);
  }
  CHECK(t.cache().stats().active[StatPool::All].current == 1);  // awaiting its event
  t.cache().empty_cache();  // the host double's wait completes the event
  const MemoryStats s = t.cache().stats();
  CHECK(s.active[StatPool::All].current == 0);
  CHECK(s.reserved_bytes[StatPool::All].current == 0);
  CHECK(s.num_device_free == 1);
}

TEST_CASE("pinned host cache: record_stream refuses a CPU stream and memory it did not hand out") {
  TestPinned t;
  DataPtr a = t.pinned->allocate(1024);
  CHECK_THROWS_WITH_AS(t.pinned->record_stream(a.get(), Stream(Device::cpu(), 0)),
                       doctest::Contains("record_stream: expected a CUDA stream, got one on cpu"), Error);
  int not_pinned = 0;
  CHECK_THROWS_WITH_AS(t.pinned->record_stream(&not_pinned, kSide0),
                       doctest::Contains("record_stream: "), Error);
}

TEST_CASE("pinned host cache: stream keys are process-wide, stable, and map back to their streams") {
  const StreamId k0 = PinnedHostAllocator::stream_key(kDefault0);
  const StreamId k1 = PinnedHostAllocator::stream_key(kDefault1);
  const StreamId ks = PinnedHostAllocator::stream_key(kSide0);
  CHECK(k0 >= 1);
  CHECK(k0 != k1);
  CHECK(k0 != ks);
  CHECK(k1 != ks);
  CHECK(k0 != PinnedHostAllocator::kHostStream);
  CHECK(PinnedHostAllocator::stream_key(kSide0) == ks);  // the thread's remembered key
  CHECK(PinnedHostAllocator::stream_key(kDefault0) == k0);
  CHECK(PinnedHostAllocator::stream_of_key(k0) == kDefault0);
  CHECK(PinnedHostAllocator::stream_of_key(k1) == kDefault1);
  CHECK(PinnedHostAllocator::stream_of_key(ks) == kSide0);
  // Another thread sees the same keys.
  StreamId from_thread = 0;
  std::thread([&] { from_thread = PinnedHostAllocator::stream_key(kDefault1); }).join();
  CHECK(from_thread == k1);
  CHECK_THROWS_WITH_AS(PinnedHostAllocator::stream_of_key(0), doctest::Contains("is not a stream key"), Error);
  CHECK_THROWS_WITH_AS(PinnedHostAllocator::stream_of_key(1u << 30), doctest::Contains("is not a stream key"), Error);
}

TEST_CASE("pinned host cache: the process's cache needs CUDA; its reports work before first use") {
  const std::map<std::string, int64_t> stats = cuda::host_memory_stats();
  CHECK(stats.count("allocated_bytes.all.current") == 1);
  CHECK(stats.count("num_device_alloc") == 1);
  const std::string summary = cuda::host_memory_summary();
  CHECK(summary.find("Kiln pinned host memory summary") != std::string::npos);
  CHECK(summary.find("CPU reserved memory") != std::string::npos);
  CHECK(cuda::host_memory_snapshot().device == "cpu:pinned");
  cuda::host_empty_cache();  // nothing cached, nothing to do
  cuda::reset_peak_host_memory_stats();
  cuda::reset_accumulated_host_memory_stats();
  if (!cuda::is_available()) {
    CHECK(stats.at("reserved_bytes.all.current") == 0);
    CHECK(stats.at("max_split_size") == -1);
    CHECK_THROWS_WITH_AS(pinned_host_allocator("pin_memory"),
                         doctest::Contains(cuda::is_built() ? "pin_memory: pinned host memory needs a CUDA GPU"
                                                            : "pin_memory: pinned host memory needs CUDA, and this "
                                                              "build of Kiln has no CUDA support"),
                         Error);
  }
}
