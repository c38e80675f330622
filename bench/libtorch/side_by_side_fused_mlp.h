// The two halves of side_by_side_fused_mlp: each library's MLP block (Linear 1024->4096, GELU,
// Linear 4096->1024, forward only, no autograd) behind plain functions in a translation unit
// of its own, so Kiln's and Torch's headers never meet. Every half holds `sets` independent
// weight sets and inputs, so a benchmark can rotate through them and L2 never holds the one a
// call reads.
#pragma once

#include <cstdint>
#include <string>

namespace side_by_side::mlp {

/// Kiln's variants of one block call (FusedNoPdl: Fused with the sm_90a linear+GELU kernel
/// launched without programmatic dependent launch, to measure what that saves).
enum class KilnVariant { Eager, Fused, FusedCudaGraph, FusedNoPdl };
/// LibTorch's variants: linear, gelu, linear; _addmm_activation (cuBLASLt's GELU epilogue) then
/// addmm; and the eager block replayed as a CUDA graph (at::cuda::CUDAGraph).
enum class TorchVariant { Eager, AddmmActivation, CudaGraph };

/// Kiln: `sets` blocks and inputs [batch, 1024] on cuda:0 in `dtype` ("bfloat16", "float32",
/// "tf32"), exact GELU; captures, fuses and compiles each (interpreter and CUDA graph).
void kiln_setup(const std::string& dtype, int64_t batch, int sets);
/// One block call of `variant` on weight set `set` (queued, not synchronised). The CUDA-graph
/// variant is given its static input, so a call is one graph launch and no input copy.
void kiln_call(KilnVariant variant, int set);
/// Max relative error (norm-wise) of the fused and CUDA-graph outputs against Kiln eager, set 0.
double kiln_check();
/// Releases Kiln's blocks.
void kiln_teardown();

/// LibTorch: the same shapes and dtype (torch::nn::functional calls on plain tensors).
void torch_setup(const std::string& dtype, int64_t batch, int sets);
/// One block call of `variant` on weight set `set` (queued, not synchronised).
void torch_call(TorchVariant variant, int set);
/// Releases LibTorch's blocks and graphs.
void torch_teardown();
/// LibTorch's version string.
const char* torch_version_string();

}  // namespace side_by_side::mlp
