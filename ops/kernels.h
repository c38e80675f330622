// The kernel contract of every op family: the signature each device's kernel implements
// and the table it is registered in. Op code (ops/<family>.cpp) validates, allocates the
// outputs, opens the op scope and calls table.get(op, device)(...); kernels
// (ops/<family>_cpu.cpp, later ops/<family>_cuda.cu) only compute.
//
// Unless a signature says otherwise, inputs already have the output's shape (broadcast by
// the op as stride-0 views) and the dtype the kernel computes in; they may be strided.
#pragma once

#include <cstdint>

#include "../tensor/generator.h"
#include "../tensor/tensor.h"
#include "dispatch.h"

namespace kiln {

/// Elementwise functions of one tensor.
enum class UnaryOp : uint8_t { Neg, Exp, Log, Sqrt, Rsqrt, Abs, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Silu };
/// out = op(in); in has out's dtype.
using UnaryKernel = void (*)(UnaryOp op, const Tensor& out, const Tensor& in);

/// Elementwise functions of two tensors; the comparisons write bool.
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Pow, Eq, Ne, Lt, Le, Gt, Ge };
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

/// Row-wise layer norm of a contiguous [rows, n] input; weight and bias ([n]) may be
/// undefined. Also writes each row's mean and 1/std (float32 [rows]) for the backward pass.
using LayerNormKernel = void (*)(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                                 const Tensor& weight, const Tensor& bias, double eps);

/// Mean negative log-likelihood: out (0-dim) = -mean over rows i with target[i] !=
/// ignore_index of logp[i, target[i]]; logp [N, C] contiguous, target [N] int64.
/// Throws when a target is outside [0, C).
using NllLossKernel = void (*)(const Tensor& out, const Tensor& logp, const Tensor& target, int64_t ignore_index);

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
extern KernelTable<LayerNormKernel> layer_norm_kernels;
extern KernelTable<NllLossKernel> nll_loss_kernels;
}  // namespace dispatch

}  // namespace kiln
