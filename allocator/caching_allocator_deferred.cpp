// The caching allocator's deferred merge: the latest freed block whose lower neighbour is
// in use waits, unmerged and outside its pool's free set, while its statistics already read
// as merged (free_block in caching_allocator.cpp decides and counts). Every other operation
// flushes it first, so nothing else ever sees the difference; the common eager pattern,
// "free a tensor, then allocate one of the same size on the same stream", then costs no
// free-set updates at all. tests/allocator/test_deferred_merge.cpp checks the equivalence
// against an allocator that merges at once.
#include <limits>

#include "caching_allocator_internal.h"

namespace kiln {

// Completes the deferred merge, with the upper neighbour as it was at the free.
void CachingAllocator::flush_deferred() {
  Block* block = deferred_;
  if (block == nullptr) return;
  deferred_ = nullptr;
  // The neighbour as it was at the free: the block being freed now (free_block flushes
  // first) may already look free, but was in use when this one was freed.
  merge_free_block(block, nullptr, deferred_next_, block->last_used);
}

// Hands the deferred block back exactly when allocate_block would have chosen the merged
// block and split it at the same place; otherwise returns null (allocate_block flushes).
CachingAllocator::Block* CachingAllocator::take_deferred(size_t bytes, StreamId stream) {
  Block* block = deferred_;
  if (block == nullptr || block->stream != stream || !pending_events_.empty() || !config_.caching || bytes == 0 ||
      bytes > std::numeric_limits<size_t>::max() - kRoundLarge)
    return nullptr;
  const size_t size = round_size(bytes);
  BlockPool& pool = pool_for(size, stream);
  if (size != block->size || &pool != block->pool) return nullptr;
  // The merged block the free would have made, and what allocate_block would do with it.
  Block* next = deferred_next_;
  const size_t merged_size = size + (next != nullptr ? next->size : 0);
  if (wastes_block(size, merged_size)) return nullptr;  // take_free_block would refuse it
  if (splits_rest(pool.is_small, size, merged_size - size) != (next != nullptr))
    return nullptr;  // it would split elsewhere, or keep the whole
  // Best fit: the merged block must be the smallest free block of this stream that fits.
  Block key;
  key.stream = stream;
  key.size = size;
  key.ptr = 0;
  auto it = pool.blocks.lower_bound(&key);
  if (it != pool.blocks.end() && *it == next) ++it;  // merged into the block, in the allocator's eyes
  if (it != pool.blocks.end() && (*it)->stream == stream) {
    const Block* other = *it;
    if (!(merged_size < other->size || (merged_size == other->size && block->ptr < other->ptr))) return nullptr;
  }
  deferred_ = nullptr;
  ++deferred_reuses_;
  // The statistics of taking the merged block and splitting the rest off again.
  const auto idx = static_cast<StatPool>(pool_index(pool));
  if (spans_split_segment(block, next != nullptr ? next : block)) {
    stats_.inactive_split.decrease(idx, 1);
    stats_.inactive_split_bytes.decrease(idx, static_cast<int64_t>(merged_size));
  }
  if (next != nullptr) {
    stats_.inactive_split.increase(idx, 1);
    stats_.inactive_split_bytes.increase(idx, static_cast<int64_t>(next->size));
    next->last_used = block->last_used;  // the split-off rest inherits the merged block's tick
  }
  finish_allocation(block, bytes, stream);
  return block;
}

}  // namespace kiln
