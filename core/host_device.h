// KILN_HOST_DEVICE marks small functions that CPU code and CUDA kernels share (Philox, the
// integer power): __host__ __device__ under nvcc, nothing for the plain C++ compiler.
#pragma once

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif
