// The epilogue of the sm_90a linear+GELU kernel. Since v14 the bias is the accumulators'
// starting value (init_bias, before the tile's first wgmma, which then accumulates onto it):
// loaded a tile ahead, one column pair per thread, shared as floats through shared memory (32
// registers held across the mainloop made the consumers spill); the benchmark harness can still
// add it after the mainloop instead (add_bias, v3-v13). Then the optional pre-activation
// is stored; the exact GELU is applied in place (a plain unrolled loop over registers, nothing
// to keep the scheduler from overlapping the evaluations); the result is stored. Each element
// is stored once, two ways:
//   - staged (16-bit outputs whose base and row stride suit TMA): the warpgroup writes a
//     column chunk of its tile, converted, into a 128B-swizzled shared-memory buffer with
//     stmatrix (conflict-free: the swizzle spreads the 8 rows of each 8x8 matrix over all
//     banks), and one thread hands it to TMA stores, which clip rows and columns outside
//     [M, N] and run while the warpgroup goes on; a chunk reuses the buffer once the previous
//     stores have read it (a buffer of half a tile leaves room for one more pipeline stage);
//   - direct (TF32's float output, or unaligned outputs): each thread stores its accumulator
//     pairs straight to global memory, bounds-checked.
// gelu_in_place is the benchmark-only v4 variant's worker loop (the GELU offloaded to the
// producer warpgroup's spare warps, measured slower: docs/notes/sm90_linear_gelu.md);
// gelu_vectors is their unit of work, and that of v5's interleaved variant (the consumers apply
// the GELU to the previous tile's staged pre-activation between the wgmma of the next tile).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "gelu_fast.cuh"
#include "sm90_ptx.cuh"

namespace kiln::cuda_kernels::sm90 {

/// The run-time part of one launch (the tensor maps travel as their own parameters).
struct KernelParams {
  const void* bias = nullptr;  ///< [n] or null
  void* out = nullptr;         ///< [m, n], row stride ldo
  void* pre = nullptr;         ///< [m, n], row stride ldp, or null
  int64_t ldo = 0, ldp = 0;
  int32_t m = 0, n = 0;
  int32_t k_blocks = 0;   ///< ceil(k / kBlockK)
  int32_t units_m = 0;    ///< ceil(m tiles / kCluster): a unit is one cluster's tiles
  int32_t units_n = 0;    ///< n tiles
  int32_t group_m = 1;    ///< units of m per raster group
  uint32_t pair_out = 0;  ///< direct stores: out may be stored two elements at a time
  uint32_t pair_pre = 0;  ///< likewise pre
  uint32_t staged = 0;    ///< out (and pre) go through shared memory and TMA stores
  /// TileConfig::kHandoffLast configurations: the CTA's last tile shares its epilogue with the
  /// other consumer (v10); 0 keeps it with its owner (the harness compares both).
  uint32_t handoff_last = 0;
#if defined(KILN_SM90_BENCH_HOOKS)
  /// Benchmark only: 1 skips the GELU, 2 the whole epilogue, 3 a tanh GELU (v7); 4 skips the
  /// stores (bias and GELU computed), 5 the GELU and the stores (bias only).
  int32_t bench_skip = 0;
  /// Benchmark only: when set, per CTA kTimingSlots clock64/globaltimer counters (the kernel's
  /// in-kernel profile: mainloop, epilogue and turn-wait cycles per consumer).
  unsigned long long* bench_timing = nullptr;
  /// Benchmark only (v11): per CTA kTailSlots clock64 stamps inside the last tile's epilogue
  /// (owner and receiver of the v10 handoff), or null.
  unsigned long long* bench_tail = nullptr;
#endif
};

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }

/// The exact GELU as the unfused path computes it for T: the shared fit for 16-bit results
/// (F: which, gelu_fast.cuh), erff for float32.
template <typename T, GeluFit F = GeluFit::Shipped>
__device__ __forceinline__ float gelu_exact(float x) {
  if constexpr (sizeof(T) == 2) return gelu_fast<T, F>(x);
  else return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
}

/// (a, b) rounded to the 16-bit type T and packed, a in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack_two(float a, float b) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

/// Stores (a, b) at p[0], p[1]: one vector store when `pair`, else p[0] and, when `second`, p[1].
template <typename T>
__device__ __forceinline__ void store_two(T* p, float a, float b, bool pair, bool second) {
  if (pair) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
    else if constexpr (std::is_same_v<T, __half>) *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
    else *reinterpret_cast<float2*>(p) = make_float2(a, b);
    return;
  }
  p[0] = static_cast<T>(a);
  if (second) p[1] = static_cast<T>(b);
}

/// This thread's bias for two adjacent columns, as loaded before the mainloop: the raw bits
/// of two 16-bit values, or two floats.
template <typename T>
using BiasPair = std::conditional_t<sizeof(T) == 2, uint32_t, float2>;

/// The bias at columns col and col + 1 (0 past n or without bias).
template <typename T>
__device__ __forceinline__ BiasPair<T> load_bias_pair(const T* bias, int col, int n) {
  if constexpr (sizeof(T) == 2) {
    const auto* bits = reinterpret_cast<const unsigned short*>(bias);
    const uint32_t lo = (bias != nullptr && col < n) ? __ldg(bits + col) : 0u;
    const uint32_t hi = (bias != nullptr && col + 1 < n) ? __ldg(bits + col + 1) : 0u;
    return lo | (hi << 16);
  } else {
    return make_float2((bias != nullptr && col < n) ? __ldg(bias + col) : 0.0f,
                       (bias != nullptr && col + 1 < n) ? __ldg(bias + col + 1) : 0.0f);
  }
}

/// A BiasPair as two floats.
template <typename T>
__device__ __forceinline__ float2 unpack_bias(BiasPair<T> b) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&b));
  } else if constexpr (std::is_same_v<T, __half>) {
    return __half22float2(*reinterpret_cast<const __half2*>(&b));
  } else {
    return b;
  }
}

#if defined(KILN_SM90A_DEVICE)

/// A bias pair as kept in shared memory: already two floats (Slot = float2), or as loaded.
template <typename T, typename Slot>
__device__ __forceinline__ float2 bias_floats(Slot b) {
  if constexpr (std::is_same_v<Slot, float2>) return b;
  else return unpack_bias<T>(b);
}

/// acc = bias (v14, before the tile's first wgmma): the thread's columns 8j + 2 quad + {0, 1}
/// (quad = lane % 4) in both row halves of each atom, from the tile's bias pairs in shared
/// memory (pair i: columns 2i, 2i + 1), as floats or as loaded (bias_floats).
template <class Cfg, typename Slot>
__device__ __forceinline__ void init_bias(float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2],
                                          const Slot (&bias)[Cfg::kBlockN / 2], int quad) {
#pragma unroll
  for (int j = 0; j < Cfg::kBlockN / 8; ++j) {
    const float2 b = bias_floats<typename Cfg::Element>(bias[4 * j + quad]);
#pragma unroll
    for (int mi = 0; mi < Cfg::kMAtoms; ++mi) {
      acc[mi][4 * j] = b.x;
      acc[mi][4 * j + 1] = b.y;
      acc[mi][4 * j + 2] = b.x;
      acc[mi][4 * j + 3] = b.y;
    }
  }
}

/// v14, before the tile's first wgmma: this thread's bias pair (loaded a tile ahead) into the
/// warpgroup's shared copy (as floats when Slot is float2), then the accumulators from it. Every
/// thread is past the previous tile's reads (first barrier), then the copy is complete (second);
/// the fences keep the moves before the first wgmma.fence (as CUTLASS's warpgroup_fence_operand).
template <class Cfg, typename Slot>
__device__ __forceinline__ void start_from_bias(float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2],
                                                Slot (&copy)[Cfg::kBlockN / 2],
                                                BiasPair<typename Cfg::Element> pair, uint32_t barrier, int thread,
                                                int quad) {
  named_barrier_sync(barrier, 128);
  if (thread < Cfg::kBlockN / 2) {
    if constexpr (std::is_same_v<Slot, float2>) copy[thread] = unpack_bias<typename Cfg::Element>(pair);
    else copy[thread] = pair;
  }
  named_barrier_sync(barrier, 128);
  init_bias<Cfg>(acc, copy, quad);
#pragma unroll
  for (int mi = 0; mi < Cfg::kMAtoms; ++mi)
#pragma unroll
    for (int i = 0; i < Cfg::kBlockN / 2; ++i) fence_operand(acc[mi][i]);
}

/// acc += bias (v3-v13; the harness's bias_late): the thread's columns 8j + 2 quad + {0, 1} (quad = lane % 4) in both row halves
/// of each atom, from the tile's bias pairs in shared memory (pair i: columns 2i, 2i + 1).
template <class Cfg>
__device__ __forceinline__ void add_bias(float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2],
                                         const BiasPair<typename Cfg::Element> (&bias)[Cfg::kBlockN / 2], int quad) {
#pragma unroll
  for (int j = 0; j < Cfg::kBlockN / 8; ++j) {
    const float2 b = unpack_bias<typename Cfg::Element>(bias[4 * j + quad]);
#pragma unroll
    for (int mi = 0; mi < Cfg::kMAtoms; ++mi) {
      acc[mi][4 * j] += b.x;
      acc[mi][4 * j + 1] += b.y;
      acc[mi][4 * j + 2] += b.x;
      acc[mi][4 * j + 3] += b.y;
    }
  }
}

/// acc = GELU(acc), in place, on the thread's values [First, Last) of each atom (value i sits in
/// column 8 (i / 4) + 2 quad + i % 2: values [c0 / 2, c1 / 2) are the tile's columns [c0, c1)
/// for multiples of 8); by default all of them.
template <class Cfg, int First = 0, int Last = Cfg::kBlockN / 2>
__device__ __forceinline__ void apply_gelu(float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2]) {
#pragma unroll
  for (int mi = 0; mi < Cfg::kMAtoms; ++mi)
#pragma unroll
    for (int i = First; i < Last; ++i) acc[mi][i] = gelu_exact<typename Cfg::Element, Cfg::kGeluFit>(acc[mi][i]);
}

/// Benchmark only (v7, bench_skip 3): the tanh approximation of GELU, 6 instructions (one MUFU)
/// per element against gelu_fast's 15 before v8, 11 in v9 and 9 since v13 (two MUFU), to measure what each
/// epilogue instruction costs the other consumer's mainloop. Not the exact GELU: never in the
/// library.
template <class Cfg, int First, int Last>
__device__ __forceinline__ void apply_gelu_tanh(float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2]) {
#pragma unroll
  for (int mi = 0; mi < Cfg::kMAtoms; ++mi)
#pragma unroll
    for (int i = First; i < Last; ++i) {
      const float x = acc[mi][i];
      float t;
      const float u = x * fmaf(0.0356774081f, x * x, 0.7978845608f);
      asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
      const float h = 0.5f * x;
      acc[mi][i] = fmaf(h, t, h);
    }
}

/// Benchmark only (bench_skip 4 and 5): the values of columns [First, Last) count as used, with
/// no instruction and no store, so that an epilogue can be timed without its stores.
template <class Cfg, int First, int Last>
__device__ __forceinline__ void keep_values(const float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2]) {
#pragma unroll
  for (int mi = 0; mi < Cfg::kMAtoms; ++mi)
#pragma unroll
    for (int i = First; i < Last; ++i) asm volatile("" : : "f"(acc[mi][i]));
}

/// Direct store of the tile's values in acc to `base` (row stride ld): thread (warp, lane)
/// holds rows row0 + mi*64 + {0, 8} and columns col0 + 8j + {0, 1} (the wgmma layout).
template <class Cfg>
__device__ __forceinline__ void store_tile_direct(const float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2],
                                                  typename Cfg::Element* base, int64_t ld, bool pair, int row0,
                                                  int col0, int m, int n) {
#pragma unroll
  for (int j = 0; j < Cfg::kBlockN / 8; ++j) {
    const int col = col0 + j * 8;
    const bool first_in = col < n, second_in = col + 1 < n;
#pragma unroll
    for (int mi = 0; mi < Cfg::kMAtoms; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + mi * 64 + h * 8;
        if (row >= m || !first_in) continue;
        store_two(base + static_cast<int64_t>(row) * ld + col, acc[mi][j * 4 + h * 2], acc[mi][j * 4 + h * 2 + 1],
                  pair && second_in, second_in);
      }
    }
  }
}

/// Writes columns [16 first_pair, 16 (first_pair + pairs)) of the tile's values in acc,
/// converted to the 16-bit T, into a staging buffer (blocks of kConsumerRows x 128 bytes, one
/// per 64 columns counted from column 16 first_pair, 128B-swizzled as TMA expects) with
/// stmatrix. No synchronisation.
template <class Cfg>
__device__ __forceinline__ void stmatrix_columns(const float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2], uint32_t staging,
                                                 int thread, int first_pair, int pairs) {
  using T = typename Cfg::Element;
  constexpr int kBlockBytes = Cfg::kConsumerRows * 128;  // one 64-column block
  const int warp = thread / 32, lane = thread % 32;
  // This lane's stmatrix row: matrix g = lane / 8 is (row half g & 1, column chunk g >> 1). The
  // 16-byte chunk 2q + (g >> 1) of row r sits at chunk (2q + (g >> 1)) ^ (r & 7) of the
  // swizzled row, = (2q % 8) ^ flip with flip = (g >> 1) ^ (r & 7) (2q is even): one XOR with
  // a constant per stmatrix, two registers kept (row address and flip).
  const int g = lane / 8;
  const int row_in_atom = warp * 16 + 8 * (g & 1) + lane % 8;
  const uint32_t row_address = staging + row_in_atom * 128;
  const uint32_t flip = static_cast<uint32_t>(((g >> 1) ^ (row_in_atom & 7)) << 4);
#pragma unroll
  for (int q = 0; q < pairs; ++q) {
    const int jp = first_pair + q;  // 16-column group in the tile
#pragma unroll
    for (int mi = 0; mi < Cfg::kMAtoms; ++mi) {
      const float* a = &acc[mi][8 * jp];
      // Block (q / 4) of 64 columns, atom mi 64 rows down (r & 7 unchanged), swizzled chunk.
      const uint32_t address =
          row_address + ((q / 4) * kBlockBytes + mi * 64 * 128) + ((static_cast<uint32_t>((2 * q) % 8) << 4) ^ flip);
      stmatrix_x4(address, pack_two<T>(a[0], a[1]), pack_two<T>(a[2], a[3]), pack_two<T>(a[4], a[5]),
                  pack_two<T>(a[6], a[7]));
    }
  }
}

/// Staged store (16-bit T) of chunk `chunk` (columns [chunk kStageCols, (chunk + 1) kStageCols)
/// of the tile) of the values in acc: rows [m0, m0 + kConsumerRows) of the matrix behind `map`,
/// through the warpgroup's buffer `staging` (reused once the previous stores have read it) and
/// TMA stores issued by the warpgroup's thread 0. `barrier` is the warpgroup's named barrier.
template <class Cfg>
__device__ __forceinline__ void store_chunk_staged(const float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2],
                                                   const CUtensorMap* map, uint32_t staging, uint32_t barrier,
                                                   int thread, int m0, int n0, int chunk) {
  static_assert(sizeof(typename Cfg::Element) == 2, "store_chunk_staged: 16-bit outputs only");
  constexpr int kBlockBytes = Cfg::kConsumerRows * 128;
  constexpr int kChunkPairs = Cfg::kStageCols / 16;  // 16-column groups per chunk
  if (thread == 0) bulk_wait_group_read();  // the previous stores have read the buffer
  named_barrier_sync(barrier, 128);
  stmatrix_columns<Cfg>(acc, staging, thread, chunk * kChunkPairs, kChunkPairs);
  fence_proxy_async_shared();
  named_barrier_sync(barrier, 128);
  if (thread == 0) {
#pragma unroll
    for (int cb = 0; cb < Cfg::kStageCols / 64; ++cb)
      tma_store_2d(map, staging + cb * kBlockBytes, n0 + chunk * Cfg::kStageCols + 64 * cb, m0);
    bulk_commit_group();
  }
}

/// Staged store (16-bit T) of the tile's values in acc, every chunk in turn (store_chunk_staged).
template <class Cfg>
__device__ __forceinline__ void store_tile_staged(const float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2],
                                                  const CUtensorMap* map, uint32_t staging, uint32_t barrier,
                                                  int thread, int m0, int n0) {
#pragma unroll
  for (int chunk = 0; chunk < Cfg::kBlockN / Cfg::kStageCols; ++chunk)
    store_chunk_staged<Cfg>(acc, map, staging, barrier, thread, m0, n0, chunk);
}

/// N 16-byte vectors of the 16-bit T in shared memory, at `address` + r `stride` (r < N), replaced
/// by their GELU: all N loaded first, then 8 N independent evaluations, then the N stores (the
/// shared-memory accesses are volatile asm, which the compiler keeps in order, so one vector at a
/// time would leave only 8 evaluations in flight: too few for one warp per scheduler).
template <typename T, GeluFit F, int N>
__device__ __forceinline__ void gelu_vectors(uint32_t address, int stride) {
  uint4 v[N];
#pragma unroll
  for (int r = 0; r < N; ++r) v[r] = ld_shared_v4(address + r * stride);
#pragma unroll
  for (int r = 0; r < N; ++r) {
    uint32_t* w = reinterpret_cast<uint32_t*>(&v[r]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float2 f;
      if constexpr (std::is_same_v<T, __nv_bfloat16>)
        f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[e]));
      else
        f = __half22float2(*reinterpret_cast<const __half2*>(&w[e]));
      w[e] = pack_two<T>(gelu_exact<T, F>(f.x), gelu_exact<T, F>(f.y));
    }
  }
#pragma unroll
  for (int r = 0; r < N; ++r) st_shared_v4(address + r * stride, v[r]);
}

/// The offloaded epilogue's work on one staged tile (16-bit T): `threads` threads (index
/// `worker`) replace every value of the `bytes`-byte buffer by its GELU, 16 bytes at a time
/// (the layout does not matter for an elementwise map), four vectors per thread in flight.
template <typename T>
__device__ __forceinline__ void gelu_in_place(uint32_t buffer, int bytes, int worker, int threads) {
  constexpr int kBatch = 4;
  const int stride = threads * 16;
  int offset = worker * 16;
  for (; offset + (kBatch - 1) * stride < bytes; offset += kBatch * stride)
    gelu_vectors<T, GeluFit::Nr9, kBatch>(buffer + offset, stride);
  for (; offset < bytes; offset += stride) gelu_vectors<T, GeluFit::Nr9, 1>(buffer + offset, stride);
}

/// Direct store (16-bit T, v7) of one staged chunk: the warpgroup's buffer holds rows
/// [m0, m0 + kConsumerRows) x columns [c0, c0 + kStageCols) of the matrix at `base` (row stride
/// ld, 16-byte aligned base and row stride), 128B-swizzled as stmatrix_columns writes it; thread
/// t moves its vectors t + 128 i (row (t + 128 i) / 8, 16-byte column block (t + 128 i) % 8):
/// a warp covers four whole 128-byte row segments, one st.global.v4 each lane. Rows past m and
/// columns past n are not written (a block straddling n goes element by element).
template <class Cfg>
__device__ __forceinline__ void store_chunk_vectors(uint32_t staging, typename Cfg::Element* base, int64_t ld,
                                                    int thread, int m0, int c0, int m, int n) {
  using T = typename Cfg::Element;
  constexpr int kVectors = Cfg::kConsumerRows * Cfg::kStageCols / 8;  // 16-byte vectors per chunk
  static_assert(Cfg::kStageCols == 64 && kVectors % 128 == 0, "store_chunk_vectors: 64-column chunks");
#pragma unroll
  for (int i = 0; i < kVectors / 128; ++i) {
    const int v = thread + 128 * i;
    const int row = v / 8, block = v % 8;
    const uint4 value = ld_shared_v4(staging + row * 128 + ((block ^ (row & 7)) << 4));
    const int grow = m0 + row, col = c0 + 8 * block;
    if (grow >= m || col >= n) continue;
    T* dst = base + static_cast<int64_t>(grow) * ld + col;
    if (col + 8 <= n) {
      *reinterpret_cast<uint4*>(dst) = value;
    } else {
      const uint32_t words[4] = {value.x, value.y, value.z, value.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) {  // constant indices: the vector stays in registers
        if (col + j >= n) break;
        const unsigned short bits = static_cast<unsigned short>(words[j / 2] >> (16 * (j % 2)));
        *reinterpret_cast<unsigned short*>(dst + j) = bits;
      }
    }
  }
}

/// GELU (16-bit T, v7) in place over the thread's vectors t + 128 i of a staged 64-column chunk
/// (the same vectors store_chunk_vectors moves for it, so no barrier sits between the two): the
/// bias-added pre-activation, already rounded to T, as the unfused linear then GELU computes it.
/// One copy serves every chunk: the kernel's chunk loop around it is rolled.
template <class Cfg>
__device__ __forceinline__ void gelu_chunk_vectors(uint32_t staging, int thread) {
  constexpr int kVectors = Cfg::kConsumerRows * Cfg::kStageCols / 8;
  static_assert(kVectors / 128 == 4, "gelu_chunk_vectors: four vectors per thread");
  const int row0 = thread / 8, block = thread % 8;
  // Vector i sits at row row0 + 16 i: same swizzle phase (16 i is a multiple of 8).
  gelu_vectors<typename Cfg::Element, Cfg::kGeluFit, 4>(staging + row0 * 128 + ((block ^ (row0 & 7)) << 4),
                                                           16 * 128);
}

/// Direct store (v7) of chunk C of the tile's values in acc: the previous chunk's vectors have
/// been read out by their owners (first barrier), the chunk is written with stmatrix, complete
/// (second barrier), then each thread stores its vectors (store_chunk_vectors).
template <class Cfg>
__device__ __forceinline__ void store_chunk_vectors_from(const float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2],
                                                         typename Cfg::Element* base, int64_t ld, uint32_t staging,
                                                         uint32_t barrier, int thread, int m0, int n0, int m, int n,
                                                         int chunk) {
  constexpr int kChunkPairs = Cfg::kStageCols / 16;
  named_barrier_sync(barrier, 128);
  stmatrix_columns<Cfg>(acc, staging, thread, chunk * kChunkPairs, kChunkPairs);
  named_barrier_sync(barrier, 128);
  store_chunk_vectors<Cfg>(staging, base, ld, thread, m0, n0 + chunk * Cfg::kStageCols, m, n);
}

/// Direct store (v7) of the whole tile, chunk by chunk (store_chunk_vectors_from).
template <class Cfg>
__device__ __forceinline__ void store_tile_vectors(const float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2],
                                                   typename Cfg::Element* base, int64_t ld, uint32_t staging,
                                                   uint32_t barrier, int thread, int m0, int n0, int m, int n) {
#pragma unroll
  for (int chunk = 0; chunk < Cfg::kBlockN / Cfg::kStageCols; ++chunk)
    store_chunk_vectors_from<Cfg>(acc, base, ld, staging, barrier, thread, m0, n0, m, n, chunk);
}

/// stmatrix_columns of chunk `chunk` (a run-time index: one guarded copy per chunk, so that a
/// rolled loop can call it).
template <class Cfg>
__device__ __forceinline__ void stmatrix_chunk(const float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2], uint32_t staging,
                                               int thread, int chunk) {
  constexpr int kChunkPairs = Cfg::kStageCols / 16;
  [&]<int... C>(std::integer_sequence<int, C...>) {
    ((chunk == C ? stmatrix_columns<Cfg>(acc, staging, thread, C * kChunkPairs, kChunkPairs) : void()), ...);
  }(std::make_integer_sequence<int, Cfg::kBlockN / Cfg::kStageCols>{});
}

/// The v7 staged-GELU epilogue (16-bit T; bias already in acc): per 64-column chunk, in a rolled
/// loop, the pre-activation rounded to T is written to the warpgroup's buffer, stored as pre if
/// asked, replaced by its GELU (each thread on its own vectors, gelu_chunk_vectors) and stored
/// as out, through st.global.v4 (kDirectStore) or a TMA store.
template <class Cfg>
__device__ __forceinline__ void smem_gelu_epilogue(const float (&acc)[Cfg::kMAtoms][Cfg::kBlockN / 2],
                                                   const CUtensorMap* map_out, const CUtensorMap* map_pre,
                                                   const KernelParams& p, uint32_t staging, uint32_t barrier,
                                                   int thread, int m0, int n0, bool gelu) {
  using T = typename Cfg::Element;
  constexpr int kChunks = Cfg::kBlockN / Cfg::kStageCols;
#pragma unroll 1
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    const int c0 = n0 + chunk * Cfg::kStageCols;
    if constexpr (!Cfg::kDirectStore) {
      if (thread == 0) bulk_wait_group_read();  // the previous TMA stores have read the buffer
    }
    named_barrier_sync(barrier, 128);
    stmatrix_chunk<Cfg>(acc, staging, thread, chunk);
    if constexpr (Cfg::kDirectStore) {
      named_barrier_sync(barrier, 128);
      if (p.pre != nullptr) store_chunk_vectors<Cfg>(staging, static_cast<T*>(p.pre), p.ldp, thread, m0, c0, p.m, p.n);
      if (gelu) gelu_chunk_vectors<Cfg>(staging, thread);
      store_chunk_vectors<Cfg>(staging, static_cast<T*>(p.out), p.ldo, thread, m0, c0, p.m, p.n);
    } else {
      if (p.pre != nullptr) {
        fence_proxy_async_shared();
        named_barrier_sync(barrier, 128);
        if (thread == 0) {
          tma_store_2d(map_pre, staging, c0, m0);
          bulk_commit_group();
          bulk_wait_group_read();  // pre has read the buffer before the GELU overwrites it
        }
      }
      named_barrier_sync(barrier, 128);
      if (gelu) gelu_chunk_vectors<Cfg>(staging, thread);
      fence_proxy_async_shared();
      named_barrier_sync(barrier, 128);
      if (thread == 0) {
        tma_store_2d(map_out, staging, c0, m0);
        bulk_commit_group();
      }
    }
  }
}

#endif  // KILN_SM90A_DEVICE

}  // namespace kiln::cuda_kernels::sm90
