// Expandable segments: the default pools' memory as address ranges with physical pages mapped
// on demand (see the file comment of caching_allocator.h for the idea).
//
// Each (pool, stream) gets a segment whose address range is as large as the device (9/8 of
// its memory, as PyTorch reserves), tiled by blocks from end to end; a free block may span
// mapped and unmapped pages. Every page keeps the bytes of blocks in use on it ("live": blocks
// allocated or awaiting stream events), so the allocator knows at once which mapped pages
// hold nothing live. Those free pages are ordered by when they were freed.
//
// Allocation: best fit among the free blocks of the stream, as for classic segments (a new
// segment only when none fits, which takes an address range, no memory). Pages under the
// chosen range that are not mapped get physical pages: first free pages taken from anywhere
// else (least recently freed first; unmapped there, mapped here, so no memory is created),
// then new pages from the device. Mapped bytes therefore grow only when the pages that live
// blocks touch outgrow every page ever mapped, and the number of map/unmap calls stays with
// the pages that actually move (num_map_calls / num_unmap_calls count them). Freed pages stay
// mapped until needed elsewhere, or until empty_cache, garbage collection or an out-of-memory
// retry unmaps them and gives them back.
//
// Waiting for the GPU. cuMemUnmap is not stream-ordered: a page may be unmapped only once the
// GPU has run the work queued before its last block was freed. Blocks are reused in place
// without that (stream order covers it), but a page that moves must not be pulled from under
// a kernel still queued. So a free that leaves pages with no live byte records one event on
// the segment's stream, shared by those pages (FreeEvent, reference-counted; a free that
// empties no page records none, and the source pools the events). A page that moves must have
// its event completed, asked without blocking; pages still in use by queued work are skipped
// and new pages created instead. In a training loop, where the host runs ahead of the GPU,
// the steady state therefore never synchronises: the memory in flight costs a few more pages,
// not a stall per step. Only when the device has no page left does the host wait, for the
// events of the oldest free pages (not for everything queued since), and take those; then
// comes the out-of-memory retry. empty_cache and garbage collection wait for the free pages'
// events too, which have usually completed. num_unmap_waits counts the waits that blocked.
// Pages of a stream being captured into a CUDA Graph stay put. While any capture is underway
// no event is recorded, queried or waited for (CUDA forbids or captures those calls): a free
// then records its event once the capture has ended, and only pages already known idle move.
//
// Statistics: reserved bytes are the mapped pages; non-releasable (inactive split) bytes are
// the free bytes on pages that also hold live bytes, the only cached memory that cannot be
// unmapped, and inactive split blocks the free blocks with such bytes. Every operation
// changes those only in the pages and blocks it touches, and the code updates them there.
#include <algorithm>
#include <limits>

#include "../core/error.h"
#include "caching_allocator_internal.h"

namespace kiln {

namespace {
size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

/// True when `stream` is being captured into a CUDA Graph (its allocations go to a private
/// pool): recording an event on it or waiting for it is not allowed then, so its segments'
/// pages stay where they are.
template <typename Capturing>
bool is_capturing(const Capturing& capturing, StreamId stream) {
  for (const auto& [s, pool] : capturing)
    if (s == stream) return true;
  return false;
}
}  // namespace

CachingAllocator::Block* CachingAllocator::allocate_expandable(BlockPool& pool, size_t bytes, size_t size,
                                                               StreamId stream, const char* op) {
  for (int attempt = 0;; ++attempt) {
    Block* block = find_expandable_block(pool, stream, size);
    if (block != nullptr && map_block_pages(block, size)) {
      finish_expandable_allocation(block, bytes, size, stream);
      return block;
    }
    if (attempt == 1) {
      // Give back what the failed attempt mapped, so an OOM leaves only live pages behind.
      release_cached_blocks();
      throw_oom(op, bytes, size, stream);
    }
    // The device is out of memory (or address space): wait for blocks that only wait for
    // stream events, unmap every cached page and release cached segments, and search again
    // (the release may have changed every free block).
    ++stats_.num_alloc_retries;
    synchronize_pending_events();
    release_cached_blocks();
  }
}

CachingAllocator::Block* CachingAllocator::find_expandable_block(BlockPool& pool, StreamId stream, size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  key.ptr = 0;
  const auto it = pool.blocks.lower_bound(&key);
  if (it != pool.blocks.end() && (*it)->stream == stream) return *it;
  return new_expandable_segment(pool, stream, size);
}

CachingAllocator::Block* CachingAllocator::new_expandable_segment(BlockPool& pool, StreamId stream, size_t size) {
  Expandable& ex = *expandable_;
  if (ex.address_space == 0) {
    // 9/8 of the device: room to move pages to the end of a segment whose start is in use.
    if (device_total_ == 0) device_total_ = source_->memory_info().second;
    const size_t total = std::max(device_total_, ex.granularity);
    ex.address_space = round_up(total / 8 * 9, ex.granularity);
  }
  // A request larger than the device can never be mapped: no address range for it.
  if (size > device_total_) return nullptr;
  const size_t bytes = std::max(ex.address_space, round_up(size, ex.granularity));
  void* base = source_->reserve_address_range(bytes);
  if (base == nullptr) return nullptr;
  auto seg = std::make_unique<ExpandableSegment>();
  seg->base = reinterpret_cast<uintptr_t>(base);
  seg->size = bytes;
  seg->page = ex.granularity;
  seg->pool = &pool;
  seg->stream = stream;
  seg->id = ex.next_id++;
  seg->pages.resize(bytes / ex.granularity);
  Block* head = make_block();
  head->ptr = seg->base;
  head->size = bytes;
  head->stream = stream;
  head->pool = &pool;
  head->expandable = seg.get();
  segments_.emplace(head->ptr, head);
  pool.blocks.insert(head);
  stats_.segment.increase(static_cast<StatPool>(pool_index(pool)), 1);
  ex.segments.emplace(seg->id, std::move(seg));
  return head;
}

bool CachingAllocator::map_block_pages(Block* block, size_t size) {
  ExpandableSegment& seg = *block->expandable;
  const size_t first = seg.page_of(block->ptr), last = seg.page_of(block->ptr + size - 1);
  size_t i = first;
  while (i <= last && seg.pages[i].handle != 0) ++i;
  if (i > last) return true;  // the common case: every page is there already
  std::vector<size_t> missing;
  for (; i <= last; ++i)
    if (seg.pages[i].handle == 0) missing.push_back(i);
  // Pages to move here first, then new ones. (Moving every cached page the GPU is done with
  // before creating one is garbage collection at its limit, so the threshold has nothing to
  // add here.)
  std::vector<PageHandle> pages;
  pages.reserve(missing.size());
  // More pages than the device has in all can never be had: fail before moving or creating
  // any (creating them one by one would fill the device before the answer is known).
  if (device_total_ == 0) device_total_ = source_->memory_info().second;
  if (missing.size() > device_total_ / seg.page) return false;
  // Free pages whose work has run are moved without waiting, then new pages are created; only
  // a device out of memory makes the host wait for the GPU to finish with more free pages.
  size_t moved_across_pools = steal_pages(seg, first, last, missing.size(), /*wait=*/false, pages);
  size_t created = 0;
  while (pages.size() < missing.size()) {
    const PageHandle page = source_->create_page();
    if (page == 0) break;
    pages.push_back(page);
    ++created;
  }
  if (pages.size() < missing.size())
    moved_across_pools += steal_pages(seg, first, last, missing.size() - pages.size(), /*wait=*/true, pages);
  stats_.num_device_alloc += static_cast<int64_t>(created);
  const auto idx = static_cast<StatPool>(pool_index(*seg.pool));
  stats_.reserved_bytes.increase(idx, static_cast<int64_t>((created + moved_across_pools) * seg.page));
  // Map what was obtained onto the first missing pages, a call per run of adjacent pages. On
  // a shortfall the pages mapped stay as cached pages of this segment (the retry path
  // unmaps them with the rest).
  for (size_t k = 0; k < pages.size();) {
    size_t run = 1;
    while (k + run < pages.size() && missing[k + run] == missing[k] + run) ++run;
    map_run(seg, missing[k], pages.data() + k, run);
    k += run;
  }
  return pages.size() == missing.size();
}

size_t CachingAllocator::steal_pages(const ExpandableSegment& target, size_t first, size_t last, size_t wanted,
                                     bool wait, std::vector<PageHandle>& out) {
  Expandable& ex = *expandable_;
  // The victims: free pages outside the range being mapped, least recently freed first. Without
  // `wait`, only pages whose free-time event has completed: the events of one stream complete
  // in the order they were recorded, which is the order of the free pages, so a stream whose
  // event is still pending has no later page to offer either and is not asked again.
  std::map<ExpandableSegment*, std::vector<size_t>> victims;
  SmallVector<StreamId, 4> busy;
  size_t found = 0;
  for (auto it = ex.free_pages.begin(); it != ex.free_pages.end() && found < wanted; ++it) {
    ExpandableSegment* seg = it->seg;
    if (seg == &target && it->index >= first && it->index <= last) continue;
    if (is_capturing(capturing_, seg->stream)) continue;
    FreeEvent* event = seg->pages[it->index].free_event;
    if (wait) {
      if (!wait_free_event(event)) continue;
    } else if (event != nullptr && !event->completed) {
      if (std::find(busy.begin(), busy.end(), event->stream) != busy.end()) continue;
      if (!free_event_completed(event)) {
        busy.push_back(event->stream);
        continue;
      }
    }
    victims[seg].push_back(it->index);
    ++found;
  }
  size_t across = 0;
  const int target_idx = pool_index(*target.pool);
  for (auto& [seg, indices] : victims) {
    const size_t before = out.size();
    unmap_pages(*seg, indices, &out);
    // A page that moves to the other pool's statistics leaves this one's reserved bytes.
    if (pool_index(*seg->pool) != target_idx) {
      const size_t n = out.size() - before;
      stats_.reserved_bytes.decrease(static_cast<StatPool>(pool_index(*seg->pool)),
                                     static_cast<int64_t>(n * seg->page));
      across += n;
    }
  }
  return across;
}

CachingAllocator::FreeEvent* CachingAllocator::new_free_event(StreamId stream) {
  Expandable& ex = *expandable_;
  if (ex.spare_free_events.empty()) {
    ex.free_events.push_back(std::make_unique<FreeEvent>());
    ex.spare_free_events.push_back(ex.free_events.back().get());
  }
  FreeEvent* event = ex.spare_free_events.back();
  ex.spare_free_events.pop_back();
  *event = FreeEvent();
  event->stream = stream;
  // While a capture is underway, recording on the captured stream would put the event into
  // the graph, and recording on the legacy stream would break the capture: the event is then
  // recorded when first asked after the capture (it covers the work before the free, and more).
  if (capturing_.empty()) {
    event->event = source_->record_event(stream);
    event->recorded = true;
  }
  return event;
}

void CachingAllocator::drop_free_event(ExpandablePage& page) {
  FreeEvent* event = page.free_event;
  if (event == nullptr) return;
  page.free_event = nullptr;
  if (--event->pages > 0) return;
  if (event->recorded && !event->completed) source_->destroy_event(event->event);
  expandable_->spare_free_events.push_back(event);
}

bool CachingAllocator::free_event_completed(FreeEvent* event) {
  if (event == nullptr || event->completed) return true;
  // Event queries are not allowed while a capture is underway (CUDA's global capture mode).
  if (!capturing_.empty()) return false;
  if (!event->recorded) {
    event->event = source_->record_event(event->stream);
    event->recorded = true;
  }
  if (!source_->event_completed(event->event)) return false;
  source_->destroy_event(event->event);  // known complete for good: the source may reuse it
  event->completed = true;
  return true;
}

bool CachingAllocator::wait_free_event(FreeEvent* event) {
  if (free_event_completed(event)) return true;
  if (!capturing_.empty()) return false;  // nor is waiting
  source_->wait_event(event->event);
  ++stats_.num_unmap_waits;
  source_->destroy_event(event->event);
  event->completed = true;
  return true;
}

// Only for the destructor, whose pages may still hold live blocks (no free event covers them).
void CachingAllocator::wait_for_stream(StreamId stream) {
  const EventId event = source_->record_event(stream);
  source_->wait_event(event);
  source_->destroy_event(event);
}

void CachingAllocator::map_run(ExpandableSegment& seg, size_t first, const PageHandle* pages, size_t count) {
  source_->map_pages(reinterpret_cast<void*>(seg.address_of(first)), pages, count);
  for (size_t k = 0; k < count; ++k) {
    ExpandablePage& p = seg.pages[first + k];
    p.handle = pages[k];
    if (p.live == 0) {
      p.freed = use_tick_;
      expandable_->free_pages.insert({p.freed, seg.id, first + k, &seg});
    }
  }
  seg.mapped += count;
  stats_.num_map_calls += static_cast<int64_t>(count);
  record(TraceAction::SegmentMap, seg.address_of(first), count * seg.page, seg.stream);
}

void CachingAllocator::unmap_pages(ExpandableSegment& seg, const std::vector<size_t>& pages,
                                   std::vector<PageHandle>* keep) {
  std::vector<size_t> sorted = pages;
  std::sort(sorted.begin(), sorted.end());
  const auto idx = static_cast<StatPool>(pool_index(*seg.pool));
  for (size_t k = 0; k < sorted.size();) {
    size_t run = 1;
    while (k + run < sorted.size() && sorted[k + run] == sorted[k] + run) ++run;
    source_->unmap_pages(reinterpret_cast<void*>(seg.address_of(sorted[k])), run);
    record(TraceAction::SegmentUnmap, seg.address_of(sorted[k]), run * seg.page, seg.stream);
    for (size_t j = k; j < k + run; ++j) {
      ExpandablePage& p = seg.pages[sorted[j]];
      KILN_INTERNAL_ASSERT(p.handle != 0 && p.live == 0, "unmap of page {} (live {})", sorted[j], p.live);
      expandable_->free_pages.erase({p.freed, seg.id, sorted[j], &seg});
      drop_free_event(p);
      if (keep != nullptr) {
        keep->push_back(p.handle);
      } else {
        source_->release_page(p.handle);
        ++stats_.num_device_free;
        stats_.reserved_bytes.decrease(idx, static_cast<int64_t>(seg.page));
      }
      p.handle = 0;
    }
    k += run;
  }
  seg.mapped -= sorted.size();
  stats_.num_unmap_calls += static_cast<int64_t>(sorted.size());
}

void CachingAllocator::change_live(ExpandableSegment& seg, uintptr_t begin, size_t bytes, bool increase) {
  const uintptr_t end = begin + bytes;
  FreeEvent* freed_now = nullptr;  // one event for the pages this free empties, made for the first
  for (size_t i = seg.page_of(begin), last = seg.page_of(end - 1); i <= last; ++i) {
    const uintptr_t lo = std::max(begin, seg.address_of(i)), hi = std::min(end, seg.address_of(i) + seg.page);
    ExpandablePage& p = seg.pages[i];
    if (increase) {
      if (p.live == 0) {
        ++seg.used;
        KILN_INTERNAL_ASSERT(p.handle != 0, "a block in use on unmapped page {}", i);
        expandable_->free_pages.erase({p.freed, seg.id, i, &seg});
        drop_free_event(p);  // in use again on its own stream: stream order covers the old work
      }
      p.live += hi - lo;
    } else {
      p.live -= hi - lo;
      if (p.live == 0) {
        --seg.used;
        p.freed = use_tick_;
        expandable_->free_pages.insert({p.freed, seg.id, i, &seg});
        if (freed_now == nullptr) freed_now = new_free_event(seg.stream);
        p.free_event = freed_now;
        ++freed_now->pages;
      }
    }
  }
  if (increase) {
    seg.live += bytes;
  } else {
    seg.live -= bytes;
  }
}

bool CachingAllocator::touches_used_page(const Block* block) const {
  if (block == nullptr) return false;
  const ExpandableSegment& seg = *block->expandable;
  return seg.pages[seg.page_of(block->ptr)].live > 0 || seg.pages[seg.page_of(block->ptr + block->size - 1)].live > 0;
}

void CachingAllocator::adjust_inactive_split(const BlockPool& pool, int64_t blocks, int64_t bytes) {
  const auto idx = static_cast<StatPool>(pool_index(pool));
  if (blocks > 0) stats_.inactive_split.increase(idx, blocks);
  if (blocks < 0) stats_.inactive_split.decrease(idx, -blocks);
  if (bytes > 0) stats_.inactive_split_bytes.increase(idx, bytes);
  if (bytes < 0) stats_.inactive_split_bytes.decrease(idx, -bytes);
}

void CachingAllocator::finish_expandable_allocation(Block* block, size_t bytes, size_t size, StreamId stream) {
  BlockPool& pool = *block->pool;
  ExpandableSegment& seg = *block->expandable;
  pool.blocks.erase(block);
  const int64_t blocks_before = touches_used_page(block) ? 1 : 0;
  // The rest of the free block stays free: split whenever 512 bytes or more remain (as
  // PyTorch does with expandable segments; the rest costs no memory where it is unmapped).
  Block* rest = nullptr;
  if (block->size - size >= kMinBlockSize) {
    rest = make_block();
    rest->ptr = block->ptr + size;
    rest->size = block->size - size;
    rest->stream = block->stream;
    rest->pool = &pool;
    rest->expandable = &seg;
    rest->last_used = block->last_used;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    pool.blocks.insert(rest);
  }
  const size_t used_before = seg.used;
  change_live(seg, block->ptr, block->size, /*increase=*/true);
  const int64_t blocks_after = touches_used_page(rest) ? 1 : 0;
  const auto new_used = static_cast<int64_t>(seg.used - used_before);
  adjust_inactive_split(pool, blocks_after - blocks_before,
                        new_used * static_cast<int64_t>(seg.page) - static_cast<int64_t>(block->size));
  finish_allocation(block, bytes, stream);
}

void CachingAllocator::free_expandable_block(Block* block) {
  BlockPool& pool = *block->pool;
  ExpandableSegment& seg = *block->expandable;
  const auto idx = static_cast<StatPool>(pool_index(pool));
  record(TraceAction::FreeCompleted, block->ptr, block->size, block->stream);
  stats_.active.decrease(idx, 1);
  stats_.active_bytes.decrease(idx, static_cast<int64_t>(block->size));
  Block* prev = is_mergeable(block->prev) ? block->prev : nullptr;
  Block* next = is_mergeable(block->next) ? block->next : nullptr;
  const int64_t blocks_before = (touches_used_page(prev) ? 1 : 0) + (touches_used_page(next) ? 1 : 0);
  const uint64_t tick = ++use_tick_;
  const size_t used_before = seg.used;
  const size_t freed = block->size;
  change_live(seg, block->ptr, freed, /*increase=*/false);
  merge_free_block(block, prev, next, tick);
  Block* merged = prev != nullptr ? prev : block;
  const int64_t blocks_after = touches_used_page(merged) ? 1 : 0;
  const auto gone = static_cast<int64_t>(used_before - seg.used);
  adjust_inactive_split(pool, blocks_after - blocks_before,
                        static_cast<int64_t>(freed) - gone * static_cast<int64_t>(seg.page));
}

void CachingAllocator::release_expandable_cache(bool release_empty_segments) {
  std::vector<ExpandableSegment*> empty;
  for (auto& [id, seg] : expandable_->segments) {
    if (is_capturing(capturing_, seg->stream)) continue;
    std::vector<size_t> free_pages;
    for (size_t i = 0; i < seg->pages.size(); ++i)
      if (seg->pages[i].handle != 0 && seg->pages[i].live == 0 && wait_free_event(seg->pages[i].free_event))
        free_pages.push_back(i);
    if (!free_pages.empty()) unmap_pages(*seg, free_pages, nullptr);
    const Block* head = segments_.at(seg->base);
    // (A page whose event could not be waited for, during a capture, keeps its segment.)
    if (release_empty_segments && is_mergeable(head) && head->next == nullptr && seg->mapped == 0)
      empty.push_back(seg.get());
  }
  for (ExpandableSegment* seg : empty) release_expandable_segment(seg);
}

void CachingAllocator::unmap_lru_pages(int64_t bytes_over) {
  std::map<ExpandableSegment*, std::vector<size_t>> victims;
  int64_t found = 0;
  for (auto it = expandable_->free_pages.begin(); it != expandable_->free_pages.end() && found < bytes_over; ++it) {
    ExpandableSegment* seg = it->seg;
    if (is_capturing(capturing_, seg->stream) || !wait_free_event(seg->pages[it->index].free_event)) continue;
    victims[seg].push_back(it->index);
    found += static_cast<int64_t>(seg->page);
  }
  for (auto& [seg, indices] : victims) unmap_pages(*seg, indices, nullptr);
}

void CachingAllocator::release_expandable_segment(ExpandableSegment* seg) {
  KILN_INTERNAL_ASSERT(seg->mapped == 0 && seg->used == 0);
  Block* head = segments_.at(seg->base);
  head->pool->blocks.erase(head);
  segments_.erase(seg->base);
  source_->release_address_range(reinterpret_cast<void*>(seg->base), seg->size);
  stats_.segment.decrease(static_cast<StatPool>(pool_index(*seg->pool)), 1);
  recycle_block(head);
  expandable_->segments.erase(seg->id);
}

void CachingAllocator::destroy_expandable_segments() {
  for (auto& [id, seg] : expandable_->segments) {
    std::vector<size_t> mapped;
    for (size_t i = 0; i < seg->pages.size(); ++i) {
      if (seg->pages[i].handle == 0) continue;
      seg->pages[i].live = 0;  // blocks still allocated become invalid (see the destructor)
      mapped.push_back(i);
    }
    if (!mapped.empty()) {
      wait_for_stream(seg->stream);
      unmap_pages(*seg, mapped, nullptr);
    }
    for (Block* b = segments_.at(seg->base); b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
    segments_.erase(seg->base);
    source_->release_address_range(reinterpret_cast<void*>(seg->base), seg->size);
  }
  expandable_->segments.clear();
}

void CachingAllocator::snapshot_expandable(const ExpandableSegment& seg, SegmentInfo& info) const {
  info.is_expandable = true;
  info.page_size = seg.page;
  info.mapped_size = seg.mapped * seg.page;
  for (size_t i = 0; i < seg.pages.size(); ++i) {
    if (seg.pages[i].handle == 0) continue;
    if (!info.mapped_ranges.empty() &&
        info.mapped_ranges.back().address + info.mapped_ranges.back().size == seg.address_of(i)) {
      info.mapped_ranges.back().size += seg.page;
    } else {
      info.mapped_ranges.push_back({seg.address_of(i), seg.page});
    }
  }
}

}  // namespace kiln
