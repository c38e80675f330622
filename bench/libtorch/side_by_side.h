// The two halves of side_by_side_cuda_overhead: each library's calls live in a translation
// unit of its own (Kiln's and Torch's headers never meet), behind these plain functions.
#pragma once

#include <cstdint>

namespace side_by_side {

/// Creates Kiln's 1-element float32 operands on cuda:0.
void kiln_setup();
/// One kiln::add(a, b) on cuda:0, result discarded.
void kiln_add();
/// One kiln::empty({1}, cuda:0), discarded.
void kiln_empty();
/// Releases Kiln's operands.
void kiln_teardown();

/// Creates LibTorch's 1-element float32 operands on cuda:0.
void torch_setup();
/// One at::add(a, b) on cuda:0, result discarded.
void torch_add();
/// One at::empty({1}, cuda:0), discarded.
void torch_empty();
/// Releases LibTorch's operands.
void torch_teardown();
/// Kiln: x [m, k], weight [n, k], bias [n] on cuda:0 in `mode` ("float32", "tf32" or
/// "bfloat16"; tf32 turns set_allow_tf32 on, the others off).
void kiln_linear_setup(const char* mode, int64_t m, int64_t k, int64_t n);
/// One kiln::linear(x, weight, bias), result discarded.
void kiln_linear();
/// LibTorch: the same operands and mode (allowTF32CuBLAS for tf32).
void torch_linear_setup(const char* mode, int64_t m, int64_t k, int64_t n);
/// One at::linear(x, weight, bias), result discarded.
void torch_linear();

/// LibTorch's version string.
const char* torch_version();

}  // namespace side_by_side
