// The caching allocator's allocate / free path: pool choice, best fit, splitting, merging,
// stream events, segment growth and release, and the out-of-memory report. Statistics
// follow PyTorch's definitions (memory_stats.h); the inactive-split bookkeeping, the subtle
// one, is commented where it changes.
#include "caching_allocator.h"

#include <algorithm>
#include <chrono>

#include "../core/error.h"
#include "caching_allocator_internal.h"
#include "memory_observer.h"

namespace kiln {

CachingAllocator::CachingAllocator(std::unique_ptr<SegmentSource> source, AllocatorConfig config)
    : source_(std::move(source)),
      config_(config),
      small_pool_(std::make_unique<BlockPool>(this, true, nullptr, &node_memory_)),
      large_pool_(std::make_unique<BlockPool>(this, false, nullptr, &node_memory_)),
      allocated_(&node_memory_) {
  KILN_INTERNAL_ASSERT(source_ != nullptr);
  // Expandable segments need caching (without it every block is its own segment) and a
  // source with virtual memory; otherwise the classic segments serve.
  if (config_.expandable_segments && config_.caching) {
    const size_t granularity = source_->vmm_granularity();
    if (granularity > 0) {
      expandable_ = std::make_unique<Expandable>(&node_memory_);
      expandable_->granularity = granularity;
      large_pool_->expandable = true;
      small_pool_->expandable = config_.expandable_small_pool;
    }
  }
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const PendingEvent& pe : pending_events_) source_->destroy_event(pe.event);
  if (expandable_) destroy_expandable_segments();
  for (auto& [base, head] : segments_) {
    size_t total = 0;
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      total += b->size;
      delete b;
      b = next;
    }
    source_->release(reinterpret_cast<void*>(base), total);
  }
  for (Block* b : spare_blocks_) delete b;
}

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

int CachingAllocator::pool_index(const BlockPool& pool) {
  return static_cast<int>(pool.is_small ? StatPool::Small : StatPool::Large);
}

namespace {
// PyTorch's roundup_power2_divisions: `size` rounded up to the next of `divisions` (a power
// of two) equal steps between the powers of two around it (1200 in 4 divisions: 1280).
size_t roundup_power2_next_division(size_t size, size_t divisions) {
  if ((size & (size - 1)) == 0) return size;
  const size_t floor = size_t{1} << (63 - __builtin_clzll(size));
  const size_t step = floor >> (63 - __builtin_clzll(divisions));
  if (step == 0) return floor << 1;
  const size_t rounded = size & ~(step - 1);
  return rounded == size ? size : rounded + step;
}
}  // namespace

size_t CachingAllocator::round_size(size_t bytes) const {
  if (bytes <= config_.roundup_bypass_threshold && bytes <= (size_t{1} << 62)) {
    // The interval of `bytes`: [1, 2) MiB and below is 0, [2, 4) MiB is 1, ... (PyTorch's).
    const int log = 63 - __builtin_clzll(bytes | 1);
    const size_t interval = static_cast<size_t>(std::clamp(log - 20, 0, int{AllocatorConfig::kRoundupIntervals} - 1));
    const size_t divisions = config_.roundup_power2_divisions[interval];
    if (divisions > 1 && bytes > kMinBlockSize * divisions) return roundup_power2_next_division(bytes, divisions);
  }
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t CachingAllocator::segment_size_for(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

CachingAllocator::BlockPool& CachingAllocator::pool_for(size_t size, StreamId stream) {
  for (const auto& [s, pool] : capturing_)
    if (s == stream) return size <= kSmallSize ? pool->small : pool->large;
  return size <= kSmallSize ? *small_pool_ : *large_pool_;
}

CachingAllocator::Block* CachingAllocator::make_block() {
  if (spare_blocks_.empty()) return new Block();
  Block* b = spare_blocks_.back();
  spare_blocks_.pop_back();
  *b = Block();
  return b;
}

void CachingAllocator::recycle_block(Block* block) { spare_blocks_.push_back(block); }

bool CachingAllocator::is_whole_segment(const Block* block) const {
  return block->prev == nullptr && block->next == nullptr;
}

void* CachingAllocator::allocate(size_t bytes, StreamId stream, const char* op) {
  if (bytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  Block* block = take_deferred(bytes, stream);
  if (block == nullptr) block = allocate_block(bytes, stream, op);
  allocated_.emplace(block->ptr, block);
  return reinterpret_cast<void*>(block->ptr);
}

CachingAllocator::Block* CachingAllocator::allocate_block(size_t bytes, StreamId stream, const char* op) {
  KILN_CHECK(bytes <= std::numeric_limits<size_t>::max() - kRoundLarge, "{}: cannot allocate {} bytes (size overflows)",
             op, bytes);
  flush_deferred();
  process_events();  // flushes what it defers
  const size_t size = round_size(bytes);
  BlockPool& pool = pool_for(size, stream);
  if (pool.expandable) return allocate_expandable(pool, bytes, size, stream, op);
  Block* block = config_.caching ? take_free_block(pool, stream, size) : nullptr;
  if (block == nullptr) {
    // Without caching every allocation is its own segment of exactly the rounded size.
    const size_t segment = config_.caching ? segment_size_for(size) : size;
    if (config_.garbage_collection_threshold > 0.0) garbage_collect(segment);
    block = new_segment(pool, stream, segment);
    if (block == nullptr) {
      // The device is out of memory: wait for blocks that only wait for stream events, give
      // back every cached whole segment, and retry once.
      ++stats_.num_alloc_retries;
      synchronize_pending_events();
      release_cached_blocks();
      block = new_segment(pool, stream, segment);
    }
    if (block == nullptr) throw_oom(op, bytes, size, stream);
  }
  if (should_split(block, size)) split(block, size);
  finish_allocation(block, bytes, stream);
  return block;
}

void CachingAllocator::finish_allocation(Block* block, size_t bytes, StreamId stream) {
  block->allocated = true;
  block->requested = bytes;
  const auto idx = static_cast<StatPool>(pool_index(*block->pool));
  stats_.allocation.increase(idx, 1);
  stats_.allocated_bytes.increase(idx, static_cast<int64_t>(block->size));
  stats_.active.increase(idx, 1);
  stats_.active_bytes.increase(idx, static_cast<int64_t>(block->size));
  stats_.requested_bytes.increase(idx, static_cast<int64_t>(bytes));
  if (block->size >= config_.max_split_size) stats_.oversize_allocations.increase(1);
  record(TraceAction::Alloc, block->ptr, bytes, stream);  // the size asked for, as PyTorch records it
  notify_observer(static_cast<int64_t>(block->size));
}

void CachingAllocator::notify_observer(int64_t bytes) const {
  if (const MemoryObserver observer = detail::g_memory_observer.load(std::memory_order_relaxed)) [[unlikely]]
    if (device_) observer(*device_, bytes);
}

// A DataPtr carries its Block (whose pool knows the allocator) instead of the address, so
// the free that ends a tensor's life needs no lookup: allocated_ holds only the blocks of
// raw allocate() calls, which free(ptr) must find by address.
DataPtr CachingAllocator::allocate_data(size_t bytes, StreamId stream, const char* op) {
  if (bytes == 0) return DataPtr();
  Block* block;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    block = take_deferred(bytes, stream);
    if (block == nullptr) block = allocate_block(bytes, stream, op);
  }
  return DataPtr(reinterpret_cast<void*>(block->ptr), block, &free_data_block);
}

void CachingAllocator::free_data_block(void* context, void* /*data*/) {
  auto* block = static_cast<Block*>(context);
  CachingAllocator& self = *block->pool->allocator;
  std::lock_guard<std::mutex> lock(self.mutex_);
  try {
    self.release_block(block);
  } catch (...) {
    // Runs from a destructor: a DataPtr only ever frees its own live block, and a failure
    // to record a stream event here has nowhere to be reported.
  }
}

CachingAllocator::Block* CachingAllocator::take_free_block(BlockPool& pool, StreamId stream, size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  key.ptr = 0;
  const auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  if (wastes_block(size, block->size)) return nullptr;
  pool.blocks.erase(it);
  if (block->is_split()) {  // a free piece of a split segment leaves the inactive-split count
    const auto idx = static_cast<StatPool>(pool_index(pool));
    stats_.inactive_split.decrease(idx, 1);
    stats_.inactive_split_bytes.decrease(idx, static_cast<int64_t>(block->size));
  }
  return block;
}

CachingAllocator::Block* CachingAllocator::new_segment(BlockPool& pool, StreamId stream, size_t segment_size) {
  void* p = source_->allocate(segment_size);
  if (p == nullptr) return nullptr;
  ++stats_.num_device_alloc;
  Block* block = make_block();
  block->ptr = reinterpret_cast<uintptr_t>(p);
  block->size = segment_size;
  block->stream = stream;
  block->pool = &pool;
  segments_.emplace(block->ptr, block);
  if (pool.owner != nullptr) ++pool.owner->segments;
  const auto idx = static_cast<StatPool>(pool_index(pool));
  stats_.segment.increase(idx, 1);
  stats_.reserved_bytes.increase(idx, static_cast<int64_t>(segment_size));
  if (segment_size >= config_.max_split_size) stats_.oversize_segments.increase(1);
  record(TraceAction::SegmentAlloc, block->ptr, segment_size, stream);
  return block;
}

bool CachingAllocator::wastes_block(size_t size, size_t block_size) const {
  // Keep blocks of max_split_size and above for requests that need them, and do not hand
  // an oversize request a block far larger than it (either would waste a big block). A
  // block no larger than the segment this request would get anyway is fair game, though:
  // a request just below max_split_size whose segment rounds up past it would otherwise
  // never reuse its own freed segment and grow the reserve on every cycle (PyTorch does).
  if (size < config_.max_split_size && block_size >= config_.max_split_size && block_size > segment_size_for(size))
    return true;
  return size >= config_.max_split_size && block_size >= size + config_.max_non_split_rounding;
}

bool CachingAllocator::splits_rest(bool small_pool, size_t size, size_t remaining) const {
  if (small_pool) return remaining >= kMinBlockSize;
  return size < config_.max_split_size && remaining > kSmallSize;
}

bool CachingAllocator::should_split(const Block* block, size_t size) const {
  return splits_rest(block->pool->is_small, size, block->size - size);
}

bool CachingAllocator::spans_split_segment(const Block* first, const Block* last) {
  return first->prev != nullptr || last->next != nullptr;
}

CachingAllocator::Block* CachingAllocator::split(Block* block, size_t size) {
  Block* rest = make_block();
  rest->ptr = block->ptr + size;
  rest->size = block->size - size;
  rest->stream = block->stream;
  rest->pool = block->pool;
  rest->expandable = block->expandable;
  rest->last_used = block->last_used;
  rest->prev = block;
  rest->next = block->next;
  if (block->next != nullptr) block->next->prev = rest;
  block->next = rest;
  block->size = size;
  block->pool->blocks.insert(rest);
  const auto idx = static_cast<StatPool>(pool_index(*block->pool));
  stats_.inactive_split.increase(idx, 1);  // the remainder is a free piece of a split segment
  stats_.inactive_split_bytes.increase(idx, static_cast<int64_t>(rest->size));
  return rest;
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = allocated_.find(reinterpret_cast<uintptr_t>(ptr));
  KILN_CHECK(it != allocated_.end(), "free: {} is not a live allocation of the {} caching allocator (freed twice?)",
             ptr, source_->device_name());
  Block* block = it->second;
  allocated_.erase(it);
  release_block(block);
}

void CachingAllocator::release_block(Block* block) {
  notify_observer(-static_cast<int64_t>(block->size));
  block->allocated = false;
  const auto idx = static_cast<StatPool>(pool_index(*block->pool));
  stats_.allocation.decrease(idx, 1);
  stats_.allocated_bytes.decrease(idx, static_cast<int64_t>(block->size));
  stats_.requested_bytes.decrease(idx, static_cast<int64_t>(block->requested));
  if (block->size >= config_.max_split_size) stats_.oversize_allocations.decrease(1);
  block->requested = 0;
  if (!block->stream_uses.empty()) {
    // Still in use by other streams: stays active until their events complete.
    record(TraceAction::FreeRequested, block->ptr, block->size, block->stream);
    insert_events(block);
  } else {
    free_block(block);
  }
}

void CachingAllocator::merge_into(Block* dst, Block* src) {
  // dst is src's lower neighbour and absorbs it, so a segment's first block never moves.
  dst->size += src->size;
  dst->next = src->next;
  if (src->next != nullptr) src->next->prev = dst;
  recycle_block(src);
}

bool CachingAllocator::is_mergeable(const Block* block) {
  return block != nullptr && !block->allocated && block->event_count == 0;
}

void CachingAllocator::free_block(Block* block) {
  flush_deferred();  // at most one block waits for its merge
  if (block->expandable != nullptr) {
    free_expandable_block(block);
    return;
  }
  BlockPool& pool = *block->pool;
  const auto idx = static_cast<StatPool>(pool_index(pool));
  record(TraceAction::FreeCompleted, block->ptr, block->size, block->stream);  // the block as freed, before merging
  stats_.active.decrease(idx, 1);
  stats_.active_bytes.decrease(idx, static_cast<int64_t>(block->size));
  // Free neighbours were counted as inactive split blocks; the merged block replaces them.
  Block* prev = is_mergeable(block->prev) ? block->prev : nullptr;
  Block* next = is_mergeable(block->next) ? block->next : nullptr;
  int64_t net_blocks = 0, net_bytes = 0;
  size_t merged_size = block->size;
  for (Block* n : {prev, next}) {
    if (n == nullptr) continue;
    net_blocks -= 1;
    net_bytes -= static_cast<int64_t>(n->size);
    merged_size += n->size;
  }
  const bool merged_is_split =
      spans_split_segment(prev != nullptr ? prev : block, next != nullptr ? next : block);
  if (merged_is_split) {
    net_blocks += 1;
    net_bytes += static_cast<int64_t>(merged_size);
  }
  if (net_blocks > 0) stats_.inactive_split.increase(idx, net_blocks);
  if (net_blocks < 0) stats_.inactive_split.decrease(idx, -net_blocks);
  if (net_bytes > 0) stats_.inactive_split_bytes.increase(idx, net_bytes);
  if (net_bytes < 0) stats_.inactive_split_bytes.decrease(idx, -net_bytes);
  const uint64_t tick = ++use_tick_;

  const bool pool_released = pool.owner != nullptr && pool.owner->released;
  const bool releases = !merged_is_split && (!config_.caching || pool_released);
  if (prev == nullptr && merged_is_split && config_.caching && config_.defer_merges) {
    // Defer the merge (see flush_deferred): the next request of this size on this stream
    // takes the block straight back, and the merge and re-split cancel out. (A block that
    // would merge into a whole segment is never deferred: releasing cached segments must
    // find it in its pool.)
    block->last_used = tick;
    deferred_ = block;
    deferred_next_ = next;
    return;
  }
  merge_free_block(block, prev, next, tick);
  if (releases) release_segment(prev != nullptr ? prev : block);
}

void CachingAllocator::merge_free_block(Block* block, Block* prev, Block* next, uint64_t tick) {
  BlockPool& pool = *block->pool;
  if (prev != nullptr) {
    pool.blocks.erase(prev);
    merge_into(prev, block);
    block = prev;
  }
  if (next != nullptr) {
    pool.blocks.erase(next);
    merge_into(block, next);
  }
  block->last_used = tick;
  pool.blocks.insert(block);
}

void CachingAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_deferred();
  Block* block = find_live_block(reinterpret_cast<uintptr_t>(ptr));
  KILN_CHECK(block != nullptr, "record_stream: {} is not a live allocation of the {} caching allocator", ptr,
             source_->device_name());
  if (stream == block->stream) return;  // its own stream orders its reuse already
  for (StreamId s : block->stream_uses)
    if (s == stream) return;
  block->stream_uses.push_back(stream);
}

CachingAllocator::Block* CachingAllocator::find_live_block(uintptr_t address) const {
  if (const auto it = allocated_.find(address); it != allocated_.end()) return it->second;
  // A tensor's block: walk the segment that holds the address (rare: record_stream only).
  auto seg = segments_.upper_bound(address);
  if (seg == segments_.begin()) return nullptr;
  --seg;
  for (Block* b = seg->second; b != nullptr && b->ptr <= address; b = b->next)
    if (b->ptr == address) return b->allocated ? b : nullptr;
  return nullptr;
}

void CachingAllocator::insert_events(Block* block) {
  for (StreamId s : block->stream_uses) {
    pending_events_.push_back({source_->record_event(s), block});
    ++block->event_count;
  }
  block->stream_uses.clear();
}

void CachingAllocator::process_events() {
  if (pending_events_.empty()) return;
  size_t keep = 0;
  for (size_t i = 0; i < pending_events_.size(); ++i) {
    const PendingEvent pe = pending_events_[i];
    if (!source_->event_completed(pe.event)) {
      pending_events_[keep++] = pe;
      continue;
    }
    source_->destroy_event(pe.event);
    if (--pe.block->event_count == 0) free_block(pe.block);
  }
  pending_events_.resize(keep);
  flush_deferred();  // callers go on to search or release the free blocks
}

void CachingAllocator::synchronize_pending_events() {
  ++stats_.num_sync_all_streams;  // counted per call, as PyTorch counts it
  for (const PendingEvent& pe : pending_events_) source_->wait_event(pe.event);
  process_events();
}

void CachingAllocator::release_segment(Block* block) {
  BlockPool& pool = *block->pool;
  pool.blocks.erase(block);
  segments_.erase(block->ptr);
  source_->release(reinterpret_cast<void*>(block->ptr), block->size);
  ++stats_.num_device_free;
  const auto idx = static_cast<StatPool>(pool_index(pool));
  stats_.segment.decrease(idx, 1);
  stats_.reserved_bytes.decrease(idx, static_cast<int64_t>(block->size));
  if (block->size >= config_.max_split_size) stats_.oversize_segments.decrease(1);
  record(TraceAction::SegmentFree, block->ptr, block->size, block->stream);
  PrivatePool* owner = pool.owner;
  recycle_block(block);
  if (owner != nullptr && --owner->segments == 0 && owner->released) private_pools_.erase(owner->id);
}

void CachingAllocator::release_whole_segments(BlockPool& pool) {
  std::vector<Block*> whole;
  for (Block* b : pool.blocks)
    if (is_whole_segment(b) && b->expandable == nullptr) whole.push_back(b);
  for (Block* b : whole) release_segment(b);
}

void CachingAllocator::release_cached_blocks() {
  release_whole_segments(*small_pool_);
  release_whole_segments(*large_pool_);
  if (expandable_) release_expandable_cache(/*release_empty_segments=*/true);
  // Private pools still in use keep their cache (a captured graph replays into it). A
  // released pool disappears with its last segment, so look it up again for each half.
  std::vector<MemPoolId> released;
  for (const auto& [id, pool] : private_pools_)
    if (pool->released) released.push_back(id);
  for (MemPoolId id : released) {
    for (bool small : {true, false}) {
      const auto it = private_pools_.find(id);
      if (it == private_pools_.end()) break;
      release_whole_segments(small ? it->second->small : it->second->large);
    }
  }
}

void CachingAllocator::garbage_collect(size_t about_to_allocate) {
  if (device_total_ == 0) device_total_ = source_->memory_info().second;  // fixed for a device: ask once
  const size_t total = device_total_;
  const auto limit = static_cast<int64_t>(config_.garbage_collection_threshold * static_cast<double>(total));
  auto reserved = [this] { return stats_.reserved_bytes[StatPool::All].current; };
  if (reserved() + static_cast<int64_t>(about_to_allocate) <= limit) return;
  // Least recently freed whole segments go first.
  std::vector<Block*> candidates;
  for (BlockPool* pool : {small_pool_.get(), large_pool_.get()})
    for (Block* b : pool->blocks)
      if (is_whole_segment(b) && b->expandable == nullptr) candidates.push_back(b);
  std::sort(candidates.begin(), candidates.end(),
            [](const Block* a, const Block* b) { return a->last_used < b->last_used; });
  for (Block* b : candidates) {
    if (reserved() + static_cast<int64_t>(about_to_allocate) <= limit) break;
    release_segment(b);
  }
  // Then cached pages of expandable segments, least recently freed first.
  const int64_t over = reserved() + static_cast<int64_t>(about_to_allocate) - limit;
  if (expandable_ && over > 0) unmap_lru_pages(over);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_deferred();
  // Like torch.cuda.empty_cache(): wait for the streams that still use freed blocks, so
  // those blocks are back in the cache and their segments can go too.
  synchronize_pending_events();
  release_cached_blocks();
}

void CachingAllocator::throw_oom(const char* op, size_t bytes, size_t size, StreamId stream) {
  ++stats_.num_ooms;
  record(TraceAction::Oom, 0, bytes, stream);
  const auto [device_free, device_total] = source_->memory_info();
  const auto allocated = static_cast<size_t>(stats_.allocated_bytes[StatPool::All].current);
  const auto reserved = static_cast<size_t>(stats_.reserved_bytes[StatPool::All].current);
  const auto active = static_cast<size_t>(stats_.active_bytes[StatPool::All].current);
  const auto non_releasable = static_cast<size_t>(stats_.inactive_split_bytes[StatPool::All].current);
  std::string advice;
  if (expandable_ != nullptr && pool_for(size, stream).expandable)
    advice =
        " Expandable segments are on: the non-releasable memory is the free part of pages that also hold live "
        "tensors. Free tensors you no longer need or use smaller batches.";
  else if (non_releasable > 0 && non_releasable >= size / 4)
    advice = fmt::format(
        " The non-releasable memory is fragmentation (free pieces of split segments): setting "
        "KILN_ALLOC_CONF=max_split_size_mb:{} keeps blocks of that size and above whole, and freeing tensors "
        "you no longer need lets their pieces merge again.",
        std::max<size_t>(21, (size >> 20) + 1));
  else
    advice =
        " Free tensors you no longer need, use smaller batches, or set "
        "KILN_ALLOC_CONF=max_split_size_mb:<N> if memory_summary() shows much non-releasable memory.";
  KILN_INTERNAL_ASSERT(reserved >= active && active >= allocated);
  const std::string awaiting =
      active > allocated ? fmt::format(", {} waits for stream events before reuse", format_bytes(active - allocated))
                         : std::string();
  throw OutOfMemoryError(
      fmt::format("{}: out of memory on {}: tried to allocate {} ({} bytes, rounded to {}). The device has {} in "
                  "total, of which {} is free. Kiln has {} allocated and {} reserved: {} of the reserved memory is "
                  "cached and free{}, and {} of it is non-releasable.{}",
                  op, source_->device_name(), format_bytes(bytes), bytes, format_bytes(size),
                  format_bytes(device_total), format_bytes(device_free), format_bytes(allocated),
                  format_bytes(reserved), format_bytes(reserved - active), awaiting, format_bytes(non_releasable),
                  advice),
      __FILE__, __LINE__);
}

void CachingAllocator::record(TraceAction action, uint64_t address, uint64_t size, StreamId stream) {
  if (!history_enabled_) return;
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  const TraceEntry entry{action, address, size, stream,
                         std::chrono::duration_cast<std::chrono::microseconds>(now).count()};
  if (history_.size() < history_capacity_) {
    history_.push_back(entry);
  } else {
    history_[history_next_] = entry;
  }
  history_next_ = (history_next_ + 1) % history_capacity_;
}

}  // namespace kiln
