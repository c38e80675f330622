// matmul family: shape rules and error messages here, the GEMM itself in matmul_cpu.cpp and
// matmul_cuda.cu. linear() is an op of its own (profiles show linear -> addmm, as in PyTorch)
// and the node graph capture later fuses with a following gelu. addmm hands a vector bias
// with beta == 1 (linear's case) to the kernel, which folds it into the GEMM (the cuBLASLt
// bias epilogue); any other bias is copied into the output and scaled by beta there.
#include "matmul.h"

#include <atomic>

#include "../tensor/make.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<GemmKernel> gemm_kernels;
}

namespace {
std::atomic<bool> g_allow_tf32{false};
}

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }

bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }

namespace {

void check_pair(const char* op, const Tensor& a, const Tensor& b, const char* name_a, const char* name_b) {
  check_defined(op, a, name_a);
  check_defined(op, b, name_b);
  common_device(op, {&a, &b});
  KILN_CHECK(a.dtype() == b.dtype(), "{}: expected {} and {} to have the same dtype, but got {} and {}", op, name_a,
             name_b, a.dtype(), b.dtype());
  KILN_CHECK(a.dtype() != DType::Bool, "{}: unsupported dtype bool (supported: int32, int64, float16, bfloat16, "
                                       "float32, float64)", op);
}

// out [..., M, N] = a [..., M, K] @ b [..., K, N] with identical batch dims.
Tensor batched_gemm(const char* op, const Tensor& a, const Tensor& b) {
  Shape out_shape = a.sizes();
  out_shape.back() = b.sizes().back();
  Tensor out = new_contiguous(out_shape, a.dtype(), a.device(), op);
  dispatch::gemm_kernels.get(op, a.device())(out, a, b, 1.0, 0.0, Tensor());
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_pair("matmul", a, b, "a", "b");
  KILN_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got shapes {} and {}",
             shape_str(a.sizes()), shape_str(b.sizes()));
  // Promote 1-D operands to matrices, remembering which dims to drop afterwards.
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  const Shape as = a_vec ? Shape{1, a.sizes()[0]} : a.sizes();
  const Shape bs = b_vec ? Shape{b.sizes()[0], 1} : b.sizes();
  const int64_t k_a = as.back(), k_b = bs[bs.size() - 2];
  KILN_CHECK(k_a == k_b, "matmul: inner dimensions must match, but a has shape {} and b has shape {} ({} vs {})",
             shape_str(a.sizes()), shape_str(b.sizes()), k_a, k_b);
  const Shape batch_a(as.begin(), as.end() - 2), batch_b(bs.begin(), bs.end() - 2);
  // Checked here rather than by broadcast_shapes, whose message would show only the batch
  // dims ("[2] and [3]") and not the operands the user passed.
  const std::optional<Shape> broadcast = try_broadcast_shapes(batch_a, batch_b);
  KILN_CHECK(broadcast.has_value(),
             "matmul: the batch dimensions of a (shape {}) and b (shape {}) cannot be broadcast together ({} vs {})",
             shape_str(a.sizes()), shape_str(b.sizes()), shape_str(batch_a), shape_str(batch_b));
  const Shape& batch = *broadcast;
  Shape full_a = batch, full_b = batch, full_out = batch;
  full_a.insert(full_a.end(), as.end() - 2, as.end());
  full_b.insert(full_b.end(), bs.end() - 2, bs.end());
  full_out.push_back(as[as.size() - 2]);
  full_out.push_back(bs.back());
  // Broadcasting the batch dims multiplies each operand's element count by the other's
  // batch; the output's rows times columns can overflow on their own.
  for (const Shape* s : {&full_a, &full_b, &full_out})
    KILN_CHECK(checked_numel(*s).has_value(),
               "matmul: a (shape {}) and b (shape {}) need a tensor of shape {}, which has too many elements (the "
               "element count overflows int64)",
               shape_str(a.sizes()), shape_str(b.sizes()), shape_str(*s));

  OpScope scope(op::matmul, {&a, &b});
  const Tensor a3 = broadcast_view(
      new_view(a, as, a_vec ? Shape{0, a.strides()[0]} : a.strides(), a.storage_offset(), "matmul"), full_a);
  const Tensor b3 = broadcast_view(
      new_view(b, bs, b_vec ? Shape{b.strides()[0], 0} : b.strides(), b.storage_offset(), "matmul"), full_b);
  Tensor out = batched_gemm("matmul", a3, b3);
  Shape final_shape = batch;
  if (!a_vec) final_shape.push_back(as[as.size() - 2]);
  if (!b_vec) final_shape.push_back(bs.back());
  if (final_shape != out.sizes())
    out = new_view(out, final_shape, contiguous_strides(final_shape, "matmul"), 0, "matmul");
  return scope.output(out);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  check_pair("mm", a, b, "self", "mat2");
  KILN_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D matrices, got shapes {} and {}", shape_str(a.sizes()),
             shape_str(b.sizes()));
  KILN_CHECK(a.sizes()[1] == b.sizes()[0], "mm: shapes {} and {} cannot be multiplied ({} vs {})",
             shape_str(a.sizes()), shape_str(b.sizes()), a.sizes()[1], b.sizes()[0]);
  OpScope scope(op::mm, {&a, &b});
  return scope.output(batched_gemm("mm", a, b));
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  check_defined("addmm", bias, "self");
  check_pair("addmm", a, b, "mat1", "mat2");
  common_device("addmm", {&bias, &a, &b});
  KILN_CHECK(a.dim() == 2 && b.dim() == 2, "addmm: expected 2-D matrices, got shapes {} and {}", shape_str(a.sizes()),
             shape_str(b.sizes()));
  KILN_CHECK(a.sizes()[1] == b.sizes()[0], "addmm: mat1 and mat2 shapes cannot be multiplied ({} and {}: {} vs {})",
             shape_str(a.sizes()), shape_str(b.sizes()), a.sizes()[1], b.sizes()[0]);
  KILN_CHECK(bias.dtype() == a.dtype(), "addmm: expected bias to have dtype {}, but got {}", a.dtype(), bias.dtype());
  // As in PyTorch: an integer GEMM cannot scale by 0.5, and truncating it to 0 would be silent.
  KILN_CHECK(is_floating(a.dtype()) || (!beta.is_floating() && !alpha.is_floating()),
             "addmm: for integer inputs, beta and alpha must be integers, got beta={} and alpha={}", beta.str(),
             alpha.str());
  const Shape out_shape{a.sizes()[0], b.sizes()[1]};
  const Shape target = broadcast_shapes(bias.sizes(), out_shape, "addmm");
  KILN_CHECK(target == out_shape, "addmm: bias of shape {} cannot be broadcast to the output shape {}",
             shape_str(bias.sizes()), shape_str(out_shape));
  OpScope scope(op::addmm, {&bias, &a, &b}, beta, alpha);
  Tensor out = new_contiguous(out_shape, a.dtype(), a.device(), "addmm");
  const double beta_v = beta.to_double();
  const int64_t n = out_shape[1];
  const bool vector_bias = (bias.dim() == 1 || (bias.dim() == 2 && bias.sizes()[0] == 1)) && bias.sizes().back() == n;
  if (beta_v == 1.0 && vector_bias) {
    // One GEMM with the bias in its epilogue; the kernel wants a dense [N] vector.
    Tensor vec = new_view(bias, {n}, {n == 1 ? 1 : bias.strides().back()}, bias.storage_offset());
    if (!vec.is_contiguous()) {
      Tensor dense = new_contiguous({n}, bias.dtype(), bias.device(), "addmm");
      dispatch::copy_kernels.get("addmm", bias.device())(dense, vec);
      vec = dense;
    }
    dispatch::gemm_kernels.get("addmm", a.device())(out, a, b, alpha.to_double(), 1.0, vec);
    return scope.output(out);
  }
  if (beta_v != 0.0) dispatch::copy_kernels.get("addmm", a.device())(out, broadcast_view(bias, out_shape));
  dispatch::gemm_kernels.get("addmm", a.device())(out, a, b, alpha.to_double(), beta_v, Tensor());
  return scope.output(out);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_pair("linear", x, weight, "input", "weight");
  KILN_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out_features, in_features], got shape {}",
             shape_str(weight.sizes()));
  KILN_CHECK(x.dim() >= 1, "linear: input must have at least 1 dimension, got a 0-dim tensor");
  const int64_t in_features = weight.sizes()[1], out_features = weight.sizes()[0];
  KILN_CHECK(x.sizes().back() == in_features,
             "linear: input's last dimension ({}) does not match in_features ({}): input shape {}, weight shape {}",
             x.sizes().back(), in_features, shape_str(x.sizes()), shape_str(weight.sizes()));
  if (bias.defined()) {
    common_device("linear", {&x, &weight, &bias});
    KILN_CHECK(bias.dim() == 1 && bias.sizes()[0] == out_features,
               "linear: bias must have shape [{}] (out_features), got {}", out_features, shape_str(bias.sizes()));
    KILN_CHECK(bias.dtype() == x.dtype(), "linear: expected bias to have dtype {}, but got {}", x.dtype(), bias.dtype());
  }
  OpScope scope(op::linear, {&x, &weight, &bias});
  const Tensor x2 = x.dim() == 2 ? x : x.reshape({-1, in_features});
  Tensor out2 = bias.defined() ? addmm(bias, x2, weight.t()) : mm(x2, weight.t());
  Shape out_shape = x.sizes();
  out_shape.back() = out_features;
  return scope.output(x.dim() == 2 ? out2 : out2.view(out_shape));
}

}  // namespace kiln
