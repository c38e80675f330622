// op_cost(): the FLOP and byte conventions of op_cost.h, by op name, and the arithmetic
// (MathKind) those FLOPs run in, which picks the device ceiling the roofline compares against.
#include "op_cost.h"

#include <cstring>
#include <string_view>

#include "../ops/matmul.h"

namespace kiln::profiler {

namespace {

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names)
    if (name == n) return true;
  return false;
}

double bytes_of(const Tensor& t) { return static_cast<double>(t.nbytes()); }

// The arithmetic of op `name`'s FLOPs: the dtype of its first floating input, TF32 for a
// float32 matrix product on CUDA while allow_tf32() (cuBLASLt's FAST_TF32 compute type).
MathKind math_of(std::string_view name, std::span<const Tensor* const> inputs) {
  for (const Tensor* t : inputs) {
    if (t == nullptr || !t->defined() || !t->is_floating_point()) continue;
    switch (t->dtype()) {
      case DType::Float64:
        return MathKind::Float64;
      case DType::Float16:
      case DType::BFloat16:
        return MathKind::Half;
      case DType::Float32:
        return t->is_cuda() && allow_tf32() && one_of(name, {"mm", "matmul", "addmm"}) ? MathKind::TF32
                                                                                       : MathKind::Float32;
      default:
        return MathKind::None;
    }
  }
  return MathKind::None;
}

}  // namespace

OpCost op_cost(const char* op, std::span<const Tensor* const> inputs, std::span<const Tensor> outputs) {
  const std::string_view name(op);
  OpCost cost;
  // Views alias their input: nothing is read or written. linear's work is its child's
  // (addmm or matmul), counted there.
  if (one_of(name, {"view", "reshape", "expand", "as_strided", "narrow", "select", "slice", "squeeze", "unsqueeze",
                    "permute", "transpose", "t", "linear"}))
    return cost;
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined()) cost.bytes += bytes_of(*t);
  for (const Tensor& t : outputs)
    if (t.defined()) cost.bytes += bytes_of(t);
  if (outputs.empty() || !outputs[0].defined()) return cost;
  const double out_elements = static_cast<double>(outputs[0].numel());
  const Tensor* first = inputs.empty() ? nullptr : inputs[0];

  if (one_of(name, {"mm", "matmul", "addmm"})) {
    // addmm(bias, mat1, mat2): the first matrix is the second input.
    const Tensor* a = name == "addmm" ? (inputs.size() > 1 ? inputs[1] : nullptr) : first;
    if (a != nullptr && a->defined() && a->dim() >= 1)
      cost.flops = 2.0 * out_elements * static_cast<double>(a->size(-1));
  } else if (one_of(name, {"add", "sub", "mul",  "div",   "pow",  "neg",     "abs",   "relu",
                           "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu",  "gelu",
                           "eq",  "ne",  "lt",   "le",    "gt",   "ge",      "where", "dropout",
                           "clamp", "clamp_", "clamp_min", "clamp_max"})) {
    cost.flops = out_elements;
  } else if (one_of(name, {"sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin"})) {
    cost.flops = first != nullptr && first->defined() ? static_cast<double>(first->numel()) : 0.0;
  } else if (one_of(name, {"scatter_add", "scatter_add_"})) {
    // One addition per index element (inputs: self, index, src).
    const Tensor* index = inputs.size() > 1 ? inputs[1] : nullptr;
    cost.flops = index != nullptr && index->defined() ? static_cast<double>(index->numel()) : 0.0;
  } else if (one_of(name, {"softmax", "log_softmax"})) {
    cost.flops = 5.0 * out_elements;
  } else if (name == "layer_norm") {
    cost.flops = 8.0 * out_elements;
  }
  if (cost.flops > 0) cost.math = math_of(name, inputs);
  return cost;
}

}  // namespace kiln::profiler
