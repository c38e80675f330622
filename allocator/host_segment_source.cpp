// Host segments, host virtual memory and host "events".
#include "host_segment_source.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include "../core/error.h"

namespace kiln {

namespace {
constexpr size_t kPage = 4096;

size_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

// MemAvailable from /proc/meminfo, in bytes (0 if unreadable).
size_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}
}  // namespace

HostSegmentSource::HostSegmentSource(Options options) : options_(options) {
  if (options_.capacity == 0) options_.capacity = physical_memory();
  const size_t g = options_.vmm_granularity;
  KILN_CHECK(g == 0 || (g % kPage == 0 && (g & (g - 1)) == 0),
             "HostSegmentSource: vmm_granularity must be 0 or a power of two multiple of {} bytes, got {}", kPage, g);
}

HostSegmentSource::~HostSegmentSource() = default;

void* HostSegmentSource::allocate(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes > options_.capacity || live_bytes_ > options_.capacity - bytes) return nullptr;
    live_bytes_ += bytes;
  }
  const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  void* p = rounded >= bytes ? std::aligned_alloc(kPage, rounded) : nullptr;
  if (p == nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_bytes_ -= bytes;
  }
  return p;
}

void HostSegmentSource::release(void* ptr, size_t bytes) {
  std::free(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  live_bytes_ -= bytes;
}

std::pair<size_t, size_t> HostSegmentSource::memory_info() {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t by_capacity = options_.capacity - live_bytes_;
  const size_t host = available_memory();
  return {host == 0 ? by_capacity : std::min(by_capacity, host), options_.capacity};
}

EventId HostSegmentSource::record_event(StreamId) {
  std::lock_guard<std::mutex> lock(mutex_);
  const EventId id = next_event_++;
  events_.insert(id);
  if (options_.manual_events) pending_.insert(id);
  return id;
}

bool HostSegmentSource::event_completed(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_INTERNAL_ASSERT(events_.count(event) == 1, "event_completed: event {} is not live", event);
  return pending_.count(event) == 0;
}

void HostSegmentSource::wait_event(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_INTERNAL_ASSERT(events_.count(event) == 1, "wait_event: event {} is not live", event);
  ++waited_events_;
  pending_.erase(event);
}

size_t HostSegmentSource::waited_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waited_events_;
}

void HostSegmentSource::destroy_event(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t erased = events_.erase(event);
  KILN_INTERNAL_ASSERT(erased == 1, "destroy_event: event {} is not live (destroyed twice?)", event);
  pending_.erase(event);
}

void HostSegmentSource::complete_event(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.erase(event);
}

void HostSegmentSource::complete_all_events() {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.clear();
}

void HostSegmentSource::complete_events_through(EventId last) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.erase(pending_.begin(), pending_.upper_bound(last));
}

EventId HostSegmentSource::last_event() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_event_ - 1;
}

size_t HostSegmentSource::live_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

size_t HostSegmentSource::pending_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

size_t HostSegmentSource::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_bytes_;
}

// ---- virtual memory ----------------------------------------------------------------------

namespace {
void* map_anonymous(void* at, size_t bytes, int prot, int extra_flags) {
  return mmap(at, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
}
}  // namespace

void* HostSegmentSource::reserve_address_range(size_t bytes) {
  const size_t g = options_.vmm_granularity;
  KILN_INTERNAL_ASSERT(g > 0 && bytes > 0 && bytes % g == 0, "reserve_address_range({})", bytes);
  if (bytes > std::numeric_limits<size_t>::max() - g) return nullptr;
  // Over-reserve by one page, then trim both ends so the range starts on a page boundary.
  void* raw = map_anonymous(nullptr, bytes + g, PROT_NONE, MAP_NORESERVE);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = (start + g - 1) / g * g;
  if (base > start) munmap(raw, base - start);
  if (start + bytes + g > base + bytes) munmap(reinterpret_cast<void*>(base + bytes), start + g - base);
  std::lock_guard<std::mutex> lock(mutex_);
  reservations_.emplace(base, bytes);
  return reinterpret_cast<void*>(base);
}

void HostSegmentSource::release_address_range(void* base, size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(base);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = reservations_.find(b);
    KILN_INTERNAL_ASSERT(it != reservations_.end() && it->second == bytes,
                         "release_address_range: {} ({} bytes) is not a reserved range", base, bytes);
    for (const auto& [address, page] : mapped_)
      KILN_INTERNAL_ASSERT(address < b || address >= b + bytes,
                           "release_address_range: page {} at {:#x} is still mapped in it", page, address);
    reservations_.erase(it);
  }
  munmap(base, bytes);
}

PageHandle HostSegmentSource::create_page() {
  const size_t g = options_.vmm_granularity;
  KILN_INTERNAL_ASSERT(g > 0);
  std::lock_guard<std::mutex> lock(mutex_);
  if (g > options_.capacity || live_bytes_ > options_.capacity - g) return 0;
  live_bytes_ += g;
  const PageHandle page = next_page_++;
  pages_.emplace(page, false);
  return page;
}

void HostSegmentSource::release_page(PageHandle page) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = pages_.find(page);
  KILN_INTERNAL_ASSERT(it != pages_.end() && !it->second, "release_page: page {} is {}", page,
                       it == pages_.end() ? "unknown" : "still mapped");
  pages_.erase(it);
  live_bytes_ -= options_.vmm_granularity;
}

void HostSegmentSource::map_pages(void* address, const PageHandle* pages, size_t count) {
  const size_t g = options_.vmm_granularity;
  const auto a = reinterpret_cast<uintptr_t>(address);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    KILN_INTERNAL_ASSERT(count > 0 && a % g == 0, "map_pages({}, {} pages)", address, count);
    auto r = reservations_.upper_bound(a);
    KILN_INTERNAL_ASSERT(r != reservations_.begin(), "map_pages: {} is not in a reserved range", address);
    --r;
    KILN_INTERNAL_ASSERT(a >= r->first && a + count * g <= r->first + r->second,
                         "map_pages: {} pages at {} overrun the range reserved at {:#x}", count, address, r->first);
    for (size_t i = 0; i < count; ++i) {
      const auto p = pages_.find(pages[i]);
      KILN_INTERNAL_ASSERT(p != pages_.end() && !p->second, "map_pages: page {} is {}", pages[i],
                           p == pages_.end() ? "unknown" : "mapped already");
      KILN_INTERNAL_ASSERT(mapped_.count(a + i * g) == 0, "map_pages: {:#x} is mapped already", a + i * g);
    }
    for (size_t i = 0; i < count; ++i) {
      pages_[pages[i]] = true;
      mapped_.emplace(a + i * g, pages[i]);
    }
  }
  // Fresh memory replaces the reservation; physical pages are counted against the capacity
  // by create_page, so the host commits them only when they are touched.
  const void* got = map_anonymous(address, count * g, PROT_READ | PROT_WRITE, MAP_FIXED);
  KILN_CHECK(got == address, "map_pages: mmap of {} bytes at {} failed", count * g, address);
}

void HostSegmentSource::unmap_pages(void* address, size_t count) {
  const size_t g = options_.vmm_granularity;
  const auto a = reinterpret_cast<uintptr_t>(address);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    KILN_INTERNAL_ASSERT(count > 0 && a % g == 0, "unmap_pages({}, {} pages)", address, count);
    for (size_t i = 0; i < count; ++i)
      KILN_INTERNAL_ASSERT(mapped_.count(a + i * g) == 1, "unmap_pages: {:#x} is not mapped", a + i * g);
    for (size_t i = 0; i < count; ++i) {
      const auto it = mapped_.find(a + i * g);
      pages_[it->second] = false;
      mapped_.erase(it);
    }
  }
  // Back to a reservation: the contents go, and so does the memory behind them.
  const void* got = map_anonymous(address, count * g, PROT_NONE, MAP_FIXED | MAP_NORESERVE);
  KILN_CHECK(got == address, "unmap_pages: mmap of {} bytes at {} failed", count * g, address);
}

size_t HostSegmentSource::pages() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pages_.size();
}

size_t HostSegmentSource::mapped_pages() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mapped_.size();
}

size_t HostSegmentSource::reservations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reservations_.size();
}

bool HostSegmentSource::is_mapped(const void* address, size_t bytes) const {
  const size_t g = options_.vmm_granularity;
  if (g == 0 || bytes == 0) return g != 0;
  const auto a = reinterpret_cast<uintptr_t>(address);
  std::lock_guard<std::mutex> lock(mutex_);
  for (uintptr_t page = a / g * g; page < a + bytes; page += g)
    if (mapped_.count(page) == 0) return false;
  return true;
}

}  // namespace kiln
