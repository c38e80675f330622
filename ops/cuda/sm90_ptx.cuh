// The Hopper PTX the sm_90a kernels (linear+GELU, the wgmma skinny GEMM) are built from, one
// thin inline-asm wrapper each: mbarriers (the pipeline's full/empty handshakes), TMA tensor
// loads (plain and multicast to a CTA cluster), wgmma's fence/commit/wait and its shared-memory
// matrix descriptor, setmaxnreg, the cluster barrier (whole, or arrive and wait apart), GPU-scope
// acquire/release and the global proxy fence, and programmatic dependent launch's controls. Written from the PTX ISA; the wrappers only exist in the sm_90a device pass
// (KILN_SM90A_DEVICE), where every instruction here is legal, so the kernels that use them
// compile to empty bodies anywhere else.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KILN_SM90A_DEVICE 1
#endif

namespace kiln::cuda_kernels::sm90 {

#if defined(KILN_SM90A_DEVICE)

/// The shared-memory (CTA window) address of a generic pointer into shared memory.
__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers ----------------------------------------------------------------------------

/// Initialises the mbarrier at `bar` to expect `count` arrivals per phase.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

/// Makes the initialised mbarriers visible to the async proxy and the rest of the cluster.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/// One arrival that also announces `bytes` of transactions (the TMA loads of one stage).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

/// One arrival on this CTA's mbarrier.
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/// One arrival on the mbarrier at the same offset in cluster CTA `cta`. (Default semantics,
/// as CUTLASS's pipelines: what it releases is shared memory the arriving warpgroup's wgmma
/// has finished reading, which wgmma.wait_group already guarantees; a .release.cluster arrive
/// would also fence the thread's earlier global stores, at a cost on every k block.)
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t bar, uint32_t cta) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}

/// Spins until the phase of parity `parity` of the mbarrier at `bar` has completed.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

// ---- TMA ----------------------------------------------------------------------------------

/// Pulls the tensor map at `map` (a __grid_constant__ parameter) into the descriptor cache.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

/// Loads the box at (c0, c1) (innermost coordinate first) of `map` into shared memory at
/// `dst`, completing `bytes` of transactions on the mbarrier `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int32_t c0,
                                            int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

/// tma_load_2d into the same offset `dst` of every CTA in `cta_mask`, each completing on its
/// own mbarrier at offset `bar`.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, uint32_t bar, int32_t c0,
                                                      int32_t c1, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
}

/// Stores the box at (c0, c1) of `map` from shared memory at `src` (128B-swizzled like the
/// loads); out-of-bounds rows and columns are not written. Completes as a bulk group.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, uint32_t src, int32_t c0, int32_t c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
}

/// Closes the group of bulk stores issued since the last commit.
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

/// Waits until the committed bulk stores have read their shared memory (it may be reused).
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

/// Waits until at most the `N` most recently committed bulk-store groups of this thread may
/// still be reading their shared memory (all older groups have read theirs).
template <int N>
__device__ __forceinline__ void bulk_wait_group_read_n() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/// Waits until the committed bulk stores have completed.
__device__ __forceinline__ void bulk_wait_group() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

/// Makes this thread's ordinary shared-memory writes visible to the async proxy (TMA).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/// Orders this thread's generic-proxy global accesses with its async-proxy (TMA) ones.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }

/// A 32-bit load with acquire semantics at GPU scope.
__device__ __forceinline__ uint32_t load_acquire_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/// Adds v to *p with release semantics at GPU scope (the CTA's writes before a barrier that
/// this thread passed are ordered before the addition).
__device__ __forceinline__ void red_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/// Named barrier `id` over `threads` threads (a warpgroup: 128).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/// stmatrix .x4: four 8x8 b16 matrices from the mma fragment layout (lane t holds row t/4,
/// columns 2(t%4), 2(t%4)+1 of each, packed in r0..r3); lane l gives the shared-memory address
/// of row l%8 of matrix l/8.
__device__ __forceinline__ void stmatrix_x4(uint32_t address, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

/// One float to / from shared memory at `address`.
__device__ __forceinline__ void st_shared_f32(uint32_t address, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(address), "f"(v) : "memory");
}
__device__ __forceinline__ float ld_shared_f32(uint32_t address) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(address) : "memory");
  return v;
}

/// 16 bytes from / to shared memory at `address`.
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(address));
  return v;
}
__device__ __forceinline__ void st_shared_v4(uint32_t address, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// ---- wgmma --------------------------------------------------------------------------------

/// Orders this warpgroup's register accesses before the wgmma instructions that follow.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

/// Closes the group of wgmma instructions issued since the last commit.
__device__ __forceinline__ void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

/// Waits until at most `N` committed wgmma groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/// Keeps the compiler from moving accesses to an accumulator register across this point
/// (the wgmma instructions read and write it asynchronously).
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

/// The wgmma descriptor of a K-major operand tile in shared memory laid out by TMA's
/// 128-byte swizzle: rows of 128 bytes, 8-row groups 1024 bytes apart (stride byte offset),
/// the leading byte offset unused by swizzled K-major layouts, layout type 1 (128B swizzle).
/// `address` is the tile's first row, 1024-byte aligned; adding 2 (32 bytes) per k step
/// walks along K inside the swizzle atom.
__device__ __forceinline__ uint64_t smem_descriptor_sw128(uint32_t address) {
  return static_cast<uint64_t>((address & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

// ---- registers and clusters -----------------------------------------------------------------

/// Raises this warpgroup's register allocation to R per thread.
template <int R>
__device__ __forceinline__ void setmaxnreg_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}

/// Lowers this warpgroup's register allocation to R per thread, freeing the rest for others.
template <int R>
__device__ __forceinline__ void setmaxnreg_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}

/// This CTA's rank in its cluster.
__device__ __forceinline__ uint32_t cluster_cta_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

/// Every thread of every CTA in the cluster arrives and waits (release/acquire).
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}

// ---- programmatic dependent launch ---------------------------------------------------------

/// Waits until the grids this one depends on programmatically have completed and their memory
/// is visible (returns at once in a grid launched without the programmatic attribute).
__device__ __forceinline__ void griddepcontrol_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

/// Lets the grid launched after this one with the programmatic attribute start (its CTAs then
/// run up to their griddepcontrol_wait); a no-op without such a dependent.
__device__ __forceinline__ void griddepcontrol_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

#endif  // KILN_SM90A_DEVICE

/// This thread's arrival on the cluster barrier, with release semantics (its reads of the other
/// CTAs' shared memory are done); pairs with cluster_wait_acquire. Not .aligned: threads arrive
/// when their own reads are done. Outside the sm_90a guard, as the portable skinny kernel's
/// clusters use it on every architecture that has clusters (nothing before sm_90, where the
/// host launches none).
__device__ __forceinline__ void cluster_arrive_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release;" ::: "memory");
#endif
}

/// Waits until every thread of the cluster has arrived (cluster_arrive_release), with acquire
/// semantics.
__device__ __forceinline__ void cluster_wait_acquire() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
#endif
}

/// The GPU's global nanosecond timer (one clock for every SM; benchmarks' in-kernel stamps).
/// Legal on every architecture, so outside the sm_90a guard.
__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace kiln::cuda_kernels::sm90
