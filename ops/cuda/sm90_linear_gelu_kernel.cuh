// The sm_90a linear+GELU kernel itself: out = GELU_erf(x w^T + bias) (and pre = x w^T + bias
// when asked), persistent and warp-specialised.
//
// A CTA has three warpgroups. Warpgroup 0 is the producer: one thread walks this CTA's tiles
// and, per 128-byte-wide k block, waits for a free stage of the shared-memory ring (its
// "empty" mbarrier), announces the stage's bytes on its "full" mbarrier and issues the TMA
// loads of the x tile (kBlockM rows) and the w tile (kBlockN rows), 128B-swizzled; out-of-bounds
// rows and columns arrive as zeros. Warpgroups 1 and 2 are consumers: they wait on "full",
// issue wgmma on the stage (4 k steps of 32 bytes), keep one wgmma group in flight and
// release the previous stage on "empty". Two ways to share the tiles, chosen by kPingpong:
//   - cooperative: both consumers work on one 128 x kBlockN tile, 64 rows each;
//   - ping-pong: each consumer owns every other tile (128 x kBlockN, two m64 atoms, or, since
//     v6, 64 x kBlockN, one m64n256 atom: the cooperative tile's wgmma efficiency per
//     instruction), so one consumer's epilogue runs while the other's wgmma keeps the tensor
//     cores busy. The two mainloops take turns (a "turn" mbarrier per consumer, arrived on
//     by the other when its mainloop has issued its last k block): besides keeping the tensor
//     cores to one tile at a time, this is what makes the parity waits sound, since a consumer
//     skips the other's ring positions and must never wait on a stage whose previous fill
//     has not landed yet.
// The accumulators start from the bias (v14: each tile's first wgmma accumulates onto it). The
// epilogue (sm90_epilogue.cuh) stores pre if asked, applies the exact GELU and stores out,
// each element once: through a shared-memory
// buffer per consumer and TMA stores for 16-bit outputs, or straight from registers. In the
// 64-row ping-pong (v10) the owner of a CTA's last tile, whose epilogue no mainloop hides,
// hands half of its chunks to the other consumer, which has finished its own tiles.
// With kCluster = 2, the two CTAs of a cluster take vertically adjacent tiles of one column of
// w: each loads its own x tile and half of the w tile, multicast into both CTAs' stage, so
// L2 serves w once per pair; a stage is refilled only when the consumers of both CTAs have
// released it (each consumer warpgroup arrives on both CTAs' "empty" barriers).
// With kOffload (cooperative only), the consumers stage the pre-activation and warps 1-3 of
// the producer warpgroup apply the GELU and store it while the consumers run on (a CTA's last
// tile excepted). With kInterleave (cooperative only), the consumers stage it and apply the
// GELU themselves, a slice at a time between the next tile's wgmma (a CTA's last tile excepted).
// setmaxnreg moves registers from the producer (24) to the consumers (240): 128 fp32
// accumulators per consumer thread plus the epilogue's temporaries. (ptxas still compiles every
// role within the entry cap, 168 registers for 384 threads: this is why a fourth, GELU-only
// warpgroup does not fit, 512 threads leaving 128 where the m64n256 wgmma needs 154.) Tiles are visited in
// groups of `group_m` tile rows (column by column inside a group) so that the CTAs running
// at one time share rows of x and columns of w in L2.
// The library runs the cluster-free, GELU-in-consumers configuration with the chunked GELU,
// cooperative 128 x 256 tiles or, for K <= 1024 with at least 8 Mi outputs (v7), the 64 x 256
// ping-pong; the 128-row ping-pong, clusters, the offloaded and the interleaved GELU, two wgmma
// groups in flight and v7's direct stores and staged GELU are built into the benchmark harness
// only, which compares them (docs/notes/sm90_linear_gelu.md). On an H200 the overlapped
// epilogue still costs the other consumer's mainloop about a tensor-core cycle per instruction
// it issues (v7), so the ping-pong hides the epilogue's latency, not its work.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "sm90_epilogue.cuh"
#include "sm90_ptx.cuh"
#include "sm90_tile_config.cuh"
#include "sm90_wgmma.cuh"

namespace kiln::cuda_kernels::sm90 {

#if defined(KILN_SM90_BENCH_HOOKS)
/// Benchmark only: counters per CTA in KernelParams::bench_timing (start clock and globaltimer,
/// then per consumer: mainloop, epilogue and turn-wait cycles, end clock and globaltimer, tiles).
inline constexpr int kTimingSlots = 16;
/// Benchmark only (v11): clock64 stamps per CTA in KernelParams::bench_tail, taken by thread 0
/// of a consumer inside the epilogue of the CTA's last tile. Owner of that tile: 0 its mainloop
/// done, 1 bias added, 2 values handed over; chunk C: 3 + 2C its GELU done, 4 + 2C its stores
/// issued; 11 the owner leaves. The receiver: 12 waiting for the values, 13 they are in, 14 loaded,
/// its chunks as above, 15 it leaves.
inline constexpr int kTailSlots = 16;
#endif
#if defined(KILN_SM90_BENCH_HOOKS) && defined(KILN_SM90A_DEVICE)
#define KILN_SM90_TIMING(...) __VA_ARGS__
#else
#define KILN_SM90_TIMING(...)
#endif
// A tail stamp (kTailSlots) when this thread traces the last tile's epilogue.
#define KILN_SM90_TAIL(slot) \
  KILN_SM90_TIMING(if (tail_trace) p.bench_tail[blockIdx.x * kTailSlots + (slot)] = clock64();)

/// (unit row, unit column) of scheduling unit `u` in the grouped raster order.
__device__ __forceinline__ int2 unit_coordinates(int u, const KernelParams& p) {
  const int per_group = p.group_m * p.units_n;
  const int group = u / per_group;
  const int first = group * p.group_m;
  const int rows = min(p.units_m - first, p.group_m);
  const int r = u - group * per_group;
  return make_int2(first + r % rows, r / rows);
}


/// The kernel: grid = a multiple of kCluster CTAs (at most one per SM), 384 threads each.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    linear_gelu_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w,
                       const __grid_constant__ CUtensorMap map_out, const __grid_constant__ CUtensorMap map_pre,
                       const KernelParams p) {
#if defined(KILN_SM90A_DEVICE)
  constexpr int kStages = Cfg::kStages;
  // Static shared memory holds the barriers and bias copies (a build without this body has none:
  // sm90_linear_gelu_supported() tells the two apart by it).
  constexpr int kBarriers = 2 * kStages + 7;  // the ring's full and empty barriers, seven more
  __shared__ __align__(8) uint64_t barriers[kBarriers];
  // The tile's bias per consumer, one buffer seen two ways: v14's start of the accumulators
  // (bias_start), as floats where shared memory has room (not in the 16-bit cooperative
  // configuration, whose ring and staging leave under 1 KB), and the harness's bias_late copy
  // (bias_smem, as loaded).
  using BiasLoaded = BiasPair<typename Cfg::Element>;
  constexpr int kTilePairs = Cfg::kBlockN / 2;  // bias column pairs of a tile, one per thread below it
  constexpr bool kBiasFloats = Cfg::kDynamicSmem + sizeof(barriers) + 2 * kTilePairs * 8 <= 227 * 1024;
  using BiasSlot = std::conditional_t<kBiasFloats, float2, BiasLoaded>;
  constexpr int kSlotBytes = static_cast<int>(sizeof(BiasSlot) > sizeof(BiasLoaded) ? sizeof(BiasSlot) : sizeof(BiasLoaded));
  __shared__ __align__(16) uint8_t bias_buffer[2 * kTilePairs * kSlotBytes];
  auto& bias_smem = *reinterpret_cast<BiasLoaded(*)[2][kTilePairs]>(bias_buffer);
  auto& bias_start = *reinterpret_cast<BiasSlot(*)[2][kTilePairs]>(bias_buffer);
  extern __shared__ uint8_t dynamic_smem[];
  const uint32_t ring = (smem_address(dynamic_smem) + 1023u) & ~1023u;
  const uint32_t full0 = smem_address(&barriers[0]);
  const uint32_t empty0 = smem_address(&barriers[kStages]);
  const uint32_t turn0 = smem_address(&barriers[2 * kStages]);  // ping-pong: consumer c waits on turn0 + 8c
  // Offload: consumer c's staged tile is ready (staged0 + 8c, 128 arrivals) and its buffer free
  // again (freed0 + 8c, one arrival by the worker that stored it).
  const uint32_t staged0 = smem_address(&barriers[2 * kStages + 2]);
  const uint32_t freed0 = smem_address(&barriers[2 * kStages + 4]);
  // v10 (kHandoffLast): the owner of the CTA's last tile has handed its values over (128 arrivals).
  const uint32_t handed = smem_address(&barriers[2 * kStages + 6]);
  const uint32_t staging0 = ring + kStages * Cfg::kStageBytes;  // consumer c's buffer: + c * kStagingBytes

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full0 + 8 * s, 1);
      mbarrier_init(empty0 + 8 * s, Cfg::kEmptyArrivals);
    }
    mbarrier_init(turn0, 1);
    mbarrier_init(turn0 + 8, 1);
    for (int c = 0; c < 2; ++c) {
      mbarrier_init(staged0 + 8 * c, 128);
      mbarrier_init(freed0 + 8 * c, 1);
    }
    mbarrier_init(handed, 128);
    fence_mbarrier_init();
  }
  if constexpr (Cfg::kCluster > 1) cluster_sync();
  else __syncthreads();
  // Programmatic dependent launch: the CTA may have started while the previous kernel in the
  // stream still runs (its launch and the barrier set-up above overlap that kernel's tail);
  // nothing global is read or written before the previous kernel has finished. A no-op for a
  // launch without the attribute.
  griddepcontrol_wait();
  KILN_SM90_TIMING(if (p.bench_timing != nullptr && threadIdx.x == 0) {
    p.bench_timing[blockIdx.x * kTimingSlots] = clock64();
    p.bench_timing[blockIdx.x * kTimingSlots + 1] = global_timer_ns();
  })

  const uint32_t rank = Cfg::kCluster > 1 ? cluster_cta_rank() : 0;
  const int cluster = static_cast<int>(blockIdx.x) / Cfg::kCluster;
  const int clusters = static_cast<int>(gridDim.x) / Cfg::kCluster;
  const int units = p.units_m * p.units_n;
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;

  // Offload workers (warps 1-3 of the producer warpgroup): for each tile and consumer, wait
  // for the staged pre-activation, TMA-store it as pre if asked, apply the GELU in place,
  // TMA-store out, and free the buffer once the store has read it. Worker 0 issues the stores.
  [[maybe_unused]] auto offload_worker = [&](int worker) {
    if (p.staged == 0) return;
#if defined(KILN_SM90_BENCH_HOOKS)
    if (p.bench_skip == 2) return;
    const bool gelu = p.bench_skip != 1;
#else
    constexpr bool gelu = true;
#endif
    constexpr uint32_t kWorkerBarrier = 3;
    constexpr int kBlockBytes = Cfg::kConsumerRows * 128;
    uint32_t handoffs = 0;
    // (A CTA's last tile stays with the consumers: its GELU hides behind no next mainloop, and
    // 256 threads in registers finish it sooner.)
    for (int u = cluster; u + clusters < units; u += clusters, ++handoffs) {
      const int2 unit = unit_coordinates(u, p);
      const int m0 = (unit.x * Cfg::kCluster + static_cast<int>(rank)) * Cfg::kBlockM;
      const int n0 = unit.y * Cfg::kBlockN;
      for (int c = 0; c < 2; ++c) {
        const uint32_t buffer = staging0 + c * Cfg::kStagingBytes;
        mbarrier_wait(staged0 + 8 * c, handoffs & 1u);
        if (p.pre != nullptr) {
          if (worker == 0) {
            for (int cb = 0; cb < Cfg::kBlockN / 64; ++cb)
              tma_store_2d(&map_pre, buffer + cb * kBlockBytes, n0 + 64 * cb, m0 + 64 * c);
            bulk_commit_group();
            bulk_wait_group_read();
          }
          named_barrier_sync(kWorkerBarrier, Cfg::kWorkers);  // pre has been read out
        }
        if (gelu) gelu_in_place<typename Cfg::Element>(buffer, Cfg::kStagingBytes, worker, Cfg::kWorkers);
        fence_proxy_async_shared();
        named_barrier_sync(kWorkerBarrier, Cfg::kWorkers);
        if (worker == 0) {
          for (int cb = 0; cb < Cfg::kBlockN / 64; ++cb)
            tma_store_2d(&map_out, buffer + cb * kBlockBytes, n0 + 64 * cb, m0 + 64 * c);
          bulk_commit_group();
          bulk_wait_group_read();
          mbarrier_arrive(freed0 + 8 * c);
        }
      }
    }
    if (worker == 0) bulk_wait_group();
  };

  if (warpgroup == 0) {
    // ---- producer ----
    setmaxnreg_decrease<Cfg::kProducerRegisters>();
    if constexpr (Cfg::kOffload) {
      if (threadIdx.x >= 32) offload_worker(static_cast<int>(threadIdx.x) - 32);
    }
    if (threadIdx.x == 0) {
      prefetch_tensor_map(&map_x);
      prefetch_tensor_map(&map_w);
      // Ring position as (stage, phase), stepped without a division (v6: a division by a stage
      // count that is no power of two sat on every k block's path).
      int s = 0;
      uint32_t phase = 0;
      for (int u = cluster; u < units; u += clusters) {
        const int2 unit = unit_coordinates(u, p);
        const int m0 = (unit.x * Cfg::kCluster + static_cast<int>(rank)) * Cfg::kBlockM;
        const int n0 = unit.y * Cfg::kBlockN;
        for (int kb = 0; kb < p.k_blocks; ++kb, s = (s + 1 == kStages) ? 0 : s + 1, phase ^= (s == 0) ? 1u : 0u) {
          mbarrier_wait(empty0 + 8 * s, phase ^ 1u);
          const uint32_t full = full0 + 8 * s;
          const uint32_t a = ring + s * Cfg::kStageBytes;
          const uint32_t b = a + Cfg::kABytes;
          mbarrier_arrive_expect_tx(full, Cfg::kStageBytes);
          tma_load_2d(a, &map_x, full, kb * Cfg::kBlockK, m0);
          if constexpr (Cfg::kCluster == 1) {
            tma_load_2d(b, &map_w, full, kb * Cfg::kBlockK, n0);
          } else {
            constexpr int kHalf = Cfg::kBlockN / 2;
            tma_load_2d_multicast(b + rank * kHalf * 128, &map_w, full, kb * Cfg::kBlockK,
                                  n0 + static_cast<int>(rank) * kHalf, static_cast<uint16_t>(0x3));
          }
        }
      }
    }
    __syncwarp();
  } else {
    // ---- consumers ----
    setmaxnreg_increase<Cfg::kConsumerRegisters>();
    using T = typename Cfg::Element;
    const int consumer = warpgroup - 1;
    const int thread = static_cast<int>(threadIdx.x) % 128;
    const int warp = thread / 32, lane = thread % 32;
    const int row_in_tile = Cfg::kPingpong ? 0 : consumer * 64;
    const uint32_t staging = staging0 + consumer * Cfg::kStagingBytes;
    // One arrival per consumer warpgroup (its thread 0) on the stage's "empty" barrier of every
    // CTA in the cluster, once the warpgroup's wgmma reading the stage have completed.
    auto release = [&](int stage) {
      if (thread != 0) return;
      if constexpr (Cfg::kCluster == 1) mbarrier_arrive(empty0 + 8 * stage);
      else
        for (uint32_t c = 0; c < Cfg::kCluster; ++c) mbarrier_arrive_cluster(empty0 + 8 * stage, c);
    };
    float acc[Cfg::kMAtoms][Cfg::kBlockN / 2];
#pragma unroll
    for (int mi = 0; mi < Cfg::kMAtoms; ++mi)
#pragma unroll
      for (int i = 0; i < Cfg::kBlockN / 2; ++i) acc[mi][i] = 0.0f;

    const int first = Cfg::kPingpong ? consumer : 0;
    const int step = Cfg::kPingpong ? 2 : 1;
    uint32_t turns = 0;     // ping-pong: turns waited for so far
    uint32_t handoffs = 0;  // offload: tiles handed to the workers so far
    // Benchmark hooks: bench_skip 2 skips the epilogue, 1 the GELU, 4 the stores, 5 the GELU and
    // the stores (the library runs all; the chunked staged epilogue honours 4 and 5).
#if defined(KILN_SM90_BENCH_HOOKS)
    const bool epilogue = p.bench_skip != 2;
    const bool gelu = p.bench_skip != 1 && p.bench_skip != 5;
    const bool stores = p.bench_skip != 4 && p.bench_skip != 5;
#else
    constexpr bool epilogue = true, gelu = true, stores = true;
#endif
    // v14: the bias is the accumulators' start (the harness's kBiasLate builds add it after).
    constexpr bool bias_first = !Cfg::kBiasLate;
    // Interleave (harness only; "v5a" in the notes, measured slower than the chunked in-register
    // GELU): the previous tile's half, staged in `staging` as the bias-added
    // pre-activation rounded to T, waits for its GELU and stores at (pending_m0, pending_n0).
    // Its kUnits units of work (two 16-byte vectors per thread each; kVectors / 2 units per
    // 64-column block, the TMA store box) are spread over this tile's k blocks: the
    // warpgroup's issue slots are idle while its wgmma run, and the units use none of the
    // accumulators.
    constexpr int kBlockBytes = Cfg::kConsumerRows * 128;
    constexpr int kVectors = kBlockBytes / (16 * 128);  // per thread per block
    constexpr int kUnitsPerBlock = kVectors / 2;
    constexpr int kUnits = kUnitsPerBlock * (Cfg::kBlockN / 64);
    bool pending = false;
    int pending_m0 = 0, pending_n0 = 0;
    KILN_SM90_TIMING(const bool timing = p.bench_timing != nullptr && thread == 0;
                     unsigned long long t_main = 0, t_epi = 0, t_turn = 0, t_mark = 0, tiles_done = 0;)
    [[maybe_unused]] auto deferred_unit = [&](int j) {
      const int block = j / kUnitsPerBlock, r = j % kUnitsPerBlock;
      const uint32_t block_address = staging + block * kBlockBytes;
      if (r == 0 && p.pre != nullptr) {
        // The pre store of this block (one bulk group per block, committed before the out
        // stores of the blocks before it) has read it: at most kBlocks - 1 later groups remain.
        if (thread == 0) bulk_wait_group_read_n<Cfg::kBlockN / 64 - 1>();
        named_barrier_sync(1 + consumer, 128);
      }
      if (gelu) gelu_vectors<T, Cfg::kGeluFit, 2>(block_address + (2 * r * 128 + thread) * 16, 128 * 16);
      if (r == kUnitsPerBlock - 1) {
        // The block is done: hand it to a TMA store (which clips rows and columns past [M, N]).
        fence_proxy_async_shared();
        named_barrier_sync(1 + consumer, 128);
        if (thread == 0) {
          tma_store_2d(&map_out, block_address, pending_n0 + 64 * block, pending_m0);
          bulk_commit_group();
        }
      }
    };
    // Thread 0 stamps the last tile's epilogue (kTailSlots), leaving at slot tail_end.
    KILN_SM90_TIMING(bool tail_trace = false; int tail_end = 11;)
    constexpr int kChunks = Cfg::kBlockN / Cfg::kStageCols;  // staged store chunks per tile
    // The chunked epilogue (kChunkGelu, staged): chunks [chunk_begin, chunk_end) of the tile at
    // (tile_m0, tile_n0), each chunk's GELU right before its stores. (A template, so that only
    // the configurations that call it build it.)
    auto gelu_chunks = [&]<class C2 = Cfg>(float (&values)[C2::kMAtoms][C2::kBlockN / 2], int chunk_begin,
                                           int chunk_end, int tile_m0, int tile_n0, bool with_gelu) {
      constexpr int kChunkValues = C2::kStageCols / 2;  // a chunk's values per thread and atom
      auto chunk_step = [&]<int C>() {
        if (C < chunk_begin || C >= chunk_end) return;
#if defined(KILN_SM90_BENCH_HOOKS)
        if (p.bench_skip == 3) apply_gelu_tanh<C2, C * kChunkValues, (C + 1) * kChunkValues>(values);
        else
#endif
          if (with_gelu) apply_gelu<C2, C * kChunkValues, (C + 1) * kChunkValues>(values);
        KILN_SM90_TAIL(3 + 2 * C);
        if (!stores)
          keep_values<C2, C * kChunkValues, (C + 1) * kChunkValues>(values);
        else if constexpr (C2::kDirectStore)
          store_chunk_vectors_from<C2>(values, static_cast<T*>(p.out), p.ldo, staging, 1 + consumer, thread, tile_m0,
                                       tile_n0, p.m, p.n, C);
        else
          store_chunk_staged<C2>(values, &map_out, staging, 1 + consumer, thread, tile_m0, tile_n0, C);
        KILN_SM90_TAIL(4 + 2 * C);
      };
      [&]<int... C>(std::integer_sequence<int, C...>) {
        (chunk_step.template operator()<C>(), ...);
      }(std::make_integer_sequence<int, kChunks>{});
    };
    // v10 (kHandoffLast): the values the owner of the CTA's last tile hands over go to the ring
    // stage of that tile's last k block, which is free: its owner's wgmma have read it, every
    // earlier reader had released it before its last fill, and no load follows. Value v of thread
    // t sits at float v * 128 + t (conflict-free), stored one float at a time: 16-byte stores made
    // ptxas move the accumulators into register quads on this path, which serialises every wgmma
    // of the kernel (its C7520 notice). The owner's threads arrive on the `handed` mbarrier after
    // their stores (release); the receiver waits on it (acquire) and loads the values into an
    // array of its own, not into its accumulators (the same notice).
    constexpr int kHandoffFirst = Cfg::kHandoffChunk * (Cfg::kStageCols / 2);  // first value handed over
    constexpr int kHandoffValues = Cfg::kBlockN / 2 - kHandoffFirst;
    // The bias of tile unit u_, one column pair per thread (zeros past n, past the last unit or
    // without bias). v14 loads it a tile ahead, so it has arrived when the tile starts.
    auto tile_bias = [&](int u_) {
      BiasPair<T> b{};
      if (thread < kTilePairs && u_ < units)
        b = load_bias_pair(static_cast<const T*>(p.bias), unit_coordinates(u_, p).y * Cfg::kBlockN + 2 * thread, p.n);
      return b;
    };
    BiasPair<T> bias_next{};
    if constexpr (bias_first) bias_next = tile_bias(cluster + first * clusters);
    for (int local = first;; local += step) {
      const int u = cluster + local * clusters;
      if (u >= units) break;
      KILN_SM90_TIMING(if (timing && tiles_done > 0) t_epi += clock64() - t_mark;)
      const int2 unit = unit_coordinates(u, p);
      const int m0 = (unit.x * Cfg::kCluster + static_cast<int>(rank)) * Cfg::kBlockM;
      const int n0 = unit.y * Cfg::kBlockN;
      // Ring position of this tile's first k block as (stage, phase): one division per tile,
      // the k blocks step without one.
      const int64_t it0 = static_cast<int64_t>(local) * p.k_blocks;
      const int s0 = static_cast<int>(it0 % kStages);
      uint32_t phase = static_cast<uint32_t>(it0 / kStages) & 1u;
      BiasPair<T> bias_pair{};
      if constexpr (bias_first) {
        // v14: the tile's bias (loaded a tile ahead) into the accumulators, the next tile's
        // requested. In the ping-pong this runs while the other consumer's mainloop holds the
        // tensor cores.
        start_from_bias<Cfg>(acc, bias_start[consumer], bias_next, 1 + consumer, thread, lane % 4);
        bias_next = tile_bias(cluster + (local + step) * clusters);
      } else {
        // v3-v13: read now so its latency hides behind the mainloop; it goes to the warpgroup's
        // shared copy after the mainloop.
        if (thread < kTilePairs) bias_pair = load_bias_pair(static_cast<const T*>(p.bias), n0 + 2 * thread, p.n);
      }
      KILN_SM90_TIMING(if (timing) t_mark = clock64();)
      if constexpr (Cfg::kPingpong) {
        // The other consumer's previous tile has all its k blocks in (and issued). (Since v6 the
        // tile's coordinates and bias loads come first, off the tensor cores' critical path.)
        if (local > 0) mbarrier_wait(turn0 + 8 * consumer, turns++ & 1u);
      }
      KILN_SM90_TIMING(if (timing) {
        const unsigned long long now = clock64();
        t_turn += now - t_mark;
        t_mark = now;
      })
      // Interleave: units done so far, and the k blocks they are spread over (three quarters of
      // the mainloop, so the last block's store has read the buffer before it is reused).
      int units_done = 0;
      const int span = max(1, (3 * p.k_blocks) / 4);
      constexpr int kInflight = Cfg::kInflight;
      int s = s0;
      for (int kb = 0; kb < p.k_blocks; ++kb) {
        mbarrier_wait(full0 + 8 * s, phase);
        const uint32_t a = ring + s * Cfg::kStageBytes + row_in_tile * 128;
        const uint32_t b = ring + s * Cfg::kStageBytes + Cfg::kABytes;
        const uint64_t desc_b = smem_descriptor_sw128(b);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Cfg::kKSteps; ++kk) {
#pragma unroll
          for (int mi = 0; mi < Cfg::kMAtoms; ++mi) {
            const uint64_t desc_a = smem_descriptor_sw128(a + mi * 64 * 128);
            wgmma_m64<Cfg::kBlockN, typename Cfg::Element>(acc[mi], desc_a + 2 * kk, desc_b + 2 * kk,
                                                           (bias_first || kb > 0 || kk > 0) ? 1u : 0u);
          }
        }
        wgmma_commit_group();
        if constexpr (Cfg::kInterleave) {
          if (pending) {
            const int target = min(kUnits, ((kb + 1) * kUnits + span - 1) / span);
            for (; units_done < target; ++units_done) deferred_unit(units_done);
          }
        }
        if (kb >= kInflight) {
          // The wgmma group kInflight k blocks back is done: its stage can be refilled.
          wgmma_wait_group<kInflight>();
          release(s >= kInflight ? s - kInflight : s - kInflight + kStages);
        }
        if (++s == kStages) s = 0, phase ^= 1u;
      }
      if constexpr (Cfg::kPingpong) {
        if (thread == 0) mbarrier_arrive(turn0 + 8 * (1 - consumer));
      }
      wgmma_wait_group<0>();
#pragma unroll
      for (int mi = 0; mi < Cfg::kMAtoms; ++mi)
#pragma unroll
        for (int i = 0; i < Cfg::kBlockN / 2; ++i) fence_operand(acc[mi][i]);
      KILN_SM90_TIMING(tail_trace = p.bench_tail != nullptr && thread == 0 && u + clusters >= units;)
      KILN_SM90_TAIL(0);
      KILN_SM90_TIMING(if (timing) {
        const unsigned long long now = clock64();
        t_main += now - t_mark;
        t_mark = now;
        ++tiles_done;
      })
      // The last min(kInflight, k_blocks) stages, oldest first.
      for (int j = min(kInflight, p.k_blocks); j > 0; --j) release(s >= j ? s - j : s - j + kStages);

      // ---- epilogue ----
      if (!epilogue) continue;
      auto store = [&](const CUtensorMap* map, void* base, int64_t ld, uint32_t pair) {
        if constexpr (Cfg::kCanStage) {
          if (p.staged != 0) {
            if constexpr (Cfg::kDirectStore) {
              store_tile_vectors<Cfg>(acc, static_cast<T*>(base), ld, staging, 1 + consumer, thread, m0 + row_in_tile,
                                      n0, p.m, p.n);
            } else {
              store_tile_staged<Cfg>(acc, map, staging, 1 + consumer, thread, m0 + row_in_tile, n0);
            }
            return;
          }
        }
        store_tile_direct<Cfg>(acc, static_cast<T*>(base), ld, pair != 0, m0 + row_in_tile + warp * 16 + lane / 4,
                               n0 + 2 * (lane % 4), p.m, p.n);
      };
      pending = false;  // (its units all ran: target reaches kUnits at kb = span - 1)
      // bias_late: the shared bias copy: every thread is past the previous tile's add_bias (first
      // barrier), then the copy is complete (second). Interleave: the buffer is free once the
      // previous tile's stores have read it (thread 0 waits before the first barrier) and every
      // thread has run its deferred units (the barrier; its own when the bias came first).
      if constexpr (Cfg::kInterleave) {
        if (p.staged != 0 && thread == 0) bulk_wait_group_read();
        if constexpr (bias_first) named_barrier_sync(1 + consumer, 128);
      }
      if constexpr (!bias_first) {
        named_barrier_sync(1 + consumer, 128);
        if (thread < kTilePairs) bias_smem[consumer][thread] = bias_pair;
        named_barrier_sync(1 + consumer, 128);
        add_bias<Cfg>(acc, bias_smem[consumer], lane % 4);
      }
      KILN_SM90_TAIL(1);
      // v10: the CTA's last tile hands its later chunks to the other consumer.
      int chunk_end = kChunks;
      if constexpr (Cfg::kHandoffLast) {
        if (p.handoff_last != 0 && p.staged != 0 && u + clusters >= units) {
          static_assert(Cfg::kMAtoms == 1, "the handoff is built for one m64 atom per consumer");
          const uint32_t handoff = ring + (s == 0 ? kStages - 1 : s - 1) * Cfg::kStageBytes;
#pragma unroll
          for (int v = 0; v < kHandoffValues; ++v)
            st_shared_f32(handoff + (v * 128 + thread) * 4, acc[0][kHandoffFirst + v]);
          mbarrier_arrive(handed);
          chunk_end = Cfg::kHandoffChunk;
          KILN_SM90_TAIL(2);
        }
      }
      if constexpr (Cfg::kInterleave) {
        if (p.staged != 0 && u + clusters < units) {
          // Not this CTA's last tile: stage the pre-activation, rounded to T (what the unfused
          // linear stores), store pre from it now, and leave the GELU and the out stores to the
          // next tile's mainloop. The last tile takes the in-register path below.
          stmatrix_columns<Cfg>(acc, staging, thread, 0, Cfg::kBlockN / 16);
          fence_proxy_async_shared();
          named_barrier_sync(1 + consumer, 128);
          if (p.pre != nullptr && thread == 0) {
#pragma unroll
            for (int cb = 0; cb < Cfg::kBlockN / 64; ++cb) {
              tma_store_2d(&map_pre, staging + cb * kBlockBytes, n0 + 64 * cb, m0 + row_in_tile);
              bulk_commit_group();
            }
          }
          pending = true;
          pending_m0 = m0 + row_in_tile;
          pending_n0 = n0;
          continue;
        }
      }
      if constexpr (Cfg::kOffload) {
        if (p.staged != 0 && u + clusters < units) {
          // Hand the pre-activation, rounded to T, to the workers: they store pre, apply the
          // GELU in place and store out while this warpgroup runs its next mainloop.
          mbarrier_wait(freed0 + 8 * consumer, (handoffs & 1u) ^ 1u);
          stmatrix_columns<Cfg>(acc, staging, thread, 0, Cfg::kBlockN / 16);
          fence_proxy_async_shared();
          mbarrier_arrive(staged0 + 8 * consumer);
          ++handoffs;
          continue;
        }
        // The last tile goes through the buffer too: the workers' stores must have read it.
        if (p.staged != 0) mbarrier_wait(freed0 + 8 * consumer, (handoffs & 1u) ^ 1u);
      }
      if constexpr (Cfg::kSmemGelu && Cfg::kCanStage) {
        if (p.staged != 0) {
          // v7: pre (if asked), the GELU on the staged chunk and out, chunk by chunk, rolled.
          smem_gelu_epilogue<Cfg>(acc, &map_out, &map_pre, p, staging, 1 + consumer, thread, m0 + row_in_tile, n0,
                                  gelu);
          continue;
        }
      }
      if (p.pre != nullptr) store(&map_pre, p.pre, p.ldp, p.pair_pre);
      if constexpr (Cfg::kChunkGelu && Cfg::kCanStage) {
        if (p.staged != 0) {
          gelu_chunks(acc, 0, chunk_end, m0 + row_in_tile, n0, gelu);
          continue;
        }
      }
      if (gelu) apply_gelu<Cfg>(acc);
      store(&map_out, p.out, p.ldo, p.pair_out);
    }
    if constexpr (Cfg::kHandoffLast) {
      // v10: the consumer that does not own the CTA's last tile (it has finished its own)
      // takes the values handed over and applies the GELU to and stores that tile's later chunks.
      if (epilogue && p.handoff_last != 0 && p.staged != 0 && cluster < units) {
        const int last_local = (units - 1 - cluster) / clusters;
        if ((last_local & 1) != consumer) {
          const int2 unit = unit_coordinates(cluster + last_local * clusters, p);
          const int64_t last_block = static_cast<int64_t>(last_local) * p.k_blocks + p.k_blocks - 1;
          const uint32_t handoff = ring + static_cast<uint32_t>(last_block % kStages) * Cfg::kStageBytes;
          KILN_SM90_TIMING(tail_trace = p.bench_tail != nullptr && thread == 0; tail_end = 15;)
          KILN_SM90_TAIL(12);
          mbarrier_wait(handed, 0);
          KILN_SM90_TAIL(13);
          float values[Cfg::kMAtoms][Cfg::kBlockN / 2];  // only the handed-over chunks are read
#pragma unroll
          for (int v = 0; v < kHandoffValues; ++v)
            values[0][kHandoffFirst + v] = ld_shared_f32(handoff + (v * 128 + thread) * 4);
          KILN_SM90_TAIL(14);
          gelu_chunks(values, Cfg::kHandoffChunk, kChunks, unit.x * Cfg::kBlockM + row_in_tile, unit.y * Cfg::kBlockN,
                      gelu);
        }
      }
    }
    // TMA stores still reading this warpgroup's buffer must finish before the CTA leaves.
    if (Cfg::kCanStage && p.staged != 0 && thread == 0) bulk_wait_group();
    KILN_SM90_TAIL(tail_end);
    KILN_SM90_TIMING(if (timing) {
      if (tiles_done > 0) t_epi += clock64() - t_mark;
      unsigned long long* slot = p.bench_timing + blockIdx.x * kTimingSlots + 2 + 6 * consumer;
      slot[0] = t_main, slot[1] = t_epi, slot[2] = t_turn, slot[3] = clock64(), slot[4] = global_timer_ns();
      slot[5] = tiles_done;
    })
  }
  // A cluster's CTAs leave together: a peer may still arrive on this CTA's barriers.
  if constexpr (Cfg::kCluster > 1) cluster_sync();
#endif  // KILN_SM90A_DEVICE
}

}  // namespace kiln::cuda_kernels::sm90
