// The one kernel CudaGraph launches itself: before a replay, it writes the Philox seed and
// base offset the graph's random kernels read (Note [Random numbers in a CUDA graph],
// tensor/generator.h). A kernel rather than a host-to-device copy, so that the values travel
// as launch arguments and no host buffer must outlive the launch.
#include <cuda_runtime.h>

#include <cstdint>

#include "../core/cuda_check.h"

namespace kiln::graph::detail {

namespace {
__global__ void write_philox_state_kernel(uint64_t* state, uint64_t seed, uint64_t first_block) {
  state[0] = seed;
  state[1] = first_block;
}
}  // namespace

/// Writes {seed, first_block} to `state` on `stream`.
void write_philox_state(uint64_t* state, uint64_t seed, uint64_t first_block, cudaStream_t stream) {
  write_philox_state_kernel<<<1, 1, 0, stream>>>(state, seed, first_block);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace kiln::graph::detail
