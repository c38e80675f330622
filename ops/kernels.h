// The kernel contract of every op family: the signature each device's kernel implements
// and the table it is registered in. Op code (ops/<family>.cpp) validates, allocates the
// outputs, opens the op scope and calls table.get(op, device)(...); kernels
// (ops/<family>_cpu.cpp, later ops/<family>_cuda.cu) only compute.
//
// Unless a signature says otherwise, inputs already have the output's shape (broadcast by
// the op as stride-0 views) and the dtype the kernel computes in; they may be strided.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "../tensor/generator.h"
#include "../tensor/tensor.h"
#include "dispatch.h"
#include "optimizer_math.h"

namespace kiln {

/// Elementwise functions of one tensor.
enum class UnaryOp : uint8_t { Neg, Exp, Log, Sqrt, Rsqrt, Abs, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Silu };
/// out = op(in); in has out's dtype.
using UnaryKernel = void (*)(UnaryOp op, const Tensor& out, const Tensor& in);

/// Elementwise functions of two tensors; the comparisons (Eq and after) write bool.
/// GeluBackward(grad, x) = grad * gelu'(x) (GeluTanhBackward: the tanh approximation's).
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Pow, GeluBackward, GeluTanhBackward, Eq, Ne, Lt, Le, Gt, Ge };
/// out = op(a, b) (Add/Sub: a +- alpha * b). a and b share the compute dtype, which is
/// out's dtype except for comparisons (out is bool).
using BinaryKernel = void (*)(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha);

/// out = cond ? a : b; cond is bool, a and b have out's dtype.
using WhereKernel = void (*)(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);

/// dst = src converted to dst's dtype; same shape, same device, any strides.
using CopyKernel = void (*)(const Tensor& dst, const Tensor& src);

/// Every element of out (any strides) set to value.
using FillKernel = void (*)(const Tensor& out, const Scalar& value);

/// out[i] = start + i * step for a contiguous 1-D out.
using ArangeKernel = void (*)(const Tensor& out, double start, double step);

/// Distributions of the random factories.
enum class RandomDist : uint8_t { Uniform, Normal };
/// Contiguous out filled from Philox blocks starting at state (see tensor/philox.h):
/// Uniform in [a, b), Normal with mean a and standard deviation b.
using RandomKernel = void (*)(RandomDist dist, const Tensor& out, double a, double b, PhiloxState state);

/// out = in * keep / (1 - p) with keep drawn per element (contiguous out and in).
using DropoutKernel = void (*)(const Tensor& out, const Tensor& in, double p, PhiloxState state);

/// Reductions over trailing dims.
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min, ArgMax, ArgMin };
/// The op's user-facing name ("sum", "argmax", ...), for messages.
const char* reduce_op_name(ReduceOp op);
/// Reduces the last `reduced_dims` dims of `in` into out, whose shape is in's leading dims.
/// Sum/Mean/Max/Min write out's dtype; ArgMax/ArgMin write int64 flat indices into the
/// reduced block.
using ReduceKernel = void (*)(ReduceOp op, const Tensor& out, const Tensor& in, int64_t reduced_dims);

/// softmax (or log_softmax when `log`) of in along `dim` into out (same shape and dtype).
using SoftmaxKernel = void (*)(const Tensor& out, const Tensor& in, int64_t dim, bool log);

/// Batched GEMM: out[b] = beta * out[b] + alpha * a[b] @ b[b] for out [..., M, N] (contiguous),
/// a [..., M, K], b [..., K, N] (same batch dims, possibly none; any strides, batch strides
/// may be 0). beta == 0 ignores out's contents (even NaN), as BLAS does. A defined `bias`
/// (contiguous [N], out's dtype) replaces the beta term: out[b] = alpha * a[b] @ b[b] + bias,
/// bias added to every row (the cuBLASLt bias epilogue).
using GemmKernel = void (*)(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
                            const Tensor& bias);

/// fused_linear_gelu: out [M, N] = gelu(input [M, K] @ weight [N, K]^T + bias), gelu being
/// UnaryOp::Gelu or UnaryOp::GeluTanh; input and weight of out's dtype with any strides, bias
/// a contiguous [N] vector or undefined, out contiguous. A defined `pre` (contiguous [M, N])
/// also receives the pre-activation input @ weight^T + bias; undefined, it is never written.
using FusedLinearGeluKernel = void (*)(const Tensor& out, const Tensor& pre, const Tensor& input,
                                       const Tensor& weight, const Tensor& bias, UnaryOp gelu);
/// fused_linear_gelu's backward: with dH = grad [M, N] * gelu'(pre [M, N]), writes each
/// defined output: grad_input [M, K] = dH @ weight [N, K], grad_weight [N, K] = dH^T @ input
/// [M, K], grad_bias [N] = column sums of dH. Outputs are contiguous; grad, pre, input and
/// weight have any strides; all share one floating dtype.
using FusedLinearGeluBackwardKernel = void (*)(const Tensor& grad_input, const Tensor& grad_weight,
                                               const Tensor& grad_bias, const Tensor& grad, const Tensor& pre,
                                               const Tensor& input, const Tensor& weight, UnaryOp gelu);

/// Row-wise layer norm of a contiguous [rows, n] input; weight and bias ([n]) may be
/// undefined. Also writes each row's mean and 1/std (float32 [rows]) for the backward pass.
using LayerNormKernel = void (*)(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                                 const Tensor& weight, const Tensor& bias, double eps);

// The loss kernels take logits / log-probabilities [N, C] and targets [N] int64, both
// contiguous; a row counts when its target is not ignore_index, and `count` (0-dim int64)
// is the number of rows that count. A target outside [0, C) that is not ignore_index: the
// CPU kernels throw at once; the CUDA kernels never use it as an index (they write NaN
// where it would have been used) and record a device-side error that the next
// synchronisation raises (Note [Device-side errors], core/device_error.h).

/// Mean negative log-likelihood: out (0-dim, logp's dtype) = -mean over the rows that count
/// of logp[i, target[i]] (NaN when none does), and count.
using NllLossKernel = void (*)(const Tensor& out, const Tensor& count, const Tensor& logp, const Tensor& target,
                               int64_t ignore_index);
/// nll_loss's gradient wrt logp: grad [N, C] (contiguous, logp's dtype) is -grad_out / count
/// at [i, target[i]] for the rows that count and 0 elsewhere; grad_out (0-dim, grad's
/// dtype) and count are read on the device.
using NllLossBackwardKernel = void (*)(const Tensor& grad, const Tensor& grad_out, const Tensor& target,
                                       const Tensor& count, int64_t ignore_index);
/// Fused cross entropy (log-softmax, gather and mean in one pass over the logits): writes
/// lse[i] = log(sum_c exp(logits[i, c])) (lse: N contiguous elements of any shape, float32,
/// float64 for float64 logits),
/// loss (0-dim, logits' dtype) = mean over the rows that count of lse[i] - logits[i,
/// target[i]] (NaN when none does), and count.
using CrossEntropyKernel = void (*)(const Tensor& loss, const Tensor& lse, const Tensor& count, const Tensor& logits,
                                    const Tensor& target, int64_t ignore_index);
/// cross_entropy's gradient wrt logits: grad [N, C] (contiguous, logits' dtype) is
/// grad_out * (exp(logits[i, c] - lse[i]) - (c == target[i])) / count on the rows that
/// count and 0 on ignored rows (lse as the forward wrote it); grad_out (0-dim) and count are
/// read on the device.
using CrossEntropyBackwardKernel = void (*)(const Tensor& grad, const Tensor& grad_out, const Tensor& logits,
                                            const Tensor& target, const Tensor& lse, const Tensor& count,
                                            int64_t ignore_index);

/// out = in clamped to [min, max] (either bound may be absent); in has out's dtype, which is
/// not bool. A NaN element stays NaN; a NaN bound clamps nothing (as PyTorch's scalar clamp).
using ClampKernel = void (*)(const Tensor& out, const Tensor& in, const std::optional<Scalar>& min,
                             const std::optional<Scalar>& max);

/// out[i] = value wherever mask[i] (other elements keep theirs); out has any strides without
/// overlapping elements, mask is a bool view of out's shape.
using MaskedFillKernel = void (*)(const Tensor& out, const Tensor& mask, const Scalar& value);

/// The first element, in row-major order, of an int64 index tensor (any strides) whose
/// value lies outside [0, size): its flat position (-1 when every value is in range) and value.
struct IndexCheck {
  int64_t position = -1;
  int64_t value = 0;
};
/// Finds the first out-of-range index (CUDA: one synchronizing read-back; while the stream
/// is being captured into a graph it checks nothing and reports -1).
using IndexCheckKernel = IndexCheck (*)(const Tensor& index, int64_t size);

/// Gather: out[i] = src[i + index[i] * src_dim_stride] over out's shape (any strides). src
/// is a view of the source with out's shape and stride 0 along the indexed dim, index an
/// int64 view of out's shape; strides in elements. Indices outside [0, dim_size) were
/// rejected by the op's IndexCheck; a kernel that meets one anyway (CUDA graph capture)
/// writes 0 instead of reading outside the source.
using GatherKernel = void (*)(const Tensor& out, const Tensor& src, const Tensor& index, int64_t src_dim_stride,
                              int64_t dim_size);

/// How scatter combines a source value with the destination element.
enum class ScatterMode : uint8_t { Assign, Add };
/// Scatter over index's shape: self[i + index[i] * self_dim_stride] = src[i] (Assign) or
/// += src[i] (Add; atomic on CUDA). self is a view of the destination with index's shape and
/// stride 0 along the indexed dim; src a view of index's shape with self's dtype; index int64.
/// Out-of-range indices were rejected by the op; a kernel skips any it meets.
using ScatterKernel = void (*)(ScatterMode mode, const Tensor& self, const Tensor& src, const Tensor& index,
                               int64_t self_dim_stride, int64_t dim_size);

/// One optimizer step of one parameter, in place, with ops/optimizer_math.h's functor: every
/// operand has the parameter's shape, floating dtype and device, any strides (param and the
/// state it writes without overlapping elements). momentum_buffer is undefined when
/// config.momentum == 0.
using SgdStepKernel = void (*)(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                               const SgdConfig& config, bool first_step);
/// Adam (decoupled == false) or AdamW step at step count `step` (>= 1, after this update);
/// max_exp_avg_sq is defined exactly when config.amsgrad.
using AdamStepKernel = void (*)(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                                const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, double step,
                                const AdamConfig& config, bool decoupled);
/// The multi-tensor forms (CUDA): lists of equal length of contiguous tensors on one device
/// with one floating dtype, list k's tensor i of parameter i's shape; a few launches in all.
using SgdMultiStepKernel = void (*)(std::span<const Tensor> params, std::span<const Tensor> grads,
                                    std::span<const Tensor> momentum_buffers, const SgdConfig& config,
                                    std::span<const bool> first_steps);
/// Multi-tensor Adam/AdamW; max_exp_avg_sqs is empty unless config.amsgrad.
using AdamMultiStepKernel = void (*)(std::span<const Tensor> params, std::span<const Tensor> grads,
                                     std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs,
                                     std::span<const Tensor> max_exp_avg_sqs, std::span<const double> steps,
                                     const AdamConfig& config, bool decoupled);

namespace dispatch {
extern KernelTable<UnaryKernel> unary_kernels;
extern KernelTable<BinaryKernel> binary_kernels;
extern KernelTable<WhereKernel> where_kernels;
extern KernelTable<CopyKernel> copy_kernels;
extern KernelTable<FillKernel> fill_kernels;
extern KernelTable<ArangeKernel> arange_kernels;
extern KernelTable<RandomKernel> random_kernels;
extern KernelTable<DropoutKernel> dropout_kernels;
extern KernelTable<ReduceKernel> reduce_kernels;
extern KernelTable<SoftmaxKernel> softmax_kernels;
extern KernelTable<GemmKernel> gemm_kernels;
extern KernelTable<FusedLinearGeluKernel> fused_linear_gelu_kernels;
extern KernelTable<FusedLinearGeluBackwardKernel> fused_linear_gelu_backward_kernels;
extern KernelTable<LayerNormKernel> layer_norm_kernels;
extern KernelTable<NllLossKernel> nll_loss_kernels;
extern KernelTable<NllLossBackwardKernel> nll_loss_backward_kernels;
extern KernelTable<CrossEntropyKernel> cross_entropy_kernels;
extern KernelTable<CrossEntropyBackwardKernel> cross_entropy_backward_kernels;
extern KernelTable<ClampKernel> clamp_kernels;
extern KernelTable<MaskedFillKernel> masked_fill_kernels;
extern KernelTable<IndexCheckKernel> index_check_kernels;
extern KernelTable<GatherKernel> gather_kernels;
extern KernelTable<ScatterKernel> scatter_kernels;
extern KernelTable<SgdStepKernel> sgd_step_kernels;
extern KernelTable<AdamStepKernel> adam_step_kernels;
extern KernelTable<SgdMultiStepKernel> sgd_multi_step_kernels;
extern KernelTable<AdamMultiStepKernel> adam_multi_step_kernels;
}  // namespace dispatch

}  // namespace kiln
