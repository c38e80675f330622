// The list of Kiln's ops: one X(name) per OpDesc (op_record.h). It gives every op its id
// (OpId::name) and declares its descriptor, op::name, which ops/records/<family>.cpp
// defines. Adding an op adds one line here (ops/README.md lists the rest).
#pragma once

#include "op_record.h"

// clang-format off
#define KILN_FOR_EACH_OP(X)                                                                       \
  /* binary (ops/records/binary.cpp) */                                                            \
  X(add) X(sub) X(mul) X(div) X(pow) X(eq) X(ne) X(lt) X(le) X(gt) X(ge) X(where)                   \
  X(equal) X(allclose)                                                                            \
  /* unary (ops/records/unary.cpp) */                                                              \
  X(neg) X(exp) X(log) X(sqrt) X(rsqrt) X(abs) X(tanh) X(sigmoid) X(relu) X(gelu) X(silu)         \
  X(gelu_backward) X(clamp) X(clamp_) X(clamp_min) X(clamp_max) X(dropout)                        \
  X(masked_fill) X(masked_fill_)                                                                  \
  /* reductions, softmax, normalisation, losses (ops/records/reduce.cpp) */                        \
  X(sum) X(mean) X(max) X(min) X(amax) X(amin) X(argmax) X(argmin)                                \
  X(softmax) X(log_softmax) X(layer_norm) X(nll_loss) X(cross_entropy) X(mse_loss)                \
  X(_nll_loss_forward) X(_nll_loss_backward) X(_cross_entropy_forward) X(_cross_entropy_backward)   \
  /* matrix products (ops/records/matmul.cpp) */                                                   \
  X(matmul) X(mm) X(addmm) X(linear)                                                              \
  /* fused ops (ops/records/fused.cpp) */                                                          \
  X(fused_linear_gelu) X(fused_linear_gelu_backward)                                              \
  /* views (ops/records/views.cpp) */                                                              \
  X(view) X(reshape) X(transpose) X(t) X(permute) X(narrow) X(slice) X(select) X(unsqueeze)       \
  X(squeeze) X(expand) X(as_strided) X(detach)                                                    \
  /* joining and indexing (ops/records/indexing.cpp) */                                            \
  X(cat) X(stack) X(index_select) X(gather) X(scatter) X(scatter_) X(scatter_add) X(scatter_add_) \
  X(embedding)                                                                                    \
  /* copies and transfers (ops/records/copy.cpp) */                                                \
  X(copy_) X(clone) X(contiguous) X(to) X(_to_copy) X(item) X(_local_scalar_dense) X(to_vector)   \
  X(pin_memory) X(_pin_memory) X(record_stream)                                                   \
  /* factories and fills (ops/records/factory.cpp) */                                              \
  X(empty) X(zeros) X(ones) X(full) X(eye) X(arange) X(rand) X(randn) X(from_vector) X(tensor)    \
  X(fill_) X(zero_) X(uniform_) X(normal_)                                                       \
  /* optimizer steps (ops/records/optimizer.cpp) */                                                \
  X(_fused_sgd_) X(_fused_adam_) X(_fused_adamw_)
// clang-format on

namespace kiln {

/// Every op's id, in list order.
enum class OpId : uint16_t {
#define KILN_OP_ID(name) name,
  KILN_FOR_EACH_OP(KILN_OP_ID)
#undef KILN_OP_ID
      kCount
};

/// The descriptors (op::add, op::linear, ...).
namespace op {
#define KILN_OP_DECLARE(name) extern const OpDesc name;
KILN_FOR_EACH_OP(KILN_OP_DECLARE)
#undef KILN_OP_DECLARE
}  // namespace op

}  // namespace kiln
