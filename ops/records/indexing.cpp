// Op records of joining (cat, stack) and indexing (index_select, gather, scatter*,
// embedding): slots, attributes, replay, cost and backward formulas.
#include "../../tensor/shape.h"
#include "record_util.h"

namespace kiln {

namespace {

using namespace records;

constexpr const char* kTensors[] = {"tensors"};
constexpr AttrSpec kDimAttr[] = {{"dim", AttrKind::Int}};

std::vector<Tensor> replay_join(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  const std::vector<Tensor> list(inputs.begin(), inputs.end());
  return one(&op == &op::cat ? cat(list, attr_int(attrs, 0)) : stack(list, attr_int(attrs, 0)));
}

// cat: each input's slice of the gradient along dim (legacy empty [0] inputs get none);
// stack: each input's index along the new dim.
std::vector<Tensor> join_backward(const BackwardArgs& a) {
  auto g = grads(a.needs_grad.size());
  const Tensor& go = grad0(a);
  const int64_t dim = wrap_dim(attr_int(a.attrs, 0), go.dim(), a.op.name);
  int64_t offset = 0;
  for (size_t i = 0; i < a.needs_grad.size(); ++i) {
    const Shape& s = a.input_sizes[i];
    if (&a.op == &op::stack) {
      if (a.needs_grad[i]) g[i] = go.select(dim, static_cast<int64_t>(i));
      continue;
    }
    const bool legacy_empty = s.size() == 1 && s[0] == 0 && go.dim() != 1;
    if (legacy_empty) continue;
    const int64_t n = s[static_cast<size_t>(dim)];
    if (a.needs_grad[i]) g[i] = go.narrow(dim, offset, n);
    offset += n;
  }
  return g;
}

constexpr OpDesc join(const char* name) {
  return OpDesc{.name = name,
                .inputs = kTensors,
                .attrs = kDimAttr,
                .flags = kOpVariadic,
                .replay = &replay_join,
                .backward = &join_backward};
}

// ---- index_select, gather ----------------------------------------------------------------
constexpr const char* kIndexInputs[] = {"self", "index"};

std::vector<Tensor> replay_index(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  if (&op == &op::index_select) return one(index_select(inputs[0], attr_int(attrs, 0), inputs[1]));
  if (&op == &op::gather) return one(gather(inputs[0], attr_int(attrs, 0), inputs[1]));
  return one(embedding(inputs[0], inputs[1]));
}

// Gradients of selected elements add up where an index repeats: scatter_add into zeros.
std::vector<Tensor> index_select_backward(const BackwardArgs& a) {
  auto g = grads(2);
  if (!a.needs_grad[0]) return g;
  const Tensor& go = grad0(a);
  const Shape& sizes = a.input_sizes[0];
  if (sizes.empty()) {  // a 0-dim source: its one element, selected index.numel() == 1 times
    g[0] = go.reshape({});
    return g;
  }
  const int64_t dim = wrap_dim(attr_int(a.attrs, 0), static_cast<int64_t>(sizes.size()), "index_select");
  g[0] = scatter_add(zeros(sizes, go.options()), dim, expand_index(a.inputs[1], dim, go.sizes()), go);
  return g;
}

std::vector<Tensor> gather_backward(const BackwardArgs& a) {
  auto g = grads(2);
  if (!a.needs_grad[0]) return g;
  const Tensor& go = grad0(a);
  g[0] = scatter_add(zeros(a.input_sizes[0], go.options()), attr_int(a.attrs, 0), a.inputs[1].to(DType::Int64), go);
  return g;
}

std::vector<Tensor> embedding_backward(const BackwardArgs& a) {
  auto g = grads(2);
  if (!a.needs_grad[0]) return g;
  const Tensor& go = grad0(a);
  const Shape& sizes = a.input_sizes[0];
  const int64_t cols = sizes[1];
  const Tensor rows = go.reshape({-1, cols});
  const Tensor index = a.inputs[1].to(DType::Int64).reshape({-1, 1}).expand({rows.size(0), cols});
  g[0] = scatter_add(zeros(sizes, go.options()), 0, index, rows);
  return g;
}

// ---- scatter ------------------------------------------------------------------------------
constexpr const char* kScatterInputs[] = {"self", "index", "src"};
constexpr AttrSpec kScatterAttrs[] = {{"dim", AttrKind::Int}, {"value", AttrKind::OptionalScalar}};

std::vector<Tensor> replay_scatter(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  const int64_t dim = attr_int(attrs, 0);
  const Tensor& index = inputs[1];
  const std::optional<Scalar> value = attr_optional_scalar(attrs, 1);
  if (&op == &op::scatter_ || &op == &op::scatter_add_) {
    Tensor self = inputs[0];
    if (&op == &op::scatter_add_) return one(scatter_add_(self, dim, index, inputs[2]));
    return one(value ? scatter_(self, dim, index, *value) : scatter_(self, dim, index, inputs[2]));
  }
  if (&op == &op::scatter_add) return one(scatter_add(inputs[0], dim, index, inputs[2]));
  return one(value ? scatter(inputs[0], dim, index, *value) : scatter(inputs[0], dim, index, inputs[2]));
}

// self: the gradient, less the overwritten positions (scatter) or all of it (scatter_add);
// src: the gradient at the positions it went to.
std::vector<Tensor> scatter_backward(const BackwardArgs& a) {
  auto g = grads(3);
  const Tensor& go = grad0(a);
  const int64_t dim = attr_int(a.attrs, 0);
  const Tensor& index = a.inputs[1];
  const bool add = &a.op == &op::scatter_add || &a.op == &op::scatter_add_;
  if (a.needs_grad[0]) g[0] = add ? go : scatter(go, dim, index, 0);
  if (a.needs_grad[2]) g[2] = gather(go, dim, index);
  return g;
}

constexpr OpDesc scatter_desc(const char* name, uint32_t flags, CostFn cost) {
  return OpDesc{.name = name,
                .inputs = kScatterInputs,
                .attrs = kScatterAttrs,
                .flags = flags,
                .replay = &replay_scatter,
                .cost = cost,
                .backward = &scatter_backward,
                .saved = save_input(1)};
}

constexpr OpDesc index_desc(const char* name, std::span<const char* const> inputs, std::span<const AttrSpec> attrs,
                            BackwardFn bw) {
  return OpDesc{.name = name,
                .inputs = inputs,
                .attrs = attrs,
                .replay = &replay_index,
                .backward = bw,
                .saved = save_input(1)};
}

constexpr const char* kEmbeddingInputs[] = {"weight", "indices"};

}  // namespace

constinit const OpDesc op::cat = join("cat");
constinit const OpDesc op::stack = join("stack");
constinit const OpDesc op::index_select = index_desc("index_select", kIndexInputs, kDimAttr, &index_select_backward);
constinit const OpDesc op::gather = index_desc("gather", kIndexInputs, kDimAttr, &gather_backward);
constinit const OpDesc op::embedding = index_desc("embedding", kEmbeddingInputs, {}, &embedding_backward);
constinit const OpDesc op::scatter = scatter_desc("scatter", 0, nullptr);
constinit const OpDesc op::scatter_ = scatter_desc("scatter_", kOpInPlace, nullptr);
constinit const OpDesc op::scatter_add = scatter_desc("scatter_add", 0, &cost::scatter_add);
constinit const OpDesc op::scatter_add_ = scatter_desc("scatter_add_", kOpInPlace, &cost::scatter_add);

}  // namespace kiln
