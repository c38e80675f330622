// The two halves of side_by_side_adamw: each library's optimizer step over the 4-layer MLP's
// parameters (1024-4096-1024-4096-10, float32, on cuda:0, random gradients) behind plain
// functions, in translation units of their own (Kiln's and Torch's headers never meet).
#pragma once

#include <cstdint>

namespace side_by_side::adamw {

/// Kiln: the MLP's parameters with gradients, an optim::AdamW over them, and a second copy
/// with its own state for the per-parameter form.
void kiln_setup();
/// optim::AdamW::step(): one multi-tensor launch for the 8 tensors.
void kiln_multi_tensor_step();
/// The same update as 8 per-parameter _fused_adamw_ calls.
void kiln_per_parameter_step();
/// Number of parameters (elements).
int64_t kiln_numel();
/// Releases Kiln's tensors (its GPU cache is emptied).
void kiln_teardown();

/// LibTorch: the same parameters, state and gradients.
void torch_setup();
/// What torch.optim.AdamW(fused=True).step() runs: _foreach_add_ on the device step
/// counts, then one at::_fused_adamw_ over the 8 tensors.
void torch_fused_step();
/// LibTorch's C++ frontend: torch::optim::AdamW::step() (a loop of ops per parameter).
void torch_frontend_step();
/// Releases LibTorch's tensors (its GPU cache is emptied).
void torch_teardown();

/// LibTorch's version string.
const char* torch_version_string();

}  // namespace side_by_side::adamw
