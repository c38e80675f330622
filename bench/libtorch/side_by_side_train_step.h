// The two halves of side_by_side_train_step: each library's training step behind plain
// functions in a translation unit of its own (Kiln's and Torch's headers never meet).
#pragma once

#include <cstdint>
#include <vector>

namespace side_by_side::train {

/// Kiln: the MLP `sizes` (GELU between layers) on cuda:0, float32 without TF32, AdamW
/// (PyTorch's defaults), a random batch of `batch` rows and class targets.
void kiln_setup(const std::vector<int64_t>& sizes, int64_t batch);
/// One training step: zero_grad, forward, cross_entropy, backward, AdamW step (queued, not synchronised).
void kiln_step();
/// From now on kiln_step() runs the compiled step: forward captured and fused
/// (graph::fuse_linear_gelu), the whole step replayed as one CUDA graph (graph::compile).
void kiln_compile();
/// The last step's loss (synchronises).
double kiln_loss();
/// Releases Kiln's model and data.
void kiln_teardown();

/// LibTorch's C++ frontend: the same model, data and optimizer (torch::optim::AdamW).
void torch_setup(const std::vector<int64_t>& sizes, int64_t batch);
/// One training step, as Kiln's.
void torch_step();
/// The last step's loss (synchronises).
double torch_loss();
/// Releases LibTorch's model and data.
void torch_teardown();
/// LibTorch's version string.
const char* torch_version_string();

}  // namespace side_by_side::train
