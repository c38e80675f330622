// Op records of the reductions, softmax, layer_norm and the losses: slots, attributes,
// replay, cost and backward formulas (written with Kiln ops, so they run on every device).
#include "../../tensor/shape.h"
#include "record_util.h"

namespace kiln {

namespace {

using namespace records;

constexpr const char* kSelf[] = {"self"};
constexpr AttrSpec kReduceAttrs[] = {{"dim", AttrKind::IntList}, {"keepdim", AttrKind::Bool}};
constexpr AttrSpec kArgAttrs[] = {{"dim", AttrKind::OptionalInt}, {"keepdim", AttrKind::Bool}};

std::vector<Tensor> replay_reduce(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  const Tensor& x = inputs[0];
  const bool keepdim = attr_bool(attrs, 1);
  if (&op == &op::argmax || &op == &op::argmin) {
    const bool all = std::holds_alternative<std::monostate>(attrs[0]);
    const bool is_max = &op == &op::argmax;
    if (all) return one(is_max ? argmax(x) : argmin(x));
    return one(is_max ? argmax(x, attr_int(attrs, 0), keepdim) : argmin(x, attr_int(attrs, 0), keepdim));
  }
  const Shape& dims = attr_ints(attrs, 0);
  if (&op == &op::sum) return one(sum(x, dims, keepdim));
  if (&op == &op::mean) return one(mean(x, dims, keepdim));
  if (&op == &op::max) return one(max(x, dims, keepdim));
  if (&op == &op::min) return one(min(x, dims, keepdim));
  if (&op == &op::amax) return one(amax(x, dims, keepdim));
  return one(amin(x, dims, keepdim));
}

// Elements reduced per output element.
double reduced_count(const Shape& input_sizes, const Shape& dims) {
  if (dims.empty()) return static_cast<double>(shape_numel(input_sizes));
  double n = 1;
  for (int64_t d : dims)
    if (!input_sizes.empty()) n *= static_cast<double>(input_sizes[wrap_dim(d, static_cast<int64_t>(input_sizes.size()), "sum")]);
  return n;
}

std::vector<Tensor> reduce_backward(const BackwardArgs& a) {
  auto g = grads(1);
  if (!a.needs_grad[0]) return g;
  const Shape& dims = attr_ints(a.attrs, 0);
  const bool keepdim = attr_bool(a.attrs, 1);
  const Shape& sizes = a.input_sizes[0];
  const Tensor go = unreduce(grad0(a), sizes, dims, keepdim);
  if (&a.op == &op::sum) {
    g[0] = go;
  } else if (&a.op == &op::mean) {
    g[0] = div(go, reduced_count(sizes, dims));
  } else {  // max / min / amax / amin: shared evenly among the elements equal to the result
    const Tensor& x = a.inputs[0];
    const Tensor hit = eq(x, unreduce(a.outputs[0], sizes, dims, keepdim)).to(go.dtype());
    const Tensor ties = unreduce(sum(hit, dims.empty() ? Shape{} : dims, keepdim), sizes, dims, keepdim);
    g[0] = div(mul(go, hit), ties);
  }
  return g;
}

constexpr OpDesc reduction(const char* name, ReduceOp code, BackwardFn bw, uint32_t saved) {
  return OpDesc{.name = name,
                .inputs = kSelf,
                .attrs = kReduceAttrs,
                .replay = &replay_reduce,
                .cost = &cost::reduction,
                .backward = bw,
                .saved = saved,
                .fusion = FusionRole::Reduction,
                .code = static_cast<int>(code)};
}

constexpr OpDesc arg_reduction(const char* name, ReduceOp code) {
  return OpDesc{.name = name,
                .inputs = kSelf,
                .attrs = kArgAttrs,
                .flags = kOpNonDifferentiable,
                .replay = &replay_reduce,
                .cost = &cost::reduction,
                .fusion = FusionRole::Reduction,
                .code = static_cast<int>(code)};
}

// ---- softmax ---------------------------------------------------------------------------------
constexpr AttrSpec kDimAttr[] = {{"dim", AttrKind::Int}};

std::vector<Tensor> replay_softmax(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  return one(&op == &op::softmax ? softmax(inputs[0], attr_int(attrs, 0)) : log_softmax(inputs[0], attr_int(attrs, 0)));
}

// softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g), sums along dim.
std::vector<Tensor> softmax_backward(const BackwardArgs& a) {
  auto g = grads(1);
  if (!a.needs_grad[0]) return g;
  const Tensor& go = grad0(a);
  const Tensor& y = a.outputs[0];
  const Shape dim{y.dim() == 0 ? 0 : attr_int(a.attrs, 0)};
  if (y.dim() == 0) {  // one element: softmax is constant 1, log_softmax 0
    g[0] = zeros_like(go);
    return g;
  }
  if (&a.op == &op::softmax) g[0] = mul(y, sub(go, sum(mul(go, y), dim, true)));
  else g[0] = sub(go, mul(exp(y), sum(go, dim, true)));
  return g;
}

constexpr OpDesc softmax_desc(const char* name) {
  return OpDesc{.name = name,
                .inputs = kSelf,
                .attrs = kDimAttr,
                .replay = &replay_softmax,
                .cost = &cost::softmax,
                .backward = &softmax_backward,
                .saved = save_output(0),
                .fusion = FusionRole::Reduction};
}

// ---- layer_norm ------------------------------------------------------------------------------
constexpr const char* kLayerNormInputs[] = {"input", "weight", "bias"};
constexpr AttrSpec kLayerNormAttrs[] = {{"normalized_shape", AttrKind::IntList}, {"eps", AttrKind::Double}};

std::vector<Tensor> replay_layer_norm(const OpDesc&, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  return one(layer_norm(inputs[0], attr_ints(attrs, 0), in(inputs, 1), in(inputs, 2), attr_double(attrs, 1)));
}

// Recomputes mean and 1/std from the saved input (in float32 for 16-bit inputs, as the
// forward kernel), then the usual formulas: with xhat = (x - mean) rstd and gh = g w,
// dx = rstd (gh - mean(gh) - xhat mean(gh xhat)), dw = sum(g xhat), db = sum(g) over rows.
std::vector<Tensor> layer_norm_backward(const BackwardArgs& a) {
  auto g = grads(3);
  const Tensor& x_in = a.inputs[0];
  const DType out_dtype = x_in.dtype();
  const DType math = out_dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  const Tensor x = x_in.to(math), go = grad0(a).to(math);
  const int64_t k = static_cast<int64_t>(attr_ints(a.attrs, 0).size());
  Shape norm_dims, row_dims;
  for (int64_t d = 0; d < x.dim(); ++d) (d >= x.dim() - k ? norm_dims : row_dims).push_back(d);
  const Tensor mu = mean(x, norm_dims, true);
  const Tensor centered = sub(x, mu);
  const Tensor rstd = rsqrt(add(mean(mul(centered, centered), norm_dims, true), attr_double(a.attrs, 1)));
  const Tensor xhat = mul(centered, rstd);
  const Tensor& w = a.inputs[1];
  const Tensor gh = w.defined() ? mul(go, w.to(math)) : go;
  if (a.needs_grad[0])
    g[0] = mul(rstd, sub(sub(gh, mean(gh, norm_dims, true)), mul(xhat, mean(mul(gh, xhat), norm_dims, true))));
  auto over_rows = [&](const Tensor& t) { return row_dims.empty() ? t : sum(t, row_dims); };
  if (a.needs_grad[1]) g[1] = over_rows(mul(go, xhat));
  if (a.needs_grad[2]) g[2] = over_rows(go);
  return g;
}

// ---- losses ----------------------------------------------------------------------------------
constexpr const char* kLossInputs[] = {"self", "target"};
constexpr AttrSpec kIgnoreAttrs[] = {{"ignore_index", AttrKind::Int}};

std::vector<Tensor> replay_loss(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  if (&op == &op::mse_loss) return one(mse_loss(inputs[0], inputs[1]));
  if (&op == &op::nll_loss) return one(nll_loss(inputs[0], inputs[1], attr_int(attrs, 0)));
  return one(cross_entropy(inputs[0], inputs[1], attr_int(attrs, 0)));
}

// The fused losses' forward ops return what their backward needs (logsumexp, the count of
// rows not ignored); their backward ops run one kernel each.
constexpr const char* kBackwardInputs[] = {"grad_output", "self", "target", "total_weight"};
constexpr const char* kCrossEntropyBackwardInputs[] = {"grad_output", "self", "target", "logsumexp", "total_weight"};

std::vector<Tensor> replay_fused_loss(const OpDesc& op, std::span<const Tensor> inputs,
                                      std::span<const AttrValue> attrs) {
  const int64_t ignore = attr_int(attrs, 0);
  if (&op == &op::_nll_loss_forward) {
    const NllLossForward f = _nll_loss_forward(inputs[0], inputs[1], ignore);
    return {f.loss, f.count};
  }
  if (&op == &op::_cross_entropy_forward) {
    const CrossEntropyForward f = _cross_entropy_forward(inputs[0], inputs[1], ignore);
    return {f.loss, f.logsumexp, f.count};
  }
  if (&op == &op::_nll_loss_backward) return one(_nll_loss_backward(inputs[0], inputs[1], inputs[2], inputs[3], ignore));
  return one(_cross_entropy_backward(inputs[0], inputs[1], inputs[2], inputs[3], inputs[4], ignore));
}

std::vector<Tensor> nll_loss_backward(const BackwardArgs& a) {
  auto g = grads(2);
  if (a.needs_grad[0])
    g[0] = _nll_loss_backward(grad0(a), a.inputs[0], a.inputs[1], a.outputs[1], attr_int(a.attrs, 0));
  return g;
}

std::vector<Tensor> cross_entropy_backward(const BackwardArgs& a) {
  auto g = grads(2);
  if (a.needs_grad[0])
    g[0] = _cross_entropy_backward(grad0(a), a.inputs[0], a.inputs[1], a.outputs[1], a.outputs[2],
                                   attr_int(a.attrs, 0));
  return g;
}

constexpr OpDesc loss(const char* name, std::span<const AttrSpec> attrs, uint32_t flags, BackwardFn bw,
                      uint32_t saved) {
  return OpDesc{.name = name,
                .inputs = kLossInputs,
                .attrs = attrs,
                .flags = flags,
                .replay = &replay_loss,
                .backward = bw,
                .saved = saved,
                .fusion = FusionRole::Reduction};
}

}  // namespace

constinit const OpDesc op::sum = reduction("sum", ReduceOp::Sum, &reduce_backward, 0);
constinit const OpDesc op::mean = reduction("mean", ReduceOp::Mean, &reduce_backward, 0);
constinit const OpDesc op::max = reduction("max", ReduceOp::Max, &reduce_backward, save_input(0) | save_output(0));
constinit const OpDesc op::min = reduction("min", ReduceOp::Min, &reduce_backward, save_input(0) | save_output(0));
constinit const OpDesc op::amax = reduction("amax", ReduceOp::Max, &reduce_backward, save_input(0) | save_output(0));
constinit const OpDesc op::amin = reduction("amin", ReduceOp::Min, &reduce_backward, save_input(0) | save_output(0));
constinit const OpDesc op::argmax = arg_reduction("argmax", ReduceOp::ArgMax);
constinit const OpDesc op::argmin = arg_reduction("argmin", ReduceOp::ArgMin);
constinit const OpDesc op::softmax = softmax_desc("softmax");
constinit const OpDesc op::log_softmax = softmax_desc("log_softmax");
constinit const OpDesc op::layer_norm = {.name = "layer_norm",
                                         .inputs = kLayerNormInputs,
                                         .attrs = kLayerNormAttrs,
                                         .replay = &replay_layer_norm,
                                         .cost = &cost::layer_norm,
                                         .backward = &layer_norm_backward,
                                         .saved = save_input(0) | save_input(1),
                                         .fusion = FusionRole::Reduction};
// nll_loss and cross_entropy are composites of their _forward ops (as linear is of addmm):
// the nested op saves what its backward needs, which the public ops do not return.
constinit const OpDesc op::nll_loss = loss("nll_loss", kIgnoreAttrs, kOpComposite, nullptr, 0);
constinit const OpDesc op::cross_entropy = loss("cross_entropy", kIgnoreAttrs, kOpComposite, nullptr, 0);
// Composite: sub, mul and mean record theirs.
constinit const OpDesc op::mse_loss = loss("mse_loss", {}, kOpComposite, nullptr, 0);
constinit const OpDesc op::_nll_loss_forward = {.name = "_nll_loss_forward",
                                                .inputs = kLossInputs,
                                                .attrs = kIgnoreAttrs,
                                                .replay = &replay_fused_loss,
                                                .backward = &nll_loss_backward,
                                                .saved = save_input(0) | save_input(1) | save_output(1),
                                                .fusion = FusionRole::Reduction};
constinit const OpDesc op::_cross_entropy_forward = {.name = "_cross_entropy_forward",
                                                     .inputs = kLossInputs,
                                                     .attrs = kIgnoreAttrs,
                                                     .replay = &replay_fused_loss,
                                                     .cost = &cost::softmax,
                                                     .backward = &cross_entropy_backward,
                                                     .saved = save_input(0) | save_input(1) | save_output(1) |
                                                              save_output(2),
                                                     .fusion = FusionRole::Reduction};
constinit const OpDesc op::_nll_loss_backward = {.name = "_nll_loss_backward",
                                                 .inputs = kBackwardInputs,
                                                 .attrs = kIgnoreAttrs,
                                                 .replay = &replay_fused_loss};
constinit const OpDesc op::_cross_entropy_backward = {.name = "_cross_entropy_backward",
                                                      .inputs = kCrossEntropyBackwardInputs,
                                                      .attrs = kIgnoreAttrs,
                                                      .replay = &replay_fused_loss,
                                                      .cost = &cost::elementwise};

}  // namespace kiln
