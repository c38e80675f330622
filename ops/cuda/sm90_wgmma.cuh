// The wgmma.mma_async instructions of the sm_90a linear+GELU kernel and the sm_90a skinny GEMM:
// D[64 x N] (+)= A[64 x k] B[N x k]^T with A and B both K-major in shared memory (described by
// smem_descriptor_sw128), fp32 accumulators in registers, for bf16 and f16 (k = 16) and TF32
// (k = 8, fp32 storage), N = 128 or 256; and, 16-bit only, the narrow N = 16, 32, 64 of the
// skinny GEMM (whose N is the batch). Each instruction names all N/2 accumulator registers of a thread, so the
// operand lists are spelled out by the macros below. scale_d = 0 overwrites D (the first k
// step of a tile), 1 accumulates. sm_90a device pass only (sm90_ptx.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "sm90_ptx.cuh"

namespace kiln::cuda_kernels::sm90 {

#if defined(KILN_SM90A_DEVICE)

// The accumulator operands "+f"(d[i]) ... of one instruction.
#define KILN_WGMMA_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define KILN_WGMMA_D8(i) KILN_WGMMA_D4(i), KILN_WGMMA_D4(i + 4)
#define KILN_WGMMA_D16(i) KILN_WGMMA_D4(i), KILN_WGMMA_D4(i + 4), KILN_WGMMA_D4(i + 8), KILN_WGMMA_D4(i + 12)
#define KILN_WGMMA_D32(i) KILN_WGMMA_D16(i), KILN_WGMMA_D16(i + 16)
#define KILN_WGMMA_D64(i) KILN_WGMMA_D16(i), KILN_WGMMA_D16(i + 16), KILN_WGMMA_D16(i + 32), KILN_WGMMA_D16(i + 48)
#define KILN_WGMMA_D128 KILN_WGMMA_D64(0), KILN_WGMMA_D64(64)

// Their names in the instruction text.
#define KILN_WGMMA_REGS_8 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define KILN_WGMMA_REGS_16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define KILN_WGMMA_REGS_32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
  " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define KILN_WGMMA_REGS_64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
  " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
  " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
  " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define KILN_WGMMA_REGS_128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
  " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
  " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
  " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63," \
  " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79," \
  " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95," \
  " %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111," \
  " %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

// One instruction: SHAPE_TYPES is "m64n<N>k<k>.f32.<a>.<b>", TAIL the immediate operands after
// the scale-d predicate (scale-a, scale-b, and for 16-bit inputs transpose-a, transpose-b).
#define KILN_WGMMA_ASM(SHAPE_TYPES, REGS, A, B, S, TAIL) \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " S ", 0;\nwgmma.mma_async.sync.aligned." SHAPE_TYPES " " REGS ", " A ", " B \
  ", p" TAIL ";\n}\n"

/// One m64nNk16 wgmma of 16-bit element type T with a narrow N (16, 32 or 64) from shared
/// memory: d (this thread's N/2 accumulators) = A B^T (+ d when scale_d is 1).
template <int N, typename T>
__device__ __forceinline__ void wgmma_m64_narrow(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                                 uint32_t scale_d) {
  static_assert(N == 16 || N == 32 || N == 64, "wgmma_m64_narrow: N is 16, 32 or 64");
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                "wgmma_m64_narrow: T is __nv_bfloat16 or __half");
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (N == 16 && kBf16) {
    asm volatile(KILN_WGMMA_ASM("m64n16k16.f32.bf16.bf16", KILN_WGMMA_REGS_8, "%8", "%9", "%10", ", 1, 1, 0, 0")
                 : KILN_WGMMA_D8(0)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (N == 16) {
    asm volatile(KILN_WGMMA_ASM("m64n16k16.f32.f16.f16", KILN_WGMMA_REGS_8, "%8", "%9", "%10", ", 1, 1, 0, 0")
                 : KILN_WGMMA_D8(0)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (N == 32 && kBf16) {
    asm volatile(KILN_WGMMA_ASM("m64n32k16.f32.bf16.bf16", KILN_WGMMA_REGS_16, "%16", "%17", "%18", ", 1, 1, 0, 0")
                 : KILN_WGMMA_D16(0)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (N == 32) {
    asm volatile(KILN_WGMMA_ASM("m64n32k16.f32.f16.f16", KILN_WGMMA_REGS_16, "%16", "%17", "%18", ", 1, 1, 0, 0")
                 : KILN_WGMMA_D16(0)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (kBf16) {
    asm volatile(KILN_WGMMA_ASM("m64n64k16.f32.bf16.bf16", KILN_WGMMA_REGS_32, "%32", "%33", "%34", ", 1, 1, 0, 0")
                 : KILN_WGMMA_D32(0)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else {
    asm volatile(KILN_WGMMA_ASM("m64n64k16.f32.f16.f16", KILN_WGMMA_REGS_32, "%32", "%33", "%34", ", 1, 1, 0, 0")
                 : KILN_WGMMA_D32(0)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
}

/// One m64nNk wgmma of element type T (__nv_bfloat16, __half, or float as TF32) from shared
/// memory: d (this thread's N/2 accumulators) = A B^T (+ d when scale_d is 1).
template <int N, typename T>
__device__ __forceinline__ void wgmma_m64(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, uint32_t scale_d) {
  static_assert(N == 128 || N == 256, "wgmma_m64: N is 128 or 256");
  if constexpr (N == 128 && std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(KILN_WGMMA_ASM("m64n128k16.f32.bf16.bf16", KILN_WGMMA_REGS_64, "%64", "%65", "%66", ", 1, 1, 0, 0")
                 : KILN_WGMMA_D64(0)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (N == 128 && std::is_same_v<T, __half>) {
    asm volatile(KILN_WGMMA_ASM("m64n128k16.f32.f16.f16", KILN_WGMMA_REGS_64, "%64", "%65", "%66", ", 1, 1, 0, 0")
                 : KILN_WGMMA_D64(0)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (N == 128 && std::is_same_v<T, float>) {
    asm volatile(KILN_WGMMA_ASM("m64n128k8.f32.tf32.tf32", KILN_WGMMA_REGS_64, "%64", "%65", "%66", ", 1, 1")
                 : KILN_WGMMA_D64(0)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (N == 256 && std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(KILN_WGMMA_ASM("m64n256k16.f32.bf16.bf16", KILN_WGMMA_REGS_128, "%128", "%129", "%130", ", 1, 1, 0, 0")
                 : KILN_WGMMA_D128
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (N == 256 && std::is_same_v<T, __half>) {
    asm volatile(KILN_WGMMA_ASM("m64n256k16.f32.f16.f16", KILN_WGMMA_REGS_128, "%128", "%129", "%130", ", 1, 1, 0, 0")
                 : KILN_WGMMA_D128
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else {
    static_assert(std::is_same_v<T, float>, "wgmma_m64: T is __nv_bfloat16, __half or float (TF32)");
    asm volatile(KILN_WGMMA_ASM("m64n256k8.f32.tf32.tf32", KILN_WGMMA_REGS_128, "%128", "%129", "%130", ", 1, 1")
                 : KILN_WGMMA_D128
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
}

#undef KILN_WGMMA_ASM
#undef KILN_WGMMA_REGS_128
#undef KILN_WGMMA_REGS_64
#undef KILN_WGMMA_REGS_32
#undef KILN_WGMMA_REGS_16
#undef KILN_WGMMA_REGS_8
#undef KILN_WGMMA_D128
#undef KILN_WGMMA_D64
#undef KILN_WGMMA_D32
#undef KILN_WGMMA_D16
#undef KILN_WGMMA_D8
#undef KILN_WGMMA_D4

#endif  // KILN_SM90A_DEVICE

}  // namespace kiln::cuda_kernels::sm90
