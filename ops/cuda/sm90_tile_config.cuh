// The sm_90a linear+GELU kernel's compile-time configuration (TileConfig): tile shape, how the
// two consumer warpgroups share tiles, ring depth, epilogue variant, and the sizes and register
// budgets that follow from them. The kernel (sm90_linear_gelu_kernel.cuh) and the host side
// (sm90_linear_gelu.cu) both read it; docs/notes/sm90_linear_gelu.md says what each variant measured.
#pragma once

#include <cstdint>

#include "gelu_fast.cuh"

namespace kiln::cuda_kernels::sm90 {

/// A compile-time configuration: element type, tile width, tile sharing, cluster size, ring
/// depth, staged store width, where the GELU of a staged tile runs (in the consumers'
/// registers when neither flag is set, the producer warpgroup's spare warps with Offload, the
/// consumers during the next tile's mainloop with Interleave), gelu_fast's fit, and whether the
/// in-register GELU runs chunk by chunk just before each chunk's store (ChunkGelu, shipped in v5).
template <typename T, int BlockN, bool Pingpong, int Cluster, int Stages, int StageCols, bool Offload = false,
          bool Interleave = false, GeluFit Fit = GeluFit::Shipped, bool ChunkGelu = false, int BlockM = 128,
          int Inflight = 1, bool DirectStore = false, bool SmemGelu = false, bool BiasLate = false>
struct TileConfig {
  using Element = T;
  /// Rows of a tile: 128 when cooperative (64 per consumer); a ping-pong consumer owns a whole
  /// tile, 128 rows (two m64 atoms, v1-v3's) or 64 (one m64n256 atom, v6's).
  static constexpr int kBlockM = BlockM;
  static constexpr int kBlockN = BlockN;
  static constexpr bool kPingpong = Pingpong;
  static constexpr int kCluster = Cluster;
  static constexpr int kStages = Stages;
  static constexpr int kBlockK = 128 / static_cast<int>(sizeof(T));  ///< one 128-byte swizzle row
  static constexpr int kKSteps = 4;                                    ///< wgmma k steps (32 bytes) per stage
  static constexpr int kMAtoms = Pingpong ? BlockM / 64 : 1;           ///< m64 atoms per consumer
  static constexpr int kConsumerRows = 64 * kMAtoms;
  static constexpr int kABytes = kBlockM * 128;
  static constexpr int kBBytes = kBlockN * 128;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr bool kCanStage = sizeof(T) == 2;  ///< 16-bit outputs may take the staged epilogue
  static constexpr int kStageCols = StageCols;  ///< columns per staged store round (a multiple of 64)
  static constexpr int kStagingBytes = kCanStage ? kConsumerRows * kStageCols * 2 : 0;  ///< per consumer
  static constexpr int kDynamicSmem = kStages * kStageBytes + 2 * kStagingBytes + 1024;  // + alignment slack
  static constexpr int kThreads = 384;
  static constexpr uint32_t kEmptyArrivals = (Pingpong ? 1 : 2) * Cluster;  // consumer warpgroups per stage
  static constexpr bool kOffload = Offload;
  static constexpr bool kInterleave = Interleave;
  static constexpr GeluFit kGeluFit = Fit;  ///< gelu_fast's fit (the shipped one unless the harness asks)
  /// In-register GELU, staged stores: each store chunk's GELU right before its stmatrix, so the
  /// next chunk's GELU overlaps the previous chunk's TMA store instead of waiting for it.
  static constexpr bool kChunkGelu = ChunkGelu;
  static constexpr int kWorkers = 96;  ///< offload: warps 1-3 of the producer warpgroup
  /// wgmma groups (k blocks) a consumer keeps in flight while it issues the next: 1 until v6; 2
  /// gives a lone ping-pong consumer twice the slack before the tensor cores run dry.
  static constexpr int kInflight = Inflight;
  /// v7, chunked 64 x 256 ping-pong only: each staged chunk leaves through st.global.v4 from the
  /// buffer (every thread its own 16-byte vectors) instead of a TMA store.
  static constexpr bool kDirectStore = DirectStore;
  /// v7, likewise: the chunk's bias-added pre-activation is staged rounded to T and the GELU
  /// runs on the buffer (each thread on the vectors it stores), in a rolled chunk loop: one copy
  /// of the GELU's code instead of one per chunk.
  static constexpr bool kSmemGelu = SmemGelu;
  /// Benchmark only (the harness's comparison): the bias added to the accumulators after the
  /// mainloop (v3-v13) instead of being their starting value (v14). A compile-time choice: as a
  /// run-time one, the accumulators' two possible definitions made ptxas serialise every wgmma.
  static constexpr bool kBiasLate = BiasLate;
  /// v10, the chunked 64 x 256 ping-pong with TMA stores, one CTA per cluster: the epilogue of a
  /// CTA's last tile, which no mainloop hides, is shared. Its owner passes the bias-added values
  /// of the second half of the chunks through the (by then idle) ring to the other consumer, which
  /// has finished its own tiles, and each applies the GELU to and stores its half (when
  /// KernelParams::handoff_last is set).
  static constexpr bool kHandoffLast = Pingpong && BlockM == 64 && Cluster == 1 && ChunkGelu && !DirectStore &&
                                       !SmemGelu && kCanStage && BlockN / StageCols >= 2;
  static constexpr int kHandoffChunk = BlockN / StageCols / 2;  ///< the first chunk handed over
  static_assert(!kHandoffLast || (BlockN / 2 - kHandoffChunk * StageCols / 2) * 4 * 128 <= kStageBytes,
                "TileConfig: the handed-over values fit in one ring stage");
  // Registers per thread after setmaxnreg (128 x producer + 256 x consumer <= 64K): the offload
  // workers need some for the GELU; the consumers' epilogue is then only bias and stmatrix.
  // (ptxas compiles every role within the entry cap, 168 for 384 threads, and within a lower
  // setmaxnreg: the offload workers' four vectors in flight need more than 56.)
  static constexpr int kProducerRegisters = Offload ? 88 : 24;
  static constexpr int kConsumerRegisters = Offload ? 208 : 240;
  static_assert(128 * kProducerRegisters + 256 * kConsumerRegisters <= 65536, "TileConfig: 64K registers");
  static_assert(!(Offload || Interleave) || (!Pingpong && kCanStage && StageCols == BlockN),
                "TileConfig: a deferred GELU needs the cooperative schedule and whole-tile staging");
  static_assert(!(Offload && Interleave), "TileConfig: one place for the GELU");
  static_assert(kMAtoms * kBlockN / 2 <= 128, "TileConfig: at most 128 accumulators per consumer thread");
  static_assert(Cluster == 1 || Cluster == 2, "TileConfig: clusters of 1 or 2 CTAs");
  static_assert(Pingpong ? (BlockM == 64 || BlockM == 128) : BlockM == 128,
                "TileConfig: 128-row cooperative tiles, 64- or 128-row ping-pong tiles");
  static_assert(Inflight >= 1 && Inflight < Stages, "TileConfig: 1 .. kStages - 1 wgmma groups in flight");
  static_assert(!(DirectStore || SmemGelu) || (Pingpong && BlockM == 64 && ChunkGelu && StageCols == 64),
                "TileConfig: direct chunk stores and the staged GELU are built for the chunked 64-row ping-pong");
  static_assert(kDynamicSmem <= 227 * 1024, "TileConfig: the ring does not fit in shared memory");
  static_assert(kStageCols % 64 == 0 && kBlockN % kStageCols == 0, "TileConfig: staged chunks of 64-column blocks");
};

}  // namespace kiln::cuda_kernels::sm90
