// The two halves of side_by_side_cpu: each library's CPU linear and MLP block (Linear
// 1024->4096, exact GELU, Linear 4096->1024), forward without autograd, behind plain functions
// in a translation unit of its own so Kiln's and Torch's headers never meet. Both halves are
// given the same float32 data, so their outputs can be compared element by element.
#pragma once

#include <cstdint>
#include <vector>

namespace side_by_side::cpu {

/// One row's operands, row-major float32: y = x w^T + b (linear), or
/// y = gelu(x w1^T + b1) w2^T + b2 (mlp: w and b are w1, b1; w2 and b2 are empty for linear).
struct Operands {
  int64_t m = 0, k = 0, n = 0, hidden = 0;  // hidden: the MLP's 4096 (0 for linear)
  std::vector<float> x, w, b, w2, b2;
};

/// Kiln: copies the operands into CPU tensors (the previous row's are released).
void kiln_setup(const Operands& ops);
/// One forward of the row on Kiln's CPU path (result discarded but computed).
void kiln_call();
/// The row's output, for the cross-check.
std::vector<float> kiln_output();
/// Runs Kiln's float GEMM tiles on a given oneDNN kernel: "auto" (the library's rule),
/// "primitive", "sgemm" or "sgemm-bias-first" (ops/cpu/onednn_matmul.h); false for another name.
bool kiln_set_tile_kernel(const char* name);
/// Sets the OpenMP team size Kiln's CPU kernels use; returns what Kiln's side then reads.
int kiln_set_threads(int threads);

/// LibTorch: the same (torch::nn::functional::linear and gelu on CPU tensors).
void torch_setup(const Operands& ops);
/// One forward of the row on LibTorch's CPU path.
void torch_call();
/// The row's output.
std::vector<float> torch_output();
/// at::set_num_threads; returns at::get_num_threads().
int torch_set_threads(int threads);
/// LibTorch's version and its CPU GEMM library, one line.
const char* torch_description();

}  // namespace side_by_side::cpu
