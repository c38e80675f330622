// The cost functions of op_cost.h.
#include "op_cost.h"

#include "matmul.h"

namespace kiln {

namespace {

double bytes_of(const Tensor& t) { return static_cast<double>(t.nbytes()); }

// The arithmetic of the call's FLOPs: the dtype of its first floating input, TF32 for a
// float32 matrix product on CUDA while allow_tf32() (cuBLASLt's FAST_TF32 compute type).
MathKind math_of(const OpCall& call, bool gemm) {
  for (const Tensor* t : call.inputs) {
    if (t == nullptr || !t->defined() || !t->is_floating_point()) continue;
    switch (t->dtype()) {
      case DType::Float64:
        return MathKind::Float64;
      case DType::Float16:
      case DType::BFloat16:
        return MathKind::Half;
      case DType::Float32:
        return t->is_cuda() && gemm && allow_tf32() ? MathKind::TF32 : MathKind::Float32;
      default:
        return MathKind::None;
    }
  }
  return MathKind::None;
}

double out_elements(const OpCall& call) {
  return call.outputs.empty() || !call.outputs[0].defined() ? 0.0 : static_cast<double>(call.outputs[0].numel());
}

const Tensor* input(const OpCall& call, size_t i) {
  return i < call.inputs.size() && call.inputs[i] != nullptr && call.inputs[i]->defined() ? call.inputs[i] : nullptr;
}

OpCost with_flops(const OpCall& call, double flops, bool gemm = false) {
  OpCost c = cost::bytes_only(call);
  if (call.outputs.empty() || !call.outputs[0].defined()) return c;
  c.flops = flops;
  if (c.flops > 0) c.math = math_of(call, gemm);
  return c;
}

OpCost gemm_at(const OpCall& call, size_t slot) {
  const Tensor* a = input(call, slot);
  const double k = a != nullptr && a->dim() >= 1 ? static_cast<double>(a->size(-1)) : 0.0;
  return with_flops(call, 2.0 * out_elements(call) * k, true);
}

}  // namespace

OpCost op_cost(const OpCall& call) { return call.op->cost != nullptr ? call.op->cost(call) : cost::bytes_only(call); }

namespace cost {

OpCost bytes_only(const OpCall& call) {
  OpCost c;
  for (const Tensor* t : call.inputs)
    if (t != nullptr && t->defined()) c.bytes += bytes_of(*t);
  for (const Tensor& t : call.outputs)
    if (t.defined()) c.bytes += bytes_of(t);
  return c;
}

OpCost none(const OpCall&) { return {}; }
OpCost elementwise(const OpCall& call) { return with_flops(call, out_elements(call)); }
OpCost reduction(const OpCall& call) {
  const Tensor* x = input(call, 0);
  return with_flops(call, x != nullptr ? static_cast<double>(x->numel()) : 0.0);
}
OpCost softmax(const OpCall& call) { return with_flops(call, 5.0 * out_elements(call)); }
OpCost layer_norm(const OpCall& call) { return with_flops(call, 8.0 * out_elements(call)); }
OpCost gemm(const OpCall& call) { return gemm_at(call, 0); }
OpCost addmm(const OpCall& call) { return gemm_at(call, 1); }
OpCost linear_gelu(const OpCall& call) {
  const Tensor* x = input(call, 0);
  const double k = x != nullptr && x->dim() >= 1 ? static_cast<double>(x->size(-1)) : 0.0;
  return with_flops(call, (2.0 * k + 1.0) * out_elements(call), true);
}
OpCost linear_gelu_backward(const OpCall& call) {
  OpCost c = bytes_only(call);
  const Tensor* grad = input(call, 0);
  const Tensor* x = input(call, 1);
  if (grad == nullptr || x == nullptr || x->dim() < 1) return c;
  const double mn = static_cast<double>(grad->numel()), k = static_cast<double>(x->size(-1));
  auto computed = [&](size_t j) { return j < call.outputs.size() && call.outputs[j].defined(); };
  c.flops = mn;
  if (computed(0)) c.flops += 2.0 * mn * k;
  if (computed(1)) c.flops += 2.0 * mn * k;
  if (computed(2)) c.flops += mn;
  if (c.flops > 0) c.math = math_of(call, true);
  return c;
}
OpCost scatter_add(const OpCall& call) {
  const Tensor* index = input(call, 1);
  return with_flops(call, index != nullptr ? static_cast<double>(index->numel()) : 0.0);
}

}  // namespace cost

}  // namespace kiln
