// The host side of Kiln's sm_90a linear+GELU kernel (sm90_linear_gelu_kernel.cuh): which calls
// it takes, which tile configuration runs them, the TMA tensor maps, and the launch.
//
// Built for sm_90a alone (its own CMake object library, -gencode=arch=compute_90a,code=sm_90a):
// wgmma and setmaxnreg exist nowhere else. cuTensorMapEncodeTiled is a driver function, looked
// up through the runtime (sm90_tensor_map.h), so libkiln never links libcuda. supported()
// answers without touching a stream (it may run while a stream is being captured): device
// properties, kernel attributes and the entry point are read once per device and cached.
#include "sm90_linear_gelu.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>

#include "../../core/cuda_check.h"
#include "sm90_linear_gelu_kernel.cuh"
#include "sm90_tensor_map.h"

namespace kiln::cuda_kernels {

namespace sm90 {

/// How the two consumer warpgroups share tiles (sm90_linear_gelu_kernel.cuh).
enum class Schedule : uint8_t {
  Cooperative,  ///< 128 x 256 tiles, both consumers on each (64 rows each)
  Pingpong,     ///< 128 x 128 tiles, one consumer each, alternating
  Pingpong64,   ///< 64 x 256 tiles (one m64n256 wgmma per k step), one consumer each, alternating
};

/// Where the exact GELU runs and how outputs are staged (sm90_epilogue.cuh). TF32's float
/// outputs always take the in-register GELU and direct stores.
enum class Epilogue : uint8_t {
  Registers,           ///< consumers apply it in registers, each half-tile store chunk's just before
                       ///< its store (the second's GELU overlaps the first's TMA store); 4 stages
  RegistersUnchunked,  ///< v4's: the whole tile's GELU, then the two store chunks
  RegistersWholeTile,  ///< unchunked, whole-tile staging and one stage less
  Offload,             ///< cooperative only: the producer warpgroup's spare warps apply it
  Interleaved,         ///< cooperative only: the consumers apply it during the next tile's mainloop
};

/// One runnable choice: schedule, cluster size (1, or 2 with w multicast), epilogue, raster group.
struct Variant {
  Schedule schedule = Schedule::Cooperative;
  int cluster = 1;
  Epilogue epilogue = Epilogue::Registers;
  int group_m = 16;
  GeluFit gelu_fit = GeluFit::Shipped;  ///< gelu_fast's fit (the harness also builds the others)
  int inflight = 1;  ///< wgmma groups kept in flight (TileConfig::kInflight; the harness builds 2 for Pingpong64)
  bool direct_store = false;  ///< TileConfig::kDirectStore (v7; the harness builds it for Pingpong64, Registers)
  bool smem_gelu = false;     ///< TileConfig::kSmemGelu (v7; likewise)
  bool handoff_last = true;   ///< KernelParams::handoff_last, where TileConfig::kHandoffLast (v10)
#if defined(KILN_SM90_BENCH_HOOKS)
  bool bias_late = false;  ///< TileConfig::kBiasLate (v3-v13's bias after the mainloop; shipped configurations)
  bool force_direct = false;  ///< 16-bit outputs stored from registers (as unaligned ones are), never staged
  int bench_skip = 0;  ///< KernelParams::bench_skip
  unsigned long long* bench_timing = nullptr;  ///< KernelParams::bench_timing (grid x kTimingSlots)
  unsigned long long* bench_tail = nullptr;    ///< KernelParams::bench_tail (grid x kTailSlots)
#endif
};

/// The TileConfig of a variant: ring depth against the 16-bit types' staging buffers (one per
/// consumer): half-tile staging keeps 4 x 48 KB (cooperative) or 6 x 32 KB (ping-pong) stages,
/// whole-tile staging 3 or 5; TF32 has no staging: 4 or 7. Ping-pong 64 x 256 (40 KB stages):
/// chunked GELU with quarter-tile staging (8 KB per consumer) keeps 5 stages, whole-tile
/// staging (32 KB) or half-tile unchunked 4; TF32 5.
template <typename T, Schedule S, int C, Epilogue E, GeluFit Fit = GeluFit::Shipped, int Inflight = 1,
          bool Direct = false, bool SmemGelu = false, bool BiasLate = false>
struct ConfigSelect {
  static constexpr bool kHalf = sizeof(T) == 2;
  static constexpr bool kWhole = kHalf && E != Epilogue::Registers && E != Epilogue::RegistersUnchunked;
  static constexpr bool kChunked = E == Epilogue::Registers;
  using Pingpong64Config = TileConfig<T, 256, true, C, (!kHalf || kChunked) ? 5 : 4,
                                      kChunked ? 64 : (kWhole ? 256 : 128), false, false, Fit, kChunked, 64,
                                      Inflight, Direct && kHalf && kChunked, SmemGelu && kHalf && kChunked, BiasLate>;
  using type = std::conditional_t<
      S == Schedule::Cooperative,
      TileConfig<T, 256, false, C, !kHalf ? 4 : (kWhole ? 3 : 4), kWhole ? 256 : 128, kHalf && E == Epilogue::Offload,
                 kHalf && E == Epilogue::Interleaved, Fit, E == Epilogue::Registers, 128, Inflight, false, false,
                 BiasLate>,
      std::conditional_t<S == Schedule::Pingpong,
                         TileConfig<T, 128, true, C, !kHalf ? 7 : (kWhole ? 5 : 6), kWhole ? 128 : 64, false, false,
                                    Fit>,
                         Pingpong64Config>>;
};
template <typename T, Schedule S, int C, Epilogue E, GeluFit Fit = GeluFit::Shipped, int Inflight = 1,
          bool Direct = false, bool SmemGelu = false, bool BiasLate = false>
using ConfigFor = typename ConfigSelect<T, S, C, E, Fit, Inflight, Direct, SmemGelu, BiasLate>::type;

namespace {

constexpr int kMaxDevices = 64;
// Sizes beyond this leave no room for a tile's coordinates in TMA's int32 (and the kernel's).
constexpr int64_t kMaxExtent = std::numeric_limits<int32_t>::max() - 1024;

size_t element_size(Sm90GemmType type) { return type == Sm90GemmType::TF32 ? 4 : 2; }

CUtensorMapDataType map_type(Sm90GemmType type) {
  switch (type) {
    case Sm90GemmType::BFloat16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case Sm90GemmType::Float16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case Sm90GemmType::TF32: break;
  }
  return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

/// The tensor map of a row-major [rows, k] matrix with row stride `ld` elements, moved in
/// boxes of [box_rows, 128 bytes] with the 128-byte swizzle; out-of-bounds reads give zeros,
/// out-of-bounds writes are dropped.
CUtensorMap make_map(Sm90GemmType type, const void* base, int64_t k, int64_t rows, int64_t ld, int box_rows) {
  const size_t es = element_size(type);
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * es};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(128 / es), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  CUtensorMap map{};
  const CUresult status = encode_tiled()(&map, map_type(type), 2, const_cast<void*>(base), dims, strides, box,
                                         element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  KILN_CHECK(status == CUDA_SUCCESS,
             "sm90_linear_gelu: cuTensorMapEncodeTiled returned {} for a [{}, {}] operand with row stride {} "
             "(supported() should have declined this call)",
             static_cast<int>(status), rows, k, ld);
  return map;
}

/// What one configuration needs at launch on one device, found once.
struct LaunchInfo {
  int max_clusters = 0;  ///< clusters of Cfg that can be resident at once (the persistent grid)
};

template <class Cfg>
const LaunchInfo& launch_info(int device) {
  static std::array<LaunchInfo, kMaxDevices> infos;
  static std::array<std::once_flag, kMaxDevices> once;
  std::call_once(once[device], [device] {
    LaunchInfo& info = infos[device];
    const auto kernel = linear_gelu_kernel<Cfg>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kDynamicSmem));
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    info.max_clusters = sms / Cfg::kCluster;
    if constexpr (Cfg::kCluster > 1) {
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(static_cast<unsigned>(sms / Cfg::kCluster * Cfg::kCluster));
      config.blockDim = dim3(Cfg::kThreads);
      config.dynamicSmemBytes = Cfg::kDynamicSmem;
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeClusterDimension;
      attribute.val.clusterDim.x = Cfg::kCluster;
      attribute.val.clusterDim.y = 1;
      attribute.val.clusterDim.z = 1;
      config.attrs = &attribute;
      config.numAttrs = 1;
      int clusters = 0;
      CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
      if (clusters > 0) info.max_clusters = std::min(info.max_clusters, clusters);
    }
  });
  return infos[device];
}

/// Whether `device` can run the kernel: compute capability 9.0, a kernel image with the
/// sm_90a body (its static shared memory, the barriers, is absent from an empty body), and
/// cuTensorMapEncodeTiled in the driver; also settles the launch facts (shared-memory limit,
/// resident clusters). Cached per device.
bool device_ready(int device) {
  static std::array<std::atomic<int8_t>, kMaxDevices> state{};  // 0 unknown, 1 yes, 2 no
  int8_t known = state[device].load(std::memory_order_acquire);
  if (known != 0) return known == 1;
  bool ready = false;
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess && major == 9 &&
      minor == 0 && encode_tiled() != nullptr) {
    cudaFuncAttributes attributes{};
    const auto kernel = linear_gelu_kernel<ConfigFor<__nv_bfloat16, Schedule::Cooperative, 1, Epilogue::Registers>>;
    ready = cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess && attributes.sharedSizeBytes > 0;
  }
  (void)cudaGetLastError();
  if (ready) {
    // The launch facts of the configurations the library runs, now rather than at a first
    // launch that might happen during a stream capture.
    try {
      (void)launch_info<ConfigFor<__nv_bfloat16, Schedule::Cooperative, 1, Epilogue::Registers>>(device);
      (void)launch_info<ConfigFor<__half, Schedule::Cooperative, 1, Epilogue::Registers>>(device);
      (void)launch_info<ConfigFor<float, Schedule::Cooperative, 1, Epilogue::Registers>>(device);
      (void)launch_info<ConfigFor<__nv_bfloat16, Schedule::Pingpong64, 1, Epilogue::Registers>>(device);
      (void)launch_info<ConfigFor<__half, Schedule::Pingpong64, 1, Epilogue::Registers>>(device);
      (void)launch_info<ConfigFor<float, Schedule::Pingpong64, 1, Epilogue::Registers>>(device);
    } catch (const Error&) {
      // (e.g. a configuration whose shared memory the device refuses): the call that failed
      // left its error as the runtime's last one; clear it, or the next op's launch check
      // would report it as its own.
      (void)cudaGetLastError();
      ready = false;
    }
  }
  state[device].store(ready ? 1 : 2, std::memory_order_release);
  return ready;
}

}  // namespace

namespace {
/// Whether launches carry the programmatic-dependent-launch attribute (benchmarks switch it off
/// to measure what it saves: sm90_linear_gelu_programmatic_launch_for_testing).
std::atomic<bool> programmatic_launch{true};
}  // namespace

/// Enqueues the kernel in configuration Cfg (args already accepted by supported()).
template <class Cfg>
void launch_config(const Sm90LinearGeluArgs& a, cudaStream_t stream, const Variant& v) {
  const int group_m = v.group_m;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const LaunchInfo& info = launch_info<Cfg>(device);
  const CUtensorMap map_x = make_map(a.type, a.x, a.k, a.m, a.ldx, Cfg::kBlockM);
  const CUtensorMap map_w = make_map(a.type, a.w, a.k, a.n, a.ldw, Cfg::kBlockN / Cfg::kCluster);
  using T = typename Cfg::Element;
  constexpr uintptr_t kPairBytes = 2 * sizeof(T);
  // The staged epilogue needs TMA-compatible outputs (16-byte aligned base and row stride).
  auto tma_ok = [](const void* base, int64_t ld) {
    return base != nullptr && reinterpret_cast<uintptr_t>(base) % 16 == 0 && (ld * 2) % 16 == 0 &&
           ld < (int64_t{1} << 38);
  };
  bool staged = Cfg::kCanStage && tma_ok(a.out, a.ldo) && (a.pre == nullptr || tma_ok(a.pre, a.ldp));
#if defined(KILN_SM90_BENCH_HOOKS)
  staged = staged && !v.force_direct;
#endif
  CUtensorMap map_out{}, map_pre{};
  if (staged) {
    map_out = make_map(a.type, a.out, a.n, a.m, a.ldo, Cfg::kConsumerRows);
    map_pre = a.pre != nullptr ? make_map(a.type, a.pre, a.n, a.m, a.ldp, Cfg::kConsumerRows) : map_out;
  }
  KernelParams p;
  p.staged = staged ? 1u : 0u;
  p.handoff_last = Cfg::kHandoffLast && v.handoff_last ? 1u : 0u;
  p.bias = a.bias;
  p.out = a.out;
  p.pre = a.pre;
  p.ldo = a.ldo;
  p.ldp = a.ldp;
  p.m = static_cast<int32_t>(a.m);
  p.n = static_cast<int32_t>(a.n);
  p.k_blocks = static_cast<int32_t>((a.k + Cfg::kBlockK - 1) / Cfg::kBlockK);
  const int64_t tiles_m = (a.m + Cfg::kBlockM - 1) / Cfg::kBlockM;
  p.units_m = static_cast<int32_t>((tiles_m + Cfg::kCluster - 1) / Cfg::kCluster);
  p.units_n = static_cast<int32_t>((a.n + Cfg::kBlockN - 1) / Cfg::kBlockN);
  p.group_m = std::max(1, group_m);
  p.pair_out = (a.ldo % 2 == 0 && reinterpret_cast<uintptr_t>(a.out) % kPairBytes == 0) ? 1u : 0u;
  p.pair_pre = (a.pre != nullptr && a.ldp % 2 == 0 && reinterpret_cast<uintptr_t>(a.pre) % kPairBytes == 0) ? 1u : 0u;
#if defined(KILN_SM90_BENCH_HOOKS)
  p.bench_skip = v.bench_skip;
  p.bench_timing = v.bench_timing;
  p.bench_tail = v.bench_tail;
#endif
  const int64_t units = static_cast<int64_t>(p.units_m) * p.units_n;
  const int clusters = static_cast<int>(std::min<int64_t>(units, info.max_clusters));

  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(clusters * Cfg::kCluster));
  config.blockDim = dim3(Cfg::kThreads);
  config.dynamicSmemBytes = Cfg::kDynamicSmem;
  config.stream = stream;
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (Cfg::kCluster > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = Cfg::kCluster;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  // Programmatic dependent launch (the kernel waits in griddepcontrol.wait before touching
  // global memory): its CTAs launch and set up while the previous kernel drains.
  if (programmatic_launch.load(std::memory_order_relaxed)) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  config.attrs = attributes;
  config.numAttrs = count;
  CUDA_CHECK(cudaLaunchKernelEx(&config, linear_gelu_kernel<Cfg>, map_x, map_w, map_out, map_pre, p));
}

/// Enqueues the kernel in `variant` for element type T. The library builds only the two
/// configurations it dispatches to (one CTA per cluster, GELU in the consumers chunk by chunk,
/// the shipped GELU fit; 128 x 256 cooperative or, since v7, 64 x 256 ping-pong tiles); the
/// benchmark harness (KILN_SM90_BENCH_HOOKS) also builds the 128-row ping-pong, cluster,
/// offloaded, interleaved and unchunked ones, two wgmma groups in flight, v7's direct stores and
/// staged GELU, the degree-9 fit v5 was measured against and v7's degree-5, v8-v12's and the
/// scaled bfloat16 fits for the shipped configurations (v8's and v13's comparisons;
/// docs/notes/sm90_linear_gelu.md).
template <typename T>
void launch_typed(const Sm90LinearGeluArgs& a, cudaStream_t stream, const Variant& v) {
#if defined(KILN_SM90_BENCH_HOOKS)
  const auto with_epilogue = [&]<Schedule S, int C>() {
    const bool nr9 = v.gelu_fit == GeluFit::Nr9;  // the fit before v5 (Registers* only)
    // (The 64 x 256 ping-pong, new in v6, has no degree-9 build.)
    KILN_CHECK(!(nr9 && S == Schedule::Pingpong64), "sm90_linear_gelu: the 64-row ping-pong has no degree-9 build");
    // (v5-v7's degree-5 fit, v8-v12's (V9) and the scaled bfloat16 one: built for the two shipped
    // configurations, to compare the shipped fit with.)
    const bool other_fit = v.gelu_fit == GeluFit::Degree5 || v.gelu_fit == GeluFit::V9 || v.gelu_fit == GeluFit::Scaled;
    KILN_CHECK(!(other_fit || v.bias_late) || (S != Schedule::Pingpong && C == 1 && v.epilogue == Epilogue::Registers &&
                                               v.inflight == 1 && !v.direct_store && !v.smem_gelu &&
                                               !(other_fit && v.bias_late)),
               "sm90_linear_gelu: GELU fit {} / the bias after the mainloop ({}) are built for the shipped "
               "configurations only, one at a time",
               static_cast<int>(v.gelu_fit), v.bias_late);
    // (Two wgmma groups in flight: built for the chunked epilogue of the 64-row ping-pong and of
    // the cooperative tile, one CTA per cluster, only.)
    KILN_CHECK(v.inflight == 1 || (v.inflight == 2 && v.epilogue == Epilogue::Registers &&
                                   (S == Schedule::Pingpong64 || (S == Schedule::Cooperative && C == 1))),
               "sm90_linear_gelu: no build with {} wgmma groups in flight for this variant", v.inflight);
    // (v7's direct chunk stores and staged GELU: built, one at a time, for the chunked 64-row
    // ping-pong, one CTA per cluster, one wgmma group in flight, only.)
    const bool v7 = v.direct_store || v.smem_gelu;
    KILN_CHECK(!v7 || (S == Schedule::Pingpong64 && C == 1 && v.epilogue == Epilogue::Registers && v.inflight == 1 &&
                       !nr9 && !(v.direct_store && v.smem_gelu)),
               "sm90_linear_gelu: no build with direct stores {} / staged GELU {} for this variant", v.direct_store,
               v.smem_gelu);
    switch (v.epilogue) {
      case Epilogue::Registers:
        if constexpr (S == Schedule::Pingpong64 && C == 1) {
          if (v.direct_store)
            return launch_config<ConfigFor<T, S, C, Epilogue::Registers, GeluFit::Shipped, 1, true, false>>(a, stream,
                                                                                                          v);
          if (v.smem_gelu)
            return launch_config<ConfigFor<T, S, C, Epilogue::Registers, GeluFit::Shipped, 1, false, true>>(a, stream,
                                                                                                          v);
        }
        if constexpr (S != Schedule::Pingpong && C == 1) {
          if (v.gelu_fit == GeluFit::Degree5)
            return launch_config<ConfigFor<T, S, C, Epilogue::Registers, GeluFit::Degree5>>(a, stream, v);
          if (v.gelu_fit == GeluFit::V9)
            return launch_config<ConfigFor<T, S, C, Epilogue::Registers, GeluFit::V9>>(a, stream, v);
          if (v.gelu_fit == GeluFit::Scaled)
            return launch_config<ConfigFor<T, S, C, Epilogue::Registers, GeluFit::Scaled>>(a, stream, v);
          if (v.bias_late)
            return launch_config<ConfigFor<T, S, C, Epilogue::Registers, GeluFit::Shipped, 1, false, false, true>>(
                a, stream, v);
        }
        if constexpr (S != Schedule::Pingpong64)
          if (nr9) return launch_config<ConfigFor<T, S, C, Epilogue::Registers, GeluFit::Nr9>>(a, stream, v);
        if constexpr (S == Schedule::Pingpong64 || (S == Schedule::Cooperative && C == 1))
          if (v.inflight == 2)
            return launch_config<ConfigFor<T, S, C, Epilogue::Registers, GeluFit::Shipped, 2>>(a, stream, v);
        launch_config<ConfigFor<T, S, C, Epilogue::Registers>>(a, stream, v);
        return;
      case Epilogue::RegistersUnchunked:
        if constexpr (S != Schedule::Pingpong64)
          if (nr9) return launch_config<ConfigFor<T, S, C, Epilogue::RegistersUnchunked, GeluFit::Nr9>>(a, stream, v);
        launch_config<ConfigFor<T, S, C, Epilogue::RegistersUnchunked>>(a, stream, v);
        return;
      case Epilogue::RegistersWholeTile:
        launch_config<ConfigFor<T, S, C, Epilogue::RegistersWholeTile>>(a, stream, v);
        return;
      case Epilogue::Offload:
        if constexpr (S != Schedule::Pingpong64) launch_config<ConfigFor<T, S, C, Epilogue::Offload>>(a, stream, v);
        else KILN_CHECK(false, "sm90_linear_gelu: the offloaded epilogue needs the cooperative schedule");
        return;
      case Epilogue::Interleaved:
        if constexpr (S == Schedule::Cooperative)
          launch_config<ConfigFor<T, S, C, Epilogue::Interleaved>>(a, stream, v);
        else
          KILN_CHECK(false, "sm90_linear_gelu: the interleaved epilogue needs the cooperative schedule");
        return;
    }
  };
  if (v.schedule == Schedule::Pingpong) {
    if (v.cluster == 2) with_epilogue.template operator()<Schedule::Pingpong, 2>();
    else with_epilogue.template operator()<Schedule::Pingpong, 1>();
  } else if (v.schedule == Schedule::Pingpong64) {
    if (v.cluster == 2) with_epilogue.template operator()<Schedule::Pingpong64, 2>();
    else with_epilogue.template operator()<Schedule::Pingpong64, 1>();
  } else {
    if (v.cluster == 2) with_epilogue.template operator()<Schedule::Cooperative, 2>();
    else with_epilogue.template operator()<Schedule::Cooperative, 1>();
  }
#else
  KILN_CHECK((v.schedule == Schedule::Cooperative || v.schedule == Schedule::Pingpong64) && v.cluster == 1 &&
                 v.epilogue == Epilogue::Registers && v.gelu_fit == GeluFit::Shipped && v.inflight == 1 &&
                 !v.direct_store && !v.smem_gelu,
             "sm90_linear_gelu: variant (schedule {}, cluster {}, epilogue {}, GELU fit {}, {} wgmma groups in "
             "flight) is built into the benchmark only",
             static_cast<int>(v.schedule), v.cluster, static_cast<int>(v.epilogue), static_cast<int>(v.gelu_fit),
             v.inflight);
  if (v.schedule == Schedule::Pingpong64)
    launch_config<ConfigFor<T, Schedule::Pingpong64, 1, Epilogue::Registers>>(a, stream, v);
  else
    launch_config<ConfigFor<T, Schedule::Cooperative, 1, Epilogue::Registers>>(a, stream, v);
#endif
}

/// Enqueues the kernel in `variant` (the benchmark harness calls this to compare variants).
void launch_variant(const Sm90LinearGeluArgs& a, cudaStream_t stream, const Variant& v) {
  switch (a.type) {
    case Sm90GemmType::BFloat16: launch_typed<__nv_bfloat16>(a, stream, v); return;
    case Sm90GemmType::Float16: launch_typed<__half>(a, stream, v); return;
    case Sm90GemmType::TF32: launch_typed<float>(a, stream, v); return;
  }
}

/// The variant that runs a call (measured choice: docs/notes/sm90_linear_gelu.md).
Variant choose_variant(const Sm90LinearGeluArgs& a) {
  // Measured on an H200 (docs/notes/sm90_linear_gelu.md): 128 x 256 cooperative tiles, one CTA
  // per cluster, GELU in the consumers with half-tile staging and 4 stages was the fastest at
  // every shape above the size threshold, for bf16, f16 and TF32; since v5 each store chunk's
  // GELU runs just before its store, so the second chunk's GELU hides the first chunk's TMA
  // store (7% faster at 4096 x 1024 x 4096 bf16, 5% at 8192 x 4096 x 16384). Clusters of 2
  // (w multicast), the ping-pong schedule, the GELU offloaded to the producer warpgroup's spare
  // warps and the GELU interleaved with the next tile's wgmma were slower. v6's 64 x 256
  // ping-pong was 4% faster at 4096 x 1024 x 4096 but 5% slower at 8192 x 4096 x 16384 and at
  // K = 4096, so not taken; two wgmma groups in flight were slower for both schedules.
  // v7 (runs 9 and 11): the 64 x 256 ping-pong (5 stages, chunked GELU) where it was faster in
  // both runs, K <= 1024 with at least 8 Mi outputs (bf16, f16 and TF32 at 4096 x 1024 x 4096,
  // bf16 at 2048 x 1024 x 4096): its mainloops overlap the other consumer's epilogue; at K = 4096
  // and at 4 Mi outputs it was slower. v8 (run 12, the twelve-instruction GELU): the ping-pong
  // won the interleaved test at K = 2048 and 4096 too, but lost the sustained back-to-back
  // runs at 8192 x 4096 x 16384 (a lower clock under the power cap), so the rule stays.
  Variant v;
  constexpr int64_t kPingpongMinOutputs = int64_t{8} << 20;
  if (a.k <= 1024 && a.m * a.n >= kPingpongMinOutputs) {
    v.schedule = Schedule::Pingpong64;
    v.cluster = 1;
    v.epilogue = Epilogue::Registers;
    return v;
  }
  v.schedule = Schedule::Cooperative;
  v.cluster = 1;
  v.epilogue = Epilogue::Registers;
  return v;
}

}  // namespace sm90

namespace sm90 {

/// Whether the kernel can run the call at all (device, image, TMA constraints, sizes), whatever
/// its speed; sm90_linear_gelu_supported() adds the size below which it does not pay.
bool kernel_accepts(const Sm90LinearGeluArgs& a) {
  if (a.m <= 0 || a.n <= 0 || a.k <= 0 || a.m > sm90::kMaxExtent || a.n > sm90::kMaxExtent ||
      a.k > sm90::kMaxExtent)
    return false;
  if (a.x == nullptr || a.w == nullptr || a.out == nullptr) return false;
  if (a.ldx < a.k || a.ldw < a.k || a.ldo < a.n || (a.pre != nullptr && a.ldp < a.n)) return false;
  // TMA: 16-byte aligned bases and row strides, strides below 2^40 bytes.
  const int64_t es = static_cast<int64_t>(sm90::element_size(a.type));
  constexpr int64_t kMaxStride = (int64_t{1} << 40) / 4;
  if (a.ldx >= kMaxStride || a.ldw >= kMaxStride) return false;
  if ((a.ldx * es) % 16 != 0 || (a.ldw * es) % 16 != 0) return false;
  if (reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || reinterpret_cast<uintptr_t>(a.w) % 16 != 0) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return device >= 0 && device < sm90::kMaxDevices && sm90::device_ready(device);
}

}  // namespace sm90

bool sm90_linear_gelu_supported(const Sm90LinearGeluArgs& a) {
  // Below 4 Mi outputs (fewer 128 x 256 tiles than the H200's 132 multiprocessors), cuBLASLt's
  // smaller tiles and a separate GELU kernel are as fast or faster: measured at M x N = 256 x 4096,
  // K = 1024: 21 us against 12 us; at 1024 x 4096: 22 us against 23.7 us
  // (docs/notes/sm90_linear_gelu.md).
  constexpr int64_t kMinOutputs = int64_t{4} << 20;
  return sm90::kernel_accepts(a) && a.m * a.n >= kMinOutputs;  // (accepted sizes are below 2^31 each)
}

void sm90_linear_gelu(const Sm90LinearGeluArgs& args, cudaStream_t stream) {
  sm90::launch_variant(args, stream, sm90::choose_variant(args));
}

void sm90_linear_gelu_programmatic_launch_for_testing(bool enabled) {
  sm90::programmatic_launch.store(enabled, std::memory_order_relaxed);
}

}  // namespace kiln::cuda_kernels
