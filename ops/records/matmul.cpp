// Op records of the matrix products: matmul, mm, addmm and linear (composite: its addmm or
// mm records the backward, so a linear layer shows AddmmBackward0 as in PyTorch).
#include "record_util.h"

namespace kiln {

namespace {

using namespace records;

constexpr const char* kPair[] = {"self", "other"};
constexpr const char* kMm[] = {"self", "mat2"};
constexpr const char* kAddmm[] = {"self", "mat1", "mat2"};
constexpr const char* kLinear[] = {"input", "weight", "bias"};
constexpr AttrSpec kAddmmAttrs[] = {{"beta", AttrKind::Scalar}, {"alpha", AttrKind::Scalar}};

std::vector<Tensor> replay_matmul(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  if (&op == &op::mm) return one(mm(inputs[0], inputs[1]));
  if (&op == &op::addmm) return one(addmm(inputs[0], inputs[1], inputs[2], attr_scalar(attrs, 0), attr_scalar(attrs, 1)));
  if (&op == &op::linear) return one(linear(inputs[0], inputs[1], in(inputs, 2)));
  return one(matmul(inputs[0], inputs[1]));
}

// matmul with PyTorch's 1-D rules: a vector operand is a matrix with one row (a) or one
// column (b); the gradient is computed on the matrices and the engine sums broadcast batch
// dims back down to each operand's shape.
std::vector<Tensor> matmul_backward(const BackwardArgs& a) {
  auto g = grads(2);
  const Tensor& x = a.inputs[0];
  const Tensor& y = a.inputs[1];
  const Tensor xm = x.dim() == 1 ? x.unsqueeze(0) : x;
  const Tensor ym = y.dim() == 1 ? y.unsqueeze(1) : y;
  Tensor go = grad0(a);
  if (x.dim() == 1) go = go.unsqueeze(go.dim() == 0 || y.dim() == 1 ? 0 : -2);
  if (y.dim() == 1) go = go.unsqueeze(-1);
  if (a.needs_grad[0]) {
    Tensor gx = matmul(go, ym.transpose(-1, -2));
    if (x.dim() == 1) gx = gx.squeeze(-2);
    g[0] = gx;
  }
  if (a.needs_grad[1]) {
    Tensor gy = matmul(xm.transpose(-1, -2), go);
    if (y.dim() == 1) gy = gy.squeeze(-1);
    g[1] = gy;
  }
  return g;
}

// mat1^T g, the gradient of mat2 in mat1 @ mat2. When mat2 is a transposed contiguous matrix
// (linear's weight.t()) it is computed as (g^T mat1)^T, which has mat2's strides: the weight
// then receives a contiguous gradient it can keep instead of copying (PyTorch's
// mm_mat2_backward does the same). One GEMM either way.
Tensor mat2_grad(const Tensor& go, const Tensor& mat1, const Tensor& mat2) {
  const bool column_major = mat2.dim() == 2 && mat2.sizes()[0] > 1 && mat2.sizes()[1] > 1 &&
                            mat2.strides()[0] == 1 && mat2.strides()[1] == mat2.sizes()[0];
  return column_major ? mm(go.t(), mat1).t() : mm(mat1.t(), go);
}

std::vector<Tensor> mm_backward(const BackwardArgs& a) {
  auto g = grads(2);
  const Tensor& go = grad0(a);
  if (a.needs_grad[0]) g[0] = mm(go, a.inputs[1].t());
  if (a.needs_grad[1]) g[1] = mat2_grad(go, a.inputs[0], a.inputs[1]);
  return g;
}

// bias: beta g (summed to its shape by the engine); mat1: alpha g mat2^T; mat2: alpha mat1^T g.
std::vector<Tensor> addmm_backward(const BackwardArgs& a) {
  auto g = grads(3);
  const Tensor& go = grad0(a);
  const double beta = attr_scalar(a.attrs, 0).to_double(), alpha = attr_scalar(a.attrs, 1).to_double();
  auto scaled = [](const Tensor& t, double s) { return s == 1.0 ? t : mul(t, s); };
  if (a.needs_grad[0]) g[0] = scaled(go, beta);
  if (a.needs_grad[1]) g[1] = scaled(mm(go, a.inputs[2].t()), alpha);
  if (a.needs_grad[2]) g[2] = scaled(mat2_grad(go, a.inputs[1], a.inputs[2]), alpha);
  return g;
}

}  // namespace

constinit const OpDesc op::matmul = {.name = "matmul",
                                     .inputs = kPair,
                                     .attrs = {},
                                     .replay = &replay_matmul,
                                     .cost = &cost::gemm,
                                     .backward = &matmul_backward,
                                     .saved = save_input(0) | save_input(1),
                                     .fusion = FusionRole::Gemm};
constinit const OpDesc op::mm = {.name = "mm",
                                 .inputs = kMm,
                                 .attrs = {},
                                 .replay = &replay_matmul,
                                 .cost = &cost::gemm,
                                 .backward = &mm_backward,
                                 .saved = save_input(0) | save_input(1),
                                 .fusion = FusionRole::Gemm};
constinit const OpDesc op::addmm = {.name = "addmm",
                                    .inputs = kAddmm,
                                    .attrs = kAddmmAttrs,
                                    .replay = &replay_matmul,
                                    .cost = &cost::addmm,
                                    .backward = &addmm_backward,
                                    .saved = save_input(1) | save_input(2),
                                    .fusion = FusionRole::Gemm};
constinit const OpDesc op::linear = {.name = "linear",
                                     .inputs = kLinear,
                                     .attrs = {},
                                     .flags = kOpComposite,
                                     .replay = &replay_matmul,
                                     .cost = &cost::none,
                                     .fusion = FusionRole::Gemm};

}  // namespace kiln
