// The per-device allocator registry and the user-facing memory functions.
//
// Allocators live for the whole process and are never destroyed: tensors held in static
// objects can be freed during static destruction, after any registry destructor would have
// run. Lookups are one atomic load; creation takes a mutex.
#include "memory.h"

#include <array>
#include <atomic>
#include <fstream>
#include <mutex>

#include "../core/error.h"
#include "allocator_config.h"
#include "host_segment_source.h"
#include "memory_observer.h"

#ifdef KILN_WITH_CUDA
#include "cuda_segment_source.h"
#endif

namespace kiln {

namespace detail {
std::atomic<MemoryObserver> g_memory_observer{nullptr};
}

void set_memory_observer(MemoryObserver observer) { detail::g_memory_observer.store(observer); }

namespace {

constexpr int kMaxCudaDevices = 64;

struct Registry {
  std::mutex mutex;
  std::atomic<CachingAllocator*> cpu{nullptr};
  std::array<std::atomic<CachingAllocator*>, kMaxCudaDevices> cuda{};
};

Registry& registry() {
  static Registry* r = new Registry();  // immortal, see the file comment
  return *r;
}

std::unique_ptr<SegmentSource> make_source(Device device, const char* op) {
  if (device.is_cpu()) return std::make_unique<HostSegmentSource>();
#ifdef KILN_WITH_CUDA
  const int count = cuda::device_count();
  KILN_CHECK(count > 0, "{}: cannot allocate memory on {}: no CUDA GPU is visible on this machine", op, device.str());
  KILN_CHECK(device.index() < count, "{}: CUDA device {} is out of range: {} device(s) visible (cuda:0 to cuda:{})", op,
             device.index(), count, count - 1);
  return std::make_unique<CudaSegmentSource>(device.index());
#else
  KILN_FAIL("{}: cannot allocate memory on {}: this build of Kiln has no CUDA support (nvcc was not found when it "
            "was configured)",
            op, device.str());
#endif
}

std::atomic<CachingAllocator*>& slot(Device device, const char* op) {
  Registry& r = registry();
  if (device.is_cpu()) return r.cpu;
  KILN_CHECK(device.index() < kMaxCudaDevices, "{}: CUDA device {} is out of range (Kiln supports up to {} GPUs)", op,
             device.index(), kMaxCudaDevices);
  return r.cuda[static_cast<size_t>(device.index())];
}

}  // namespace

CachingAllocator& caching_allocator(Device device, const char* op) {
  std::atomic<CachingAllocator*>& s = slot(device, op);
  if (CachingAllocator* a = s.load(std::memory_order_acquire)) [[likely]]
    return *a;
  std::lock_guard<std::mutex> lock(registry().mutex);
  if (CachingAllocator* a = s.load(std::memory_order_acquire)) return *a;
  auto* created = new CachingAllocator(make_source(device, op), environment_allocator_config());
  created->set_device(device);
  s.store(created, std::memory_order_release);
  return *created;
}

std::map<std::string, int64_t> memory_stats(Device device) {
  return stats_to_map(caching_allocator(device, "memory_stats").stats());
}

std::string memory_summary(Device device, bool abbreviated) {
  return format_memory_summary(caching_allocator(device, "memory_summary").snapshot(), abbreviated);
}

MemorySnapshot memory_snapshot(Device device) { return caching_allocator(device, "memory_snapshot").snapshot(); }

void record_memory_history(Device device, bool enabled, size_t max_entries) {
  caching_allocator(device, "record_memory_history").record_history(enabled, max_entries);
}

void write_memory_map(const std::string& path, Device device) {
  const std::string svg = memory_map_svg(caching_allocator(device, "write_memory_map").snapshot());
  std::ofstream out(path, std::ios::binary);
  KILN_CHECK(out.good(), "write_memory_map: cannot open \"{}\" for writing", path);
  out << svg;
  out.close();
  KILN_CHECK(out.good(), "write_memory_map: writing \"{}\" failed", path);
}

void empty_cache(Device device) { caching_allocator(device, "empty_cache").empty_cache(); }

void empty_cache() {
  Registry& r = registry();
  if (CachingAllocator* a = r.cpu.load(std::memory_order_acquire)) a->empty_cache();
  for (auto& s : r.cuda)
    if (CachingAllocator* a = s.load(std::memory_order_acquire)) a->empty_cache();
}

void reset_peak_memory_stats(Device device) { caching_allocator(device, "reset_peak_memory_stats").reset_peak_stats(); }

void reset_accumulated_memory_stats(Device device) {
  caching_allocator(device, "reset_accumulated_memory_stats").reset_accumulated_stats();
}

int64_t memory_allocated(Device device) {
  return caching_allocator(device, "memory_allocated").stats().allocated_bytes[StatPool::All].current;
}
int64_t max_memory_allocated(Device device) {
  return caching_allocator(device, "max_memory_allocated").stats().allocated_bytes[StatPool::All].peak;
}
int64_t memory_reserved(Device device) {
  return caching_allocator(device, "memory_reserved").stats().reserved_bytes[StatPool::All].current;
}
int64_t max_memory_reserved(Device device) {
  return caching_allocator(device, "max_memory_reserved").stats().reserved_bytes[StatPool::All].peak;
}

}  // namespace kiln
