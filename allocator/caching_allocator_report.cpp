// The caching allocator's read-out and bookkeeping side: statistics and their resets, the
// snapshot of segments and blocks, the allocation-history ring buffer, and private pools.
#include <limits>

#include "../core/error.h"
#include "caching_allocator_internal.h"

namespace kiln {

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_snapshot();
}

uint64_t CachingAllocator::deferred_reuses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return deferred_reuses_;
}

MemoryStats CachingAllocator::stats_snapshot() const {
  MemoryStats s = stats_;
  // PyTorch reports an unset max_split_size as SIZE_MAX cast to int64, i.e. -1.
  s.max_split_size = config_.max_split_size == std::numeric_limits<size_t>::max()
                         ? -1
                         : static_cast<int64_t>(config_.max_split_size);
  return s;
}

namespace {
template <typename F>
void for_each_stat(MemoryStats& s, F&& f) {
  for (StatArray* a : {&s.allocation, &s.allocated_bytes, &s.segment, &s.reserved_bytes, &s.active, &s.active_bytes,
                       &s.inactive_split, &s.inactive_split_bytes, &s.requested_bytes})
    for (Stat& stat : a->pools) f(stat);
  f(s.oversize_allocations);
  f(s.oversize_segments);
}
}  // namespace

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for_each_stat(stats_, [](Stat& s) { s.reset_peak(); });
}

void CachingAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for_each_stat(stats_, [](Stat& s) { s.reset_accumulated(); });
  stats_.num_alloc_retries = 0;
  stats_.num_ooms = 0;
  stats_.num_device_alloc = 0;
  stats_.num_device_free = 0;
  stats_.num_map_calls = 0;
  stats_.num_unmap_calls = 0;
  stats_.num_unmap_waits = 0;
  stats_.num_sync_all_streams = 0;
}

MemorySnapshot CachingAllocator::snapshot() const {
  MemorySnapshot snap;
  snap.device = source_->device_name();
  std::lock_guard<std::mutex> lock(mutex_);  // statistics and segments from one moment
  // A deferred merge is bookkeeping only (its statistics already count it): complete it so
  // the blocks read as merged.
  const_cast<CachingAllocator*>(this)->flush_deferred();
  snap.stats = stats_snapshot();
  for (const auto& [base, head] : segments_) {
    SegmentInfo seg;
    seg.address = base;
    seg.stream = head->stream;
    seg.is_large = !head->pool->is_small;
    seg.pool_id = head->pool->owner != nullptr ? head->pool->owner->id : 0;
    if (head->expandable != nullptr) snapshot_expandable(*head->expandable, seg);
    for (const Block* b = head; b != nullptr; b = b->next) {
      BlockInfo info;
      info.address = b->ptr;
      info.size = b->size;
      seg.total_size += b->size;
      if (b->allocated) {
        info.state = BlockState::Active;
        info.requested_size = b->requested;
        seg.allocated_size += b->size;
        seg.active_size += b->size;
        seg.requested_size += b->requested;
      } else if (b->event_count > 0) {
        info.state = BlockState::AwaitingFree;
        seg.active_size += b->size;
      } else {
        info.state = BlockState::Inactive;
      }
      seg.blocks.push_back(info);
    }
    if (!seg.is_expandable) seg.mapped_size = seg.total_size;
    snap.segments.push_back(std::move(seg));
  }
  // The ring buffer, oldest first.
  if (history_.size() < history_capacity_ || history_capacity_ == 0) {
    snap.history = history_;
  } else {
    snap.history.insert(snap.history.end(), history_.begin() + static_cast<std::ptrdiff_t>(history_next_),
                        history_.end());
    snap.history.insert(snap.history.end(), history_.begin(),
                        history_.begin() + static_cast<std::ptrdiff_t>(history_next_));
  }
  return snap;
}

void CachingAllocator::record_history(bool enabled, size_t max_entries) {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_deferred();
  if (enabled) {
    KILN_CHECK(max_entries > 0, "record_memory_history: max_entries must be positive");
    history_.clear();
    history_next_ = 0;
    history_capacity_ = max_entries;
  }
  history_enabled_ = enabled;  // turning it off keeps what was recorded for snapshots
}

MemPoolId CachingAllocator::create_pool() {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_deferred();
  const MemPoolId id = next_pool_id_++;
  private_pools_.emplace(id, std::make_unique<PrivatePool>(this, id, &node_memory_));
  return id;
}

void CachingAllocator::begin_allocate_to_pool(MemPoolId id, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_deferred();
  const auto it = private_pools_.find(id);
  KILN_CHECK(it != private_pools_.end() && !it->second->released,
             "begin_allocate_to_pool: pool {} does not exist or was released", id);
  for (const auto& [s, pool] : capturing_)
    KILN_CHECK(s != stream, "begin_allocate_to_pool: stream {:#x} already allocates to pool {}", s, pool->id);
  capturing_.emplace_back(stream, it->second.get());
}

void CachingAllocator::end_allocate_to_pool(MemPoolId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_deferred();
  std::erase_if(capturing_, [id](const auto& entry) { return entry.second->id == id; });
}

void CachingAllocator::release_pool(MemPoolId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_deferred();
  const auto it = private_pools_.find(id);
  KILN_CHECK(it != private_pools_.end() && !it->second->released, "release_pool: pool {} does not exist or was "
                                                                    "already released", id);
  std::erase_if(capturing_, [id](const auto& entry) { return entry.second->id == id; });
  PrivatePool* pool = it->second.get();
  pool->released = true;
  if (pool->segments == 0) {
    private_pools_.erase(it);
    return;
  }
  // Release the cached whole segments now; the rest go as their blocks are freed (the pool
  // disappears with its last segment, so look it up again for each half).
  for (bool small : {true, false}) {
    const auto again = private_pools_.find(id);
    if (again == private_pools_.end()) break;
    release_whole_segments(small ? again->second->small : again->second->large);
  }
}

}  // namespace kiln
