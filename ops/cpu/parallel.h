// Splitting CPU kernel work over the OpenMP threads. Work is an index range cut into one
// contiguous chunk per thread (static schedule), and only above a size threshold: below it
// the fork/join costs more than it saves. The chunk boundaries depend on the thread count,
// so a kernel that uses this must compute each index the same way whatever chunk holds it
// (elementwise maps do; row kernels give each row to one thread and reduce it in a fixed
// order), which keeps results bitwise identical for any thread count.
//
// Nothing inside a chunk may throw: an exception cannot leave an OpenMP region.
#pragma once

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kiln::cpu {

// The grains rest on `bench/cpu_elementwise --only grain` (2-core Xeon, quiet): an OpenMP
// fork/join costs about 0.7-0.8 us, add about 0.13 ns and gelu about 1-2 ns per element on
// one thread, so two threads break even from about 11-13K elements of add and 0.6-1.6K of
// gelu. The grains sit well above that (a chunk is at least one grain), leaving room for the
// costlier fork/join of many-core hosts and loaded machines: on the GPU machine's 16-vCPU
// host, a Fashion-MNIST epoch on 16 threads took 5.5 s against 0.69 s on 8, every parallel
// op of its step (a 256 x 256 GELU then made 16 chunks of 4K) waiting milliseconds for its
// last thread, so the transcendental grain went from 4K to 16K elements (PyTorch's is 32K
// for every op).

/// Elements per chunk, at least, of a cheap elementwise op (add, copy: memory bound).
inline constexpr int64_t kGrainCheap = int64_t{1} << 15;

/// Elements per chunk, at least, of a transcendental elementwise op (exp, tanh, GELU).
inline constexpr int64_t kGrainTranscendental = int64_t{1} << 14;

/// The number of chunks `work` units are cut into: one per OpenMP thread, at most
/// work / grain (so each chunk has at least `grain` units), and 1 inside a parallel region.
inline int64_t parallel_chunks(int64_t work, int64_t grain) {
#ifdef _OPENMP
  if (work < 2 * grain || omp_in_parallel()) return 1;
  return std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), work / std::max<int64_t>(grain, 1)));
#else
  (void)work;
  (void)grain;
  return 1;
#endif
}

/// Calls `fn(begin, end)` on disjoint contiguous ranges covering [0, total), one range per
/// chunk (parallel_chunks(total, grain)), the chunks on a region of all the OpenMP threads
/// (at most one chunk each; one chunk runs on the calling thread, no region). Range boundaries
/// are multiples of `align` (but the last), e.g. a cache line of outputs, so no two threads
/// write one line.
template <typename F>
void parallel_for(int64_t total, int64_t grain, F&& fn, int64_t align = 16) {
  if (total <= 0) return;
  const int64_t chunks = parallel_chunks(total, grain);
  if (chunks <= 1) {
    fn(int64_t{0}, total);
    return;
  }
  // Chunk size rounded up to a multiple of align; trailing chunks may be short or empty.
  const int64_t per = (total + chunks - 1) / chunks;
  const int64_t step = (per + align - 1) / align * align;
  // The region has the whole team even when there are fewer chunks than threads (the extra
  // ones only arrive at the closing barrier): libgomp lets the threads beyond a smaller team
  // exit and creates new ones for the next larger team, which cost 1.4 ms per pair of regions
  // on the GPU machine's 16-core host (a region of 4 threads, then one of 16) against 4.5 us
  // for two of 16; a team that shrank with the work made the 16-thread Fashion-MNIST epoch
  // four times PyTorch's (BENCHMARKS.md 9, third session).
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = std::min(total, c * step);
    const int64_t end = std::min(total, begin + step);
    if (begin < end) fn(begin, end);
  }
}

}  // namespace kiln::cpu
