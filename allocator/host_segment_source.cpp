// Host segments and host "events".
#include "host_segment_source.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
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
  if (options_.manual_events) pending_.insert(id);
  return id;
}

bool HostSegmentSource::event_completed(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.count(event) == 0;
}

void HostSegmentSource::wait_event(EventId event) { complete_event(event); }

void HostSegmentSource::destroy_event(EventId event) { complete_event(event); }

void HostSegmentSource::complete_event(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.erase(event);
}

void HostSegmentSource::complete_all_events() {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.clear();
}

size_t HostSegmentSource::pending_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

size_t HostSegmentSource::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_bytes_;
}

}  // namespace kiln
