// Op records of the views (view ... as_strided, detach). Their outputs alias their input;
// the backward of each maps the gradient back to the input's layout. expand's is the
// engine's reduction of a broadcast gradient, so its formula returns the gradient as it is.
#include "../../tensor/shape.h"
#include "record_util.h"

namespace kiln {

namespace {

using namespace records;

constexpr const char* kSelf[] = {"self"};
constexpr AttrSpec kSizeAttr[] = {{"size", AttrKind::IntList}};
constexpr AttrSpec kShapeAttr[] = {{"shape", AttrKind::IntList}};
constexpr AttrSpec kTransposeAttrs[] = {{"dim0", AttrKind::Int}, {"dim1", AttrKind::Int}};
constexpr AttrSpec kPermuteAttrs[] = {{"dims", AttrKind::IntList}};
constexpr AttrSpec kNarrowAttrs[] = {{"dim", AttrKind::Int}, {"start", AttrKind::Int}, {"length", AttrKind::Int}};
constexpr AttrSpec kSliceAttrs[] = {
    {"dim", AttrKind::Int}, {"start", AttrKind::Int}, {"end", AttrKind::Int}, {"step", AttrKind::Int}};
constexpr AttrSpec kSelectAttrs[] = {{"dim", AttrKind::Int}, {"index", AttrKind::Int}};
constexpr AttrSpec kDimAttr[] = {{"dim", AttrKind::Int}};
constexpr AttrSpec kOptionalDimAttr[] = {{"dim", AttrKind::OptionalInt}};
constexpr AttrSpec kAsStridedAttrs[] = {
    {"size", AttrKind::IntList}, {"stride", AttrKind::IntList}, {"storage_offset", AttrKind::Int}};

std::vector<Tensor> replay_view(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  const Tensor& x = inputs[0];
  if (&op == &op::view) return one(x.view(attr_ints(attrs, 0)));
  if (&op == &op::reshape) return one(x.reshape(attr_ints(attrs, 0)));
  if (&op == &op::transpose) return one(x.transpose(attr_int(attrs, 0), attr_int(attrs, 1)));
  if (&op == &op::t) return one(x.t());
  if (&op == &op::permute) return one(x.permute(attr_ints(attrs, 0)));
  if (&op == &op::narrow) return one(x.narrow(attr_int(attrs, 0), attr_int(attrs, 1), attr_int(attrs, 2)));
  if (&op == &op::slice)
    return one(x.slice(attr_int(attrs, 0), attr_int(attrs, 1), attr_int(attrs, 2), attr_int(attrs, 3)));
  if (&op == &op::select) return one(x.select(attr_int(attrs, 0), attr_int(attrs, 1)));
  if (&op == &op::unsqueeze) return one(x.unsqueeze(attr_int(attrs, 0)));
  if (&op == &op::squeeze) {
    if (std::holds_alternative<std::monostate>(attrs[0])) return one(x.squeeze());
    return one(x.squeeze(attr_int(attrs, 0)));
  }
  if (&op == &op::expand) return one(x.expand(attr_ints(attrs, 0)));
  if (&op == &op::as_strided) return one(x.as_strided(attr_ints(attrs, 0), attr_ints(attrs, 1), attr_int(attrs, 2)));
  return one(x.detach());
}

// The gradient of a strided window [start, start + step * n) of `sizes` along `dim`: zeros
// elsewhere. Out of place (a scatter into zeros), so the formula is itself differentiable.
Tensor embed(const Tensor& g, const Shape& sizes, int64_t dim, int64_t start, int64_t step) {
  if (step == 1) {  // zeros before, g, zeros after: one cat
    const int64_t n = g.size(dim), after = sizes[dim] - start - n;
    std::vector<Tensor> parts;
    auto zeros_of = [&](int64_t len) {
      Shape s = sizes;
      s[dim] = len;
      return zeros(s, g.options());
    };
    if (start > 0) parts.push_back(zeros_of(start));
    parts.push_back(g);
    if (after > 0) parts.push_back(zeros_of(after));
    return parts.size() == 1 ? g : cat(parts, dim);
  }
  const int64_t n = g.size(dim);
  Shape index_shape(sizes.size(), 1);
  index_shape[dim] = n;
  const Tensor index = arange(start, start + step * n, step, TensorOptions(DType::Int64).device(g.device()))
                           .view(index_shape)
                           .expand(g.sizes());
  return scatter(zeros(sizes, g.options()), dim, index, g);
}

std::vector<Tensor> view_backward(const BackwardArgs& a) {
  auto g = grads(1);
  if (!a.needs_grad[0]) return g;
  const Tensor& go = grad0(a);
  const Shape& sizes = a.input_sizes[0];
  const auto& at = a.attrs;
  const int64_t nd = static_cast<int64_t>(sizes.size());
  if (&a.op == &op::view || &a.op == &op::reshape || &a.op == &op::squeeze || &a.op == &op::unsqueeze) {
    g[0] = go.reshape(sizes);
  } else if (&a.op == &op::transpose) {
    g[0] = go.transpose(attr_int(at, 0), attr_int(at, 1));
  } else if (&a.op == &op::t) {
    g[0] = go.t();
  } else if (&a.op == &op::permute) {
    const Shape& dims = attr_ints(at, 0);
    Shape inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) inverse[static_cast<size_t>(wrap_dim(dims[i], nd, "permute"))] = static_cast<int64_t>(i);
    g[0] = go.permute(inverse);
  } else if (&a.op == &op::narrow) {
    const int64_t d = wrap_dim(attr_int(at, 0), nd, "narrow");
    int64_t start = attr_int(at, 1);
    if (start < 0) start += sizes[d];
    g[0] = embed(go, sizes, d, start, 1);
  } else if (&a.op == &op::slice) {
    g[0] = embed(go, sizes, attr_int(at, 0), attr_int(at, 1), attr_int(at, 3));
  } else if (&a.op == &op::select) {
    const int64_t d = wrap_dim(attr_int(at, 0), nd, "select");
    int64_t index = attr_int(at, 1);
    if (index < 0) index += sizes[d];
    g[0] = embed(go.unsqueeze(d), sizes, d, index, 1);
  } else if (&a.op == &op::expand) {
    g[0] = go;  // the engine sums the broadcast dims back down
  } else {
    KILN_FAIL("{}: no backward", a.op.name);
  }
  return g;
}

// as_strided of a contiguous input: each output element's storage position, less the
// input's offset, is its index in the input; gradients of elements that share a position add.
std::vector<Tensor> as_strided_backward(const BackwardArgs& a) {
  auto g = grads(1);
  if (!a.needs_grad[0]) return g;
  const Tensor& x = a.inputs[0];
  KILN_CHECK(x.is_contiguous(),
             "as_strided: backward needs a contiguous input (got strides {} for shape {}); call contiguous() first",
             shape_str(x.strides()), shape_str(x.sizes()));
  const Shape& size = attr_ints(a.attrs, 0);
  const Shape& stride = attr_ints(a.attrs, 1);
  const TensorOptions longs = TensorOptions(DType::Int64).device(x.device());
  Tensor position = full(size, attr_int(a.attrs, 2) - x.storage_offset(), longs);
  for (size_t d = 0; d < size.size(); ++d) {
    Shape s(size.size(), 1);
    s[d] = size[d];
    position = add(position, mul(arange(0, size[d], 1, longs), stride[d]).view(s));
  }
  const Tensor flat = zeros({x.numel()}, grad0(a).options());
  g[0] = scatter_add(flat, 0, position.reshape({-1}), grad0(a).reshape({-1})).view(x.sizes());
  return g;
}

constexpr OpDesc view_desc(const char* name, std::span<const AttrSpec> attrs, BackwardFn bw = &view_backward,
                           uint32_t saved = 0, uint32_t flags = kOpView) {
  return OpDesc{.name = name,
                .inputs = kSelf,
                .attrs = attrs,
                .flags = flags,
                .replay = &replay_view,
                .cost = &cost::none,
                .backward = bw,
                .saved = saved,
                .fusion = FusionRole::View};
}

}  // namespace

constinit const OpDesc op::view = view_desc("view", kSizeAttr);
// reshape copies when the layout allows no view: not flagged kOpView (autograd looks at the
// output's storage instead).
constinit const OpDesc op::reshape = view_desc("reshape", kShapeAttr, &view_backward, 0, 0);
constinit const OpDesc op::transpose = view_desc("transpose", kTransposeAttrs);
constinit const OpDesc op::t = view_desc("t", {});
constinit const OpDesc op::permute = view_desc("permute", kPermuteAttrs);
constinit const OpDesc op::narrow = view_desc("narrow", kNarrowAttrs);
constinit const OpDesc op::slice = view_desc("slice", kSliceAttrs);
constinit const OpDesc op::select = view_desc("select", kSelectAttrs);
constinit const OpDesc op::unsqueeze = view_desc("unsqueeze", kDimAttr);
constinit const OpDesc op::squeeze = view_desc("squeeze", kOptionalDimAttr);
constinit const OpDesc op::expand = view_desc("expand", kSizeAttr);
constinit const OpDesc op::as_strided = view_desc("as_strided", kAsStridedAttrs, &as_strided_backward, save_input(0));
constinit const OpDesc op::detach = view_desc("detach", {}, nullptr, 0, kOpView | kOpNonDifferentiable);

}  // namespace kiln
