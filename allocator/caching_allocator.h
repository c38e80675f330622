// CachingAllocator: the device-agnostic core of Kiln's memory management, modelled on the
// behaviour PyTorch users know from its CUDA caching allocator.
//
// Requests are rounded up to 512 bytes. Requests up to 1 MiB come from the small pool,
// carved out of 2 MiB segments; larger ones from the large pool, whose segments are 20 MiB
// for requests below 10 MiB and the request rounded up to 2 MiB otherwise. A request takes
// the smallest cached block of its stream that fits (best fit, ties by address); the rest
// of the block is split off when it is big enough to be useful (small pool: >= 512 B; large
// pool: > 1 MiB, and only for requests below max_split_size). Freed blocks merge with free
// neighbours of their segment. A block freed after record_stream() waits for events on the
// streams that used it before it can be reused. When the device is out of memory, every
// cached whole segment is released and the allocation retried once; after that the request
// fails with an OutOfMemoryError that explains where the memory is.
//
// With expandable segments (AllocatorConfig::expandable_segments, over a source with
// virtual memory) the default pools take their memory differently: each (pool, stream) has
// a segment that is an address range as large as the device, whose blocks tile all of it,
// with physical pages mapped only under blocks in use. Free space anywhere in it merges with
// its neighbours, so fragmentation strands no memory. When a request needs pages that are not
// mapped, the allocator first moves pages that hold no live byte from elsewhere (unmap there,
// map here: no new device memory), and creates pages only for the rest; so the memory mapped
// stays close to the pages live blocks touch. Unmapping is not stream-ordered, so a page moves
// only once an event recorded when it was freed has completed: the host never waits for the
// GPU in the steady state (a page still in use by queued work is left, and a new one created),
// only when the device is full. Cached pages stay mapped until they are needed elsewhere,
// empty_cache(), garbage collection or an out-of-memory retry unmaps them. Private pools keep
// classic segments. See caching_allocator_expandable.cpp.
//
// Thread-safe: one mutex guards all state. The segment source (host memory or CUDA) is the
// only thing that talks to a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "../core/device.h"
#include "allocator_config.h"
#include "data_ptr.h"
#include "memory_snapshot.h"
#include "node_free_list.h"
#include "segment_source.h"

namespace kiln {

/// Identifies a private memory pool (0 means the default pools).
using MemPoolId = uint64_t;

/// A caching allocator over one SegmentSource; see the file comment.
class CachingAllocator {
 public:
  static constexpr size_t kMinBlockSize = 512;              ///< every size is a multiple of this
  static constexpr size_t kSmallSize = 1 << 20;             ///< largest small-pool request (1 MiB)
  static constexpr size_t kSmallBuffer = 2 << 20;           ///< small-pool segment size (2 MiB)
  static constexpr size_t kLargeBuffer = 20 << 20;          ///< large-pool segment for requests < 10 MiB
  static constexpr size_t kMinLargeAlloc = 10 << 20;        ///< from here, segments fit the request
  static constexpr size_t kRoundLarge = 2 << 20;            ///< ... rounded up to 2 MiB

  explicit CachingAllocator(std::unique_ptr<SegmentSource> source, AllocatorConfig config = {});
  /// Releases every segment. Blocks still allocated become invalid: free them first.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// Returns `bytes` of memory for use on `stream` (nullptr for 0 bytes). Throws
  /// OutOfMemoryError, whose message starts with `op`, when the device cannot provide it.
  void* allocate(size_t bytes, StreamId stream = 0, const char* op = "allocate");
  /// allocate() wrapped in a DataPtr that frees the block when it dies.
  DataPtr allocate_data(size_t bytes, StreamId stream = 0, const char* op = "allocate");
  /// Returns a block from allocate() to the cache (after pending stream uses, if any).
  void free(void* ptr);
  /// Marks the block at `ptr` as used by `stream`: when freed, it is reused only after the
  /// work queued on `stream` by then has completed.
  void record_stream(void* ptr, StreamId stream);
  /// Waits for pending stream events, then releases every cached whole segment.
  void empty_cache();

  /// A copy of the statistics.
  MemoryStats stats() const;
  /// Sets every peak to its current value.
  void reset_peak_stats();
  /// Zeroes the accumulated totals (allocated / freed) and the event counters.
  void reset_accumulated_stats();
  /// Every segment and block, and the history when it is recorded.
  MemorySnapshot snapshot() const;
  /// Starts (enabled) or stops recording the allocation history, keeping the newest
  /// `max_entries` events.
  void record_history(bool enabled, size_t max_entries = 100000);

  /// Creates a private pool (for CUDA Graph capture): see begin_allocate_to_pool.
  MemPoolId create_pool();
  /// From now on, allocations on `stream` come from pool `id`, and their blocks return to
  /// it when freed.
  void begin_allocate_to_pool(MemPoolId id, StreamId stream);
  /// Stops routing allocations to pool `id` (its blocks stay in it).
  void end_allocate_to_pool(MemPoolId id);
  /// Gives the pool up: its cached segments are released now, the rest as their blocks are
  /// freed; then the pool disappears.
  void release_pool(MemPoolId id);

  /// Allocations served by taking back the latest freed block before its deferred merge (a
  /// diagnostic: the results are those of merging at once, see flush_deferred).
  uint64_t deferred_reuses() const;
  /// The device this allocator serves, for the memory observer (memory_observer.h); an
  /// allocator without one (a test double) reports nothing.
  void set_device(Device device) { device_ = device; }
  /// The configuration in force.
  const AllocatorConfig& config() const { return config_; }
  /// The segment source (for tests that drive events or capacity).
  SegmentSource& source() { return *source_; }

 private:
  struct Block;
  struct BlockPool;
  struct PrivatePool;
  struct ExpandableSegment;
  struct ExpandablePage;
  struct FreeEvent;  // what a free page waits for before it may be unmapped
  struct FreePage;
  struct Expandable;  // every expandable segment and the free pages in them
  struct PendingEvent {
    EventId event;
    Block* block;
  };
  // Orders free blocks by (stream, size, address): lower_bound finds the best fit.
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };

  size_t round_size(size_t bytes) const;
  Block* allocate_block(size_t bytes, StreamId stream, const char* op);  // mutex held
  void finish_allocation(Block* block, size_t bytes, StreamId stream);   // mutex held
  Block* take_deferred(size_t bytes, StreamId stream);                   // mutex held
  void flush_deferred();                                                  // mutex held
  static bool is_mergeable(const Block* block);
  void merge_free_block(Block* block, Block* prev, Block* next, uint64_t tick);
  void notify_observer(int64_t bytes) const;  // the memory observer, if any
  void release_block(Block* block);                                      // mutex held
  Block* find_live_block(uintptr_t address) const;                      // mutex held
  static void free_data_block(void* context, void* data);               // a DataPtr's deleter
  static size_t segment_size_for(size_t size);
  BlockPool& pool_for(size_t size, StreamId stream);
  Block* take_free_block(BlockPool& pool, StreamId stream, size_t size);
  Block* new_segment(BlockPool& pool, StreamId stream, size_t segment_size);
  bool wastes_block(size_t size, size_t block_size) const;  // take_free_block's oversize rules
  bool splits_rest(bool small_pool, size_t size, size_t remaining) const;
  bool should_split(const Block* block, size_t size) const;
  static bool spans_split_segment(const Block* first, const Block* last);  // blocks first..last
  Block* split(Block* block, size_t size);
  void free_block(Block* block);
  void merge_into(Block* dst, Block* src);
  void insert_events(Block* block);
  void process_events();
  void synchronize_pending_events();
  void release_segment(Block* block);
  void release_whole_segments(BlockPool& pool);
  void release_cached_blocks();
  void garbage_collect(size_t about_to_allocate);
  bool is_whole_segment(const Block* block) const;
  Block* make_block();
  void recycle_block(Block* block);
  void record(TraceAction action, uint64_t address, uint64_t size, StreamId stream);
  [[noreturn]] void throw_oom(const char* op, size_t bytes, size_t size, StreamId stream);
  static int pool_index(const BlockPool& pool);

  // Expandable segments (caching_allocator_expandable.cpp); mutex held.
  Block* allocate_expandable(BlockPool& pool, size_t bytes, size_t size, StreamId stream, const char* op);
  Block* find_expandable_block(BlockPool& pool, StreamId stream, size_t size);
  Block* new_expandable_segment(BlockPool& pool, StreamId stream, size_t size);
  bool map_block_pages(Block* block, size_t size);
  size_t steal_pages(const ExpandableSegment& target, size_t first, size_t last, size_t wanted, bool wait,
                     std::vector<PageHandle>& out);
  void map_run(ExpandableSegment& seg, size_t first, const PageHandle* pages, size_t count);
  void unmap_pages(ExpandableSegment& seg, const std::vector<size_t>& pages, std::vector<PageHandle>* keep);
  FreeEvent* new_free_event(StreamId stream);
  void drop_free_event(ExpandablePage& page);
  bool free_event_completed(FreeEvent* event);  // never blocks
  bool wait_free_event(FreeEvent* event);       // blocks if pending; false during a capture
  void wait_for_stream(StreamId stream);
  void change_live(ExpandableSegment& seg, uintptr_t begin, size_t bytes, bool increase);
  bool touches_used_page(const Block* block) const;
  void adjust_inactive_split(const BlockPool& pool, int64_t blocks, int64_t bytes);
  void finish_expandable_allocation(Block* block, size_t bytes, size_t size, StreamId stream);
  void free_expandable_block(Block* block);
  void release_expandable_cache(bool release_empty_segments);
  void unmap_lru_pages(int64_t bytes_over);
  void release_expandable_segment(ExpandableSegment* seg);
  void destroy_expandable_segments();
  void snapshot_expandable(const ExpandableSegment& seg, SegmentInfo& info) const;

  std::unique_ptr<SegmentSource> source_;
  AllocatorConfig config_;
  mutable std::mutex mutex_;

  // Node storage for the containers below: freed nodes are reused, so a cached
  // allocate/free pair touches no general-purpose heap.
  NodeFreeList node_memory_;
  std::unique_ptr<BlockPool> small_pool_;
  std::unique_ptr<BlockPool> large_pool_;
  std::pmr::unordered_map<uintptr_t, Block*> allocated_;  // blocks of raw allocate() calls
  std::map<uintptr_t, Block*> segments_;  // segment base -> its first block
  std::vector<PendingEvent> pending_events_;
  std::vector<Block*> spare_blocks_;
  Block* deferred_ = nullptr;       // a freed block whose merge is deferred (flush_deferred)
  Block* deferred_next_ = nullptr;  // its free upper neighbour at the time, if any
  uint64_t deferred_reuses_ = 0;
  std::optional<Device> device_;  // reported to the memory observer

  std::map<MemPoolId, std::unique_ptr<PrivatePool>> private_pools_;
  std::vector<std::pair<StreamId, PrivatePool*>> capturing_;
  MemPoolId next_pool_id_ = 1;

  std::unique_ptr<Expandable> expandable_;  // null unless the config and the source allow them

  MemoryStats stats_;
  MemoryStats stats_snapshot() const;  // stats_ with max_split_size filled in (mutex held)
  uint64_t use_tick_ = 0;
  size_t device_total_ = 0;  // the device's total memory, asked once (garbage collection)

  bool history_enabled_ = false;
  size_t history_capacity_ = 0;
  std::vector<TraceEntry> history_;  // ring buffer of history_capacity_ entries
  size_t history_next_ = 0;          // next slot to overwrite once full
};

}  // namespace kiln
