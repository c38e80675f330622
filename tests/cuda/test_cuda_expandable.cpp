// Expandable segments over the CUDA driver's virtual memory management (this suite runs only
// with a GPU): pages mapped with cuMemMap are device memory that cudaMemset and cudaMemcpy
// reach; data stays put while the segment grows around it; pages move (cuMemUnmap, then
// cuMemMap elsewhere) only after the work queued on their stream before their free has run,
// and the allocator never waits for it: while that work is pending it creates new pages
// instead; empty_cache gives them back; a request larger than the device fails at once,
// without filling the device.
//
// Each case uses an allocator of its own over a CudaSegmentSource, so its counters are exact
// and what it maps is its own; nothing here reads the device's free memory, which other test
// processes change.
#ifdef KILN_WITH_CUDA

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "allocator/cuda_segment_source.h"
#include "allocator/allocator_testing.h"
#include "cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

/// An allocator with expandable segments over cuda:0, and its page size (0: the GPU has no
/// virtual memory management, and the case has nothing to test).
struct ExpandableCuda {
  CudaSegmentSource* source;
  std::unique_ptr<CachingAllocator> allocator;
  size_t page = 0;
  ExpandableCuda() {
    auto src = std::make_unique<CudaSegmentSource>(0);
    source = src.get();
    page = source->vmm_granularity();
    AllocatorConfig config;
    config.expandable_segments = true;
    allocator = std::make_unique<CachingAllocator>(std::move(src), config);
  }
  CachingAllocator* operator->() { return allocator.get(); }
};

std::vector<uint8_t> read_back(const void* p, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  CUDA_REQUIRE(cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost));
  return host;
}

size_t first_not(const std::vector<uint8_t>& bytes, uint8_t value) {
  for (size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] != value) return i;
  return bytes.size();
}

std::vector<uint8_t> make_pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(seed + i * 131 + (i >> 13));
  return v;
}

/// The driver's view of an address this process allocated: device memory, or nothing there.
bool is_device_memory(const void* p) {
  cudaPointerAttributes attributes{};
  const cudaError_t status = cudaPointerGetAttributes(&attributes, p);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // an address with nothing behind it may be an invalid value
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice;
}

#define REQUIRE_VMM(e)                                                                          \
  if ((e).page == 0) {                                                                          \
    MESSAGE("cuda:0 has no virtual memory management: expandable segments fall back to classic"); \
    return;                                                                                     \
  }

}  // namespace

TEST_CASE("cuda:0 expandable: pages from cuMemCreate/cuMemMap are device memory, and data stays while it grows") {
  ExpandableCuda a;
  REQUIRE_VMM(a);
  CHECK(a.page % (2 << 20) == 0);
  const size_t g = a.page;
  void* p = a->allocate(g + g / 2);  // 1.5 pages: 2 mapped
  MemoryStats s = a->stats();
  CHECK(s.reserved_bytes[StatPool::All].current == i64(2 * g));
  CHECK(s.num_device_alloc == 2);
  CHECK(s.num_map_calls == 2);
  CHECK(is_device_memory(p));
  const std::vector<uint8_t> pattern = make_pattern(g + g / 2, 7);
  CUDA_REQUIRE(cudaMemcpy(p, pattern.data(), pattern.size(), cudaMemcpyHostToDevice));

  // The next block shares p's last page and grows the segment by three more.
  void* q = a->allocate(3 * g);
  CHECK(reinterpret_cast<uintptr_t>(q) == reinterpret_cast<uintptr_t>(p) + g + g / 2);
  s = a->stats();
  CHECK(s.reserved_bytes[StatPool::All].current == i64(5 * g));
  CHECK(s.num_map_calls == 5);
  CUDA_REQUIRE(cudaMemset(q, 0x3C, 3 * g));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CHECK(first_not(read_back(q, 3 * g), 0x3C) == 3 * g);
  CHECK(read_back(p, pattern.size()) == pattern);  // untouched by the growth beside it
  const SegmentInfo seg = segment_of(*a.allocator, p);
  CHECK(seg.is_expandable);
  CHECK(seg.page_size == g);
  CHECK(seg.mapped_size == 5 * g);
  a->free(p);
  a->free(q);
  a->empty_cache();
  s = a->stats();
  CHECK(s.reserved_bytes[StatPool::All].current == 0);
  CHECK(s.num_device_free == s.num_device_alloc);
  CHECK(s.segment[StatPool::All].current == 0);
  CHECK_FALSE(is_device_memory(q));  // the driver has nothing at that address any more
}

TEST_CASE("cuda:0 expandable: a page moves (cuMemUnmap, cuMemMap elsewhere) and the data around it stays") {
  ExpandableCuda a;
  REQUIRE_VMM(a);
  const size_t g = a.page;
  void* a1 = a->allocate(2 * g);
  void* a2 = a->allocate(2 * g);
  const std::vector<uint8_t> keep = make_pattern(2 * g, 99);
  CUDA_REQUIRE(cudaMemcpy(a2, keep.data(), keep.size(), cudaMemcpyHostToDevice));
  a->free(a1);
  // The free recorded an event on the stream; the GPU completes it within microseconds, and
  // only then may a1's pages move (a query before that would find it pending: new pages).
  CUDA_REQUIRE(cudaDeviceSynchronize());
  void* z = a->allocate(3 * g);  // two pages move from a1's place, one is created
  MemoryStats s = a->stats();
  CHECK(s.num_unmap_calls == 2);
  CHECK(s.num_unmap_waits == 0);
  CHECK(s.num_device_alloc == 5);
  CHECK(s.reserved_bytes[StatPool::All].current == i64(5 * g));
  CHECK(is_device_memory(z));
  CUDA_REQUIRE(cudaMemset(z, 0x5E, 3 * g));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CHECK(first_not(read_back(z, 3 * g), 0x5E) == 3 * g);
  CHECK(read_back(a2, keep.size()) == keep);
  a->free(a2);
  a->free(z);
  a->empty_cache();
  CHECK(a->stats().reserved_bytes[StatPool::All].current == 0);
}

TEST_CASE("cuda:0 expandable: a page whose stream work is pending stays, without a wait; it moves once the work ran") {
  ExpandableCuda a;
  REQUIRE_VMM(a);
  const size_t g = a.page;
  OwnedStream s;
  void* x = a->allocate(2 * g, s.id());  // pages 0-1
  void* y = a->allocate(2 * g, s.id());  // pages 2-3
  const std::vector<uint8_t> keep = make_pattern(2 * g, 41);
  CUDA_REQUIRE(cudaMemcpy(y, keep.data(), keep.size(), cudaMemcpyHostToDevice));
  void* z = nullptr;
  {
    Gate gate(s);
    CUDA_REQUIRE(cudaMemsetAsync(x, 0x42, 2 * g, s.get()));  // queued behind the gate
    a->free(x);  // stream-ordered: its pages hold nothing live, but the memset has not run
    // A watchdog opens the gate if the allocation below blocks on the stream (the old
    // behaviour), so a regression fails the checks below instead of hanging.
    std::atomic<bool> returned{false};
    std::thread watchdog([&gate, &returned] {
      for (int i = 0; i < 500 && !returned.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      gate.open();
    });
    z = a->allocate(3 * g, s.id());  // pages 4-6: x's pages are still in use, three new ones
    const cudaError_t pending = cudaStreamQuery(s.get());
    returned.store(true);
    watchdog.join();
    CHECK(pending == cudaErrorNotReady);  // the allocation returned while the memset was queued
    (void)cudaGetLastError();
    const MemoryStats st = a->stats();
    CHECK(st.num_unmap_calls == 0);
    CHECK(st.num_unmap_waits == 0);
    CHECK(st.num_device_alloc == 7);
    CHECK(st.reserved_bytes[StatPool::All].current == i64(7 * g));
    CUDA_REQUIRE(cudaMemsetAsync(z, 0x24, 3 * g, s.get()));
    gate.open();
    CUDA_REQUIRE(cudaStreamSynchronize(s.get()));  // no fault: both memsets ran on mapped pages
  }
  CHECK(first_not(read_back(x, 2 * g), 0x42) == 2 * g);  // the queued memset found x's pages in place
  CHECK(first_not(read_back(z, 3 * g), 0x24) == 3 * g);

  // The stream has run the work queued before x's free: its event has completed, so x's pages
  // move under the next growth (the hole is too small for 3 pages), without a wait.
  void* w = a->allocate(3 * g, s.id());  // pages 7-9: two moved from x's place, one created
  MemoryStats st = a->stats();
  CHECK(st.num_unmap_calls == 2);
  CHECK(st.num_unmap_waits == 0);
  CHECK(st.num_device_alloc == 8);
  CHECK(st.reserved_bytes[StatPool::All].current == i64(8 * g));
  const SegmentInfo seg = segment_of(*a.allocator, y);
  REQUIRE(seg.mapped_ranges.size() == 1);  // x's place has nothing mapped any more
  CHECK(seg.mapped_ranges[0].address == reinterpret_cast<uintptr_t>(y));
  CHECK(seg.mapped_ranges[0].size == 8 * g);
  CUDA_REQUIRE(cudaMemsetAsync(w, 0x3E, 3 * g, s.get()));
  CUDA_REQUIRE(cudaStreamSynchronize(s.get()));
  CHECK(first_not(read_back(w, 3 * g), 0x3E) == 3 * g);
  CHECK(first_not(read_back(z, 3 * g), 0x24) == 3 * g);
  CHECK(read_back(y, keep.size()) == keep);
  for (void* p : {y, z, w}) a->free(p);
  a->empty_cache();
  st = a->stats();
  CHECK(st.reserved_bytes[StatPool::All].current == 0);
  CHECK(st.num_device_free == st.num_device_alloc);
}

TEST_CASE("cuda:0 expandable: record_stream keeps a block's pages mapped until the other stream is done") {
  ExpandableCuda a;
  REQUIRE_VMM(a);
  const size_t g = a.page;
  OwnedStream home, user;
  void* p = a->allocate(2 * g, home.id());
  {
    Gate gate(user);
    CUDA_REQUIRE(cudaMemsetAsync(p, 0x61, 2 * g, user.get()));
    a->record_stream(p, user.id());
    a->free(p);
    CHECK(block_at(*a.allocator, p).state == BlockState::AwaitingFree);
    void* q = a->allocate(3 * g, home.id());  // grows: p's pages are in use, none may move
    CHECK(a->stats().num_unmap_calls == 0);
    CHECK(a->stats().reserved_bytes[StatPool::All].current == i64(5 * g));
    CHECK(is_device_memory(p));
    gate.open();
    CUDA_REQUIRE(cudaStreamSynchronize(user.get()));
    a->free(q);
  }
  void* r = a->allocate(g, home.id());  // processes the event: p's block is free again
  CHECK(block_at(*a.allocator, r).state == BlockState::Active);
  a->free(r);
  a->empty_cache();
  CHECK(a->stats().reserved_bytes[StatPool::All].current == 0);
}

TEST_CASE("cuda:0 expandable: a request larger than the device fails at once, creating no page") {
  ExpandableCuda a;
  REQUIRE_VMM(a);
  void* keep = a->allocate(a.page);
  CUDA_REQUIRE(cudaMemset(keep, 0x19, a.page));
  size_t free_bytes = 0, total = 0;
  CUDA_REQUIRE(cudaMemGetInfo(&free_bytes, &total));  // the total only: it does not change
  const MemoryStats before = a->stats();
  std::string msg;
  try {
    a->allocate(4 * total, 0, "cuda_expandable_oom");
    FAIL_CHECK("no OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(msg.rfind("cuda_expandable_oom: out of memory on cuda:0", 0) == 0);
  CHECK(msg.find("Expandable segments are on") != std::string::npos);
  const MemoryStats after = a->stats();
  CHECK(after.num_ooms == 1);
  CHECK(after.num_device_alloc == before.num_device_alloc);  // not one page was created
  CHECK(after.reserved_bytes[StatPool::All].current == before.reserved_bytes[StatPool::All].current);
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CHECK(first_not(read_back(keep, a.page), 0x19) == a.page);
  a->free(keep);
  a->empty_cache();
}

#endif  // KILN_WITH_CUDA
