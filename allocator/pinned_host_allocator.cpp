// The pinned host cache: PinnedHostAllocator over the caching allocator, the process-wide
// stream keys, the lazily created instance and the host_memory_* API.
//
// Blocks go through the caching allocator's raw allocate()/free(), so record_stream finds a
// block by its address in one hash lookup (a tensor's DataPtr from allocate_data would make it
// walk the block's segment).
#include "pinned_host_allocator.h"

#include <atomic>
#include <mutex>
#include <vector>

#include "../core/error.h"
#include "allocator_config.h"
#include "memory_report.h"

#ifdef KILN_WITH_CUDA
#include "cuda_pinned_segment_source.h"
#endif

namespace kiln {

namespace {

constexpr const char* kDeviceName = "cpu:pinned";

// Every (device, stream) pair a pinned block was used on, numbered from 1 in first-use order.
// Entries are never removed: Kiln's streams live for the whole process, and a stream handle
// the user destroys and the driver hands out again is the same pair, with the same key.
struct StreamKeys {
  std::mutex mutex;
  std::vector<Stream> streams;
};

StreamKeys& stream_keys() {
  static auto* keys = new StreamKeys();  // immortal: blocks may be freed during static destruction
  return *keys;
}

// The process's instance (never destroyed, like the device allocators in memory.cpp).
std::atomic<PinnedHostAllocator*> g_pinned{nullptr};
std::mutex g_create_mutex;

// What the cache looks like before its first use.
MemorySnapshot empty_snapshot() {
  MemorySnapshot snap;
  snap.device = kDeviceName;
  snap.stats.max_split_size = -1;  // unset, as CachingAllocator::stats reports it
  return snap;
}

MemorySnapshot current_snapshot() {
  PinnedHostAllocator* a = g_pinned.load(std::memory_order_acquire);
  return a != nullptr ? a->caching_allocator().snapshot() : empty_snapshot();
}

// Python's str.center(width), as memory_summary's title line is centred.
std::string center(const std::string& s, size_t width) {
  if (s.size() >= width) return s;
  const size_t margin = width - s.size();
  const size_t left = margin / 2 + (margin & width & 1);
  return std::string(left, ' ') + s + std::string(margin - left, ' ');
}

}  // namespace

PinnedHostAllocator::PinnedHostAllocator(std::unique_ptr<SegmentSource> source, AllocatorConfig config)
    : allocator_(std::move(source), config) {
  // profile_memory charges pinned blocks to the host, as PyTorch's profiler does.
  allocator_.set_device(Device::cpu());
}

DataPtr PinnedHostAllocator::allocate(size_t bytes, const char* op) {
  void* p = allocator_.allocate(bytes, kHostStream, op);
  if (p == nullptr) return DataPtr();
  return DataPtr(p, this, &free_block);
}

void PinnedHostAllocator::free_block(void* context, void* data) {
  try {
    static_cast<PinnedHostAllocator*>(context)->allocator_.free(data);
  } catch (...) {
    // Runs from a destructor: a failure to record a stream event has nowhere to go.
  }
}

void PinnedHostAllocator::record_stream(void* block, const Stream& stream) {
  KILN_CHECK(stream.device().is_cuda(), "record_stream: expected a CUDA stream, got one on {}", stream.device().str());
  allocator_.record_stream(block, stream_key(stream));
}

StreamId PinnedHostAllocator::stream_key(const Stream& stream) {
  // Keys never change once given, so a thread may remember its last one without the lock.
  thread_local Stream last_stream;
  thread_local StreamId last_key = 0;
  if (last_key != 0 && last_stream == stream) return last_key;
  StreamKeys& keys = stream_keys();
  std::lock_guard<std::mutex> lock(keys.mutex);
  size_t i = 0;
  while (i < keys.streams.size() && !(keys.streams[i] == stream)) ++i;
  if (i == keys.streams.size()) keys.streams.push_back(stream);
  last_stream = stream;
  last_key = static_cast<StreamId>(i + 1);
  return last_key;
}

Stream PinnedHostAllocator::stream_of_key(StreamId key) {
  StreamKeys& keys = stream_keys();
  std::lock_guard<std::mutex> lock(keys.mutex);
  KILN_CHECK(key >= 1 && key <= keys.streams.size(), "pinned host allocator: {} is not a stream key ({} handed out)",
             key, keys.streams.size());
  return keys.streams[key - 1];
}

PinnedHostAllocator& pinned_host_allocator(const char* op) {
  if (PinnedHostAllocator* a = g_pinned.load(std::memory_order_acquire)) [[likely]]
    return *a;
  KILN_CHECK(cuda::is_built(), "{}: pinned host memory needs CUDA, and this build of Kiln has no CUDA support", op);
  KILN_CHECK(cuda::is_available(), "{}: pinned host memory needs a CUDA GPU, and none is visible on this machine", op);
#ifdef KILN_WITH_CUDA
  std::lock_guard<std::mutex> lock(g_create_mutex);
  if (PinnedHostAllocator* a = g_pinned.load(std::memory_order_acquire)) return *a;
  // KILN_NO_CACHING applies here too (every free goes back to cudaFreeHost); the other
  // options describe device memory.
  AllocatorConfig config;
  config.caching = environment_allocator_config().caching;
  auto* created = new PinnedHostAllocator(std::make_unique<CudaPinnedSegmentSource>(), config);
  g_pinned.store(created, std::memory_order_release);
  return *created;
#else
  KILN_FAIL("{}: unreachable without CUDA", op);
#endif
}

namespace cuda {

std::map<std::string, int64_t> host_memory_stats() {
  PinnedHostAllocator* a = g_pinned.load(std::memory_order_acquire);
  return stats_to_map(a != nullptr ? a->caching_allocator().stats() : empty_snapshot().stats);
}

std::string host_memory_summary(bool abbreviated) {
  // memory_summary's layout, host labels ("cpu:" devices); only the title says which cache.
  std::string text = format_memory_summary(current_snapshot(), abbreviated);
  const size_t title_begin = text.find('\n') + 1;
  const size_t title_end = text.find('\n', title_begin);
  if (title_begin != 0 && title_end != std::string::npos)
    text.replace(title_begin, title_end - title_begin, center("Kiln pinned host memory summary", 75));
  return text;
}

MemorySnapshot host_memory_snapshot() { return current_snapshot(); }

void host_empty_cache() {
  if (PinnedHostAllocator* a = g_pinned.load(std::memory_order_acquire)) a->caching_allocator().empty_cache();
}

void reset_peak_host_memory_stats() {
  if (PinnedHostAllocator* a = g_pinned.load(std::memory_order_acquire)) a->caching_allocator().reset_peak_stats();
}

void reset_accumulated_host_memory_stats() {
  if (PinnedHostAllocator* a = g_pinned.load(std::memory_order_acquire))
    a->caching_allocator().reset_accumulated_stats();
}

}  // namespace cuda

}  // namespace kiln
