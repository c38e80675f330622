// The caching allocator of cuda:0 over real cudaMalloc (this suite runs only with a GPU):
// exact statistics deltas, real device memory in the blocks, record_stream with real streams
// and events, empty_cache returning memory to the driver, and an OOM beyond the device. Every
// check is of something this process controls (never the device's free memory, which other
// processes change), so the suite passes under `ctest -j`.
//
// Each case allocates on a stream it creates, so no cached block of another case can serve
// it and the deltas are exact. Compiled only in CUDA builds (it needs the runtime header).
#ifdef KILN_WITH_CUDA

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "allocator/allocator_testing.h"
#include "cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

/// The change of one statistic's current value (all pools / one pool) from `before`.
int64_t delta(const MemoryStats& after, const MemoryStats& before, StatArray MemoryStats::*stat,
              StatPool pool = StatPool::All) {
  return (after.*stat)[pool].current - (before.*stat)[pool].current;
}

/// `bytes` of device memory at `p`, copied back to the host.
std::vector<uint8_t> read_back(const void* p, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  CUDA_REQUIRE(cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost));
  return host;
}

/// Index of the first byte that is not `value`, or bytes.size() when all are.
size_t first_not(const std::vector<uint8_t>& bytes, uint8_t value) {
  for (size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] != value) return i;
  return bytes.size();
}

/// The driver's view of an address this process allocated: device memory, or nothing there
/// (CUDA 11 and later answer "unregistered" for an address with nothing behind it).
bool is_device_memory(const void* p) {
  cudaPointerAttributes attributes{};
  const cudaError_t status = cudaPointerGetAttributes(&attributes, p);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice;
}

/// The allocator's spelling of a size in messages ("139.81 GiB").
std::string size_text(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 4) {
    v /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", v, units[unit]);
}

}  // namespace

TEST_CASE("cuda:0: rounding, pools, segment sizes and best-fit reuse, with exact statistics deltas") {
  CachingAllocator& a = caching_allocator(Device::cuda(0));
  OwnedStream s;
  const MemoryStats s0 = a.stats();

  void* p = a.allocate(1, s.id());  // small pool: 512 B of a new 2 MiB segment
  MemoryStats s1 = a.stats();
  CHECK(delta(s1, s0, &MemoryStats::allocation, StatPool::Small) == 1);
  CHECK(delta(s1, s0, &MemoryStats::allocated_bytes, StatPool::Small) == 512);
  CHECK(delta(s1, s0, &MemoryStats::requested_bytes, StatPool::Small) == 1);
  CHECK(delta(s1, s0, &MemoryStats::segment, StatPool::Small) == 1);
  CHECK(delta(s1, s0, &MemoryStats::reserved_bytes, StatPool::Small) == i64(2 * kMiB));
  CHECK(delta(s1, s0, &MemoryStats::inactive_split_bytes, StatPool::Small) == i64(2 * kMiB - 512));
  CHECK(s1.num_device_alloc - s0.num_device_alloc == 1);

  void* q = a.allocate(1 * kMiB + 1, s.id());  // large pool: 1 MiB + 512 of a new 20 MiB segment
  void* r = a.allocate(21 * kMiB + 1, s.id()); // fits no cached block: a 22 MiB segment
  void* p2 = a.allocate(3000, s.id());          // after p, in p's segment
  s1 = a.stats();
  CHECK(delta(s1, s0, &MemoryStats::segment, StatPool::Large) == 2);
  CHECK(delta(s1, s0, &MemoryStats::reserved_bytes, StatPool::Large) == i64(20 * kMiB + 22 * kMiB));
  // q's segment is split (more than 1 MiB remains); r's is not (1 MiB - 512 remains), so r's
  // block is its whole 22 MiB segment.
  CHECK(delta(s1, s0, &MemoryStats::allocated_bytes, StatPool::Large) == i64(1 * kMiB + 512 + 22 * kMiB));
  CHECK(delta(s1, s0, &MemoryStats::requested_bytes, StatPool::Large) == i64(1 * kMiB + 1 + 21 * kMiB + 1));
  CHECK(delta(s1, s0, &MemoryStats::allocated_bytes, StatPool::Small) == 512 + 3072);
  CHECK(delta(s1, s0, &MemoryStats::segment, StatPool::Small) == 1);
  CHECK(s1.num_device_alloc - s0.num_device_alloc == 3);
  CHECK(static_cast<char*>(p2) - static_cast<char*>(p) == 512);
  CHECK(segment_of(a, q).total_size == 20 * kMiB);
  CHECK(segment_of(a, r).total_size == 22 * kMiB);
  CHECK(segment_of(a, p).total_size == 2 * kMiB);
  CHECK(segment_of(a, q).stream == s.id());

  // Real device memory.
  cudaPointerAttributes attributes{};
  CUDA_REQUIRE(cudaPointerGetAttributes(&attributes, r));
  CHECK(attributes.type == cudaMemoryTypeDevice);
  CHECK(attributes.device == 0);

  // Best fit: the freed block comes back for the same request, with no device call.
  a.free(q);
  void* q2 = a.allocate(1 * kMiB + 1, s.id());
  CHECK(q2 == q);
  a.free(p);
  void* p3 = a.allocate(512, s.id());
  CHECK(p3 == p);
  CHECK(a.stats().num_device_alloc - s0.num_device_alloc == 3);

  for (void* x : {q2, r, p2, p3}) a.free(x);
  const MemoryStats s2 = a.stats();
  CHECK(delta(s2, s0, &MemoryStats::allocation) == 0);
  CHECK(delta(s2, s0, &MemoryStats::allocated_bytes) == 0);
  CHECK(delta(s2, s0, &MemoryStats::reserved_bytes) == i64(44 * kMiB));  // cached
  a.empty_cache();  // before the stream goes: no cached segment outlives it
  CHECK(delta(a.stats(), s0, &MemoryStats::reserved_bytes) <= 0);
}

TEST_CASE("cuda:0: blocks are device memory that cudaMemset and cudaMemcpy reach") {
  CachingAllocator& a = caching_allocator(Device::cuda(0));
  OwnedStream s;
  // Two neighbours in one small segment, and a large block.
  void* x = a.allocate(100 * kKiB, s.id());
  void* y = a.allocate(100 * kKiB, s.id());
  void* z = a.allocate(5 * kMiB, s.id());
  REQUIRE(static_cast<char*>(y) - static_cast<char*>(x) == i64(100 * kKiB));
  CUDA_REQUIRE(cudaMemset(x, 0x11, 100 * kKiB));
  CUDA_REQUIRE(cudaMemset(y, 0x22, 100 * kKiB));
  CUDA_REQUIRE(cudaMemsetAsync(z, 0x33, 5 * kMiB, s.get()));
  CUDA_REQUIRE(cudaStreamSynchronize(s.get()));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CHECK(first_not(read_back(x, 100 * kKiB), 0x11) == 100 * kKiB);
  CHECK(first_not(read_back(y, 100 * kKiB), 0x22) == 100 * kKiB);
  CHECK(first_not(read_back(z, 5 * kMiB), 0x33) == 5 * kMiB);
  for (void* p : {x, y, z}) a.free(p);
  a.empty_cache();
}

TEST_CASE("cuda:0: record_stream with a real stream: the block waits until that stream's work is done") {
  CachingAllocator& a = caching_allocator(Device::cuda(0));
  OwnedStream home, user;
  constexpr size_t kBytes = 64 * kMiB;
  // A cached 64 MiB block of the home stream, so that nothing below calls cudaMalloc while
  // the user stream is held back.
  void* spare = a.allocate(kBytes, home.id());
  a.free(spare);
  void* p = a.allocate(kBytes, home.id());
  CHECK(p == spare);
  void* other = a.allocate(kBytes, home.id());  // a second 64 MiB segment
  a.free(other);
  const MemoryStats before = a.stats();
  {
    Gate gate(user);  // the user stream now waits for us
    CUDA_REQUIRE(cudaMemsetAsync(p, 0x5A, kBytes, user.get()));
    a.record_stream(p, user.id());
    a.free(p);
    // Freed by the user, in use by the user stream: awaiting free, still active.
    CHECK(block_at(a, p).state == BlockState::AwaitingFree);
    const MemoryStats freed = a.stats();
    CHECK(delta(freed, before, &MemoryStats::allocated_bytes) == -i64(kBytes));
    CHECK(delta(freed, before, &MemoryStats::active_bytes) == 0);
    // The same request cannot have it while the memset has not run: it gets the other block.
    void* q = a.allocate(kBytes, home.id());
    CHECK(q == other);
    CHECK(block_at(a, p).state == BlockState::AwaitingFree);
    a.free(q);
    gate.open();
    CUDA_REQUIRE(cudaStreamSynchronize(user.get()));
  }
  // The user stream has finished: the next allocation call returns the block to the cache,
  // so two requests now get both 64 MiB blocks, with no new segment.
  void* r1 = a.allocate(kBytes, home.id());
  void* r2 = a.allocate(kBytes, home.id());
  CHECK(((r1 == p && r2 == other) || (r1 == other && r2 == p)));
  CHECK(block_at(a, p).state == BlockState::Active);
  const MemoryStats after = a.stats();
  CHECK(delta(after, before, &MemoryStats::active_bytes) == i64(kBytes));  // p's and other's blocks
  CHECK(after.num_device_alloc == before.num_device_alloc);
  // And the memset queued before the free did complete on the block.
  CHECK(first_not(read_back(p, kBytes), 0x5A) == kBytes);
  a.free(r1);
  a.free(r2);
  a.empty_cache();
}

// What this process controls only: the allocator's counters, and the driver's answer about
// the segment's own address (device memory while cached, nothing once given back). The
// device's free memory is not read: other test processes change it under `ctest -j`.
TEST_CASE("cuda:0: empty_cache gives cached segments back to the device") {
  CachingAllocator& a = caching_allocator(Device::cuda(0));
  OwnedStream s;
  a.empty_cache();
  const MemoryStats s0 = a.stats();
  void* p = a.allocate(256 * kMiB, s.id());
  a.free(p);
  CHECK(delta(a.stats(), s0, &MemoryStats::reserved_bytes) == i64(256 * kMiB));
  CHECK(segment_of(a, p).total_size == 256 * kMiB);
  CHECK(is_device_memory(p));  // cached: still allocated from the driver
  a.empty_cache();
  const MemoryStats s1 = a.stats();
  CHECK(delta(s1, s0, &MemoryStats::reserved_bytes) == 0);
  CHECK(delta(s1, s0, &MemoryStats::segment) == 0);
  CHECK(s1.num_device_free - s0.num_device_free == 1);
  for (const SegmentInfo& seg : a.snapshot().segments) CHECK(seg.address != reinterpret_cast<uintptr_t>(p));
  CHECK_FALSE(is_device_memory(p));  // given back: the driver has nothing at that address
}

TEST_CASE("cuda:0: asking for more than the device holds is an OutOfMemoryError that loses nothing") {
  CachingAllocator& a = caching_allocator(Device::cuda(0));
  OwnedStream s;
  constexpr size_t kBytes = 8 * kMiB;
  std::vector<uint8_t> pattern(kBytes);
  for (size_t i = 0; i < kBytes; ++i) pattern[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
  void* keep = a.allocate(kBytes, s.id());
  CUDA_REQUIRE(cudaMemcpy(keep, pattern.data(), kBytes, cudaMemcpyHostToDevice));

  size_t device_free = 0, total = 0;
  CUDA_REQUIRE(cudaMemGetInfo(&device_free, &total));
  const size_t ask = 4 * total;
  const MemoryStats before = a.stats();
  std::string msg;
  try {
    a.allocate(ask, s.id(), "cuda_oom_test");
    FAIL_CHECK("no OutOfMemoryError for " << ask << " bytes");
  } catch (const OutOfMemoryError& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(msg.rfind("cuda_oom_test: out of memory on cuda:0", 0) == 0);
  CHECK(msg.find(fmt::format("({} bytes", ask)) != std::string::npos);
  CHECK(msg.find(size_text(total) + " in total") != std::string::npos);
  CHECK(msg.find("KILN_ALLOC_CONF=max_split_size_mb") != std::string::npos);
  CHECK_THROWS_AS(a.allocate(ask, s.id()), Error);  // an Error too
  const MemoryStats after = a.stats();
  CHECK(after.num_ooms - before.num_ooms == 2);
  CHECK(after.num_alloc_retries - before.num_alloc_retries == 2);
  CHECK(delta(after, before, &MemoryStats::allocated_bytes) == 0);

  // What was allocated before is intact, and allocations still work.
  CHECK(read_back(keep, kBytes) == pattern);
  void* later = a.allocate(kBytes, s.id());
  CUDA_REQUIRE(cudaMemset(later, 0x77, kBytes));
  CHECK(first_not(read_back(later, kBytes), 0x77) == kBytes);
  CHECK(read_back(keep, kBytes) == pattern);
  a.free(later);
  a.free(keep);
  a.empty_cache();
}

TEST_CASE("cuda: a device index out of range is an Error naming it") {
  CHECK_THROWS_WITH_AS(caching_allocator(Device::cuda(99)), doctest::Contains("CUDA device 99 is out of range"),
                       Error);
  CHECK_THROWS_WITH_AS(memory_stats(Device::cuda(99)), doctest::Contains("memory_stats: CUDA device 99 is out of range"),
                       Error);
  const int n = cuda::device_count();
  if (n < 64) {
    const std::string expected = fmt::format("memory_allocated: CUDA device {} is out of range", n);
    CHECK_THROWS_WITH_AS(memory_allocated(Device::cuda(n)), doctest::Contains(expected.c_str()), Error);
  }
}

#endif  // KILN_WITH_CUDA
