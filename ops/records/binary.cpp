// Op records of the two-operand elementwise ops (add ... ge, where, equal, allclose): slots,
// attributes, replay, cost and backward formulas. A number operand is recorded as the
// attribute self_number or other_number, its tensor slot left empty.
#include "../elementwise.h"
#include "record_util.h"

namespace kiln {

namespace {

using detail::binary_op;
using detail::Operand;
using namespace records;

constexpr const char* kBinaryInputs[] = {"self", "other"};
constexpr AttrSpec kBinaryAttrs[] = {
    {"alpha", AttrKind::Scalar}, {"self_number", AttrKind::OptionalScalar}, {"other_number", AttrKind::OptionalScalar}};

// Operand `i` of a recorded binary call: its tensor, or the number recorded in its place.
Operand operand(std::span<const Tensor> inputs, std::span<const AttrValue> attrs, size_t i) {
  if (in(inputs, i).defined()) return Operand(inputs[i]);
  const std::optional<Scalar> n = attr_optional_scalar(attrs, 1 + i);
  KILN_CHECK(n.has_value(), "replay: binary op input {} is neither a tensor nor a recorded number", i);
  return Operand(*n);
}

std::vector<Tensor> replay_binary(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  return one(binary_op(op, operand(inputs, attrs, 0), operand(inputs, attrs, 1), attr_scalar(attrs, 0)));
}

// Operand i of a backward call (a saved tensor or the recorded number), as an Operand.
Operand saved(const BackwardArgs& a, size_t i) { return operand(a.inputs, a.attrs, i); }
Tensor as_tensor(const Operand& o, const Tensor& like) {
  return o.tensor != nullptr ? *o.tensor : full({}, o.number, TensorOptions(like.dtype()).device(like.device()));
}

std::vector<Tensor> add_backward(const BackwardArgs& a) {
  auto g = grads(2);
  const Tensor& go = grad0(a);
  const Scalar alpha = attr_scalar(a.attrs, 0);
  const bool negate = a.op.code == static_cast<int>(BinaryOp::Sub);
  if (a.needs_grad[0]) g[0] = go;
  if (a.needs_grad[1]) {
    const bool unit = alpha.to_double() == 1.0;
    g[1] = negate ? (unit ? neg(go) : mul(go, Scalar(-alpha.to_double()))) : (unit ? go : mul(go, alpha));
  }
  return g;
}

std::vector<Tensor> mul_backward(const BackwardArgs& a) {
  auto g = grads(2);
  const Tensor& go = grad0(a);
  if (a.needs_grad[0]) g[0] = binary_op(op::mul, go, saved(a, 1));
  if (a.needs_grad[1]) g[1] = binary_op(op::mul, go, saved(a, 0));
  return g;
}

std::vector<Tensor> div_backward(const BackwardArgs& a) {
  auto g = grads(2);
  const Tensor& go = grad0(a);
  const Operand b = saved(a, 1);
  if (a.needs_grad[0]) g[0] = binary_op(op::div, go, b);
  if (a.needs_grad[1]) {  // -go * a / b^2 = -go * out / b
    const Tensor tb = as_tensor(b, go);
    g[1] = neg(div(mul(go, a.outputs[0]), tb));
  }
  return g;
}

std::vector<Tensor> pow_backward(const BackwardArgs& a) {
  auto g = grads(2);
  const Tensor& go = grad0(a);
  const Tensor& out = a.outputs[0];
  if (a.needs_grad[0]) {  // go * b * a^(b-1)
    const Tensor& base = a.inputs[0];
    if (a.inputs[1].defined()) {
      g[0] = mul(mul(go, a.inputs[1]), pow(base, sub(a.inputs[1], Scalar(1))));
    } else {
      const Scalar e = *attr_optional_scalar(a.attrs, 2);
      g[0] = e.to_double() == 0.0 ? zeros_like(base) : mul(mul(go, e), pow(base, Scalar(e.to_double() - 1.0)));
    }
  }
  if (a.needs_grad[1]) {  // go * a^b * log(a); 0 where a == 0 and b >= 0 (PyTorch's convention)
    const Tensor base = as_tensor(saved(a, 0), go);
    const Tensor term = mul(mul(go, out), log(base));
    const Tensor& e = a.inputs[1];
    const Tensor both = mul(eq(base, Scalar(0)).to(DType::Int32), ge(e, Scalar(0)).to(DType::Int32));
    g[1] = masked_fill(term, ne(both, Scalar(0)), 0);
  }
  return g;
}

std::vector<Tensor> where_backward(const BackwardArgs& a) {
  auto g = grads(3);
  const Tensor& go = grad0(a);
  const Tensor& cond = a.inputs[0];
  if (a.needs_grad[1]) g[1] = masked_fill(go, eq(cond, false), 0);
  if (a.needs_grad[2]) g[2] = masked_fill(go, cond, 0);
  return g;
}

std::vector<Tensor> replay_where(const OpDesc&, std::span<const Tensor> inputs, std::span<const AttrValue>) {
  return one(where(inputs[0], inputs[1], inputs[2]));
}

Tensor bool_tensor(bool v) { return full({}, v, TensorOptions(DType::Bool)); }

std::vector<Tensor> replay_equal(const OpDesc&, std::span<const Tensor> inputs, std::span<const AttrValue>) {
  return one(bool_tensor(equal(inputs[0], inputs[1])));
}

std::vector<Tensor> replay_allclose(const OpDesc&, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  return one(bool_tensor(
      allclose(inputs[0], inputs[1], attr_double(attrs, 0), attr_double(attrs, 1), attr_bool(attrs, 2))));
}

constexpr uint32_t kSaveBoth = save_input(0) | save_input(1);

constexpr OpDesc binary(const char* name, BinaryOp code, BackwardFn backward, uint32_t saved, uint32_t flags = 0) {
  return OpDesc{.name = name,
                .inputs = kBinaryInputs,
                .attrs = kBinaryAttrs,
                .flags = flags,
                .replay = &replay_binary,
                .cost = &cost::elementwise,
                .backward = backward,
                .saved = saved,
                .fusion = FusionRole::Elementwise,
                .code = static_cast<int>(code)};
}

constexpr OpDesc comparison(const char* name, BinaryOp code) {
  return binary(name, code, nullptr, 0, kOpNonDifferentiable);
}

constexpr const char* kWhereInputs[] = {"condition", "self", "other"};
constexpr const char* kPairInputs[] = {"self", "other"};
constexpr AttrSpec kAllcloseAttrs[] = {
    {"rtol", AttrKind::Double}, {"atol", AttrKind::Double}, {"equal_nan", AttrKind::Bool}};

}  // namespace

constinit const OpDesc op::add = binary("add", BinaryOp::Add, &add_backward, 0);
constinit const OpDesc op::sub = binary("sub", BinaryOp::Sub, &add_backward, 0);
constinit const OpDesc op::mul = binary("mul", BinaryOp::Mul, &mul_backward, kSaveBoth);
constinit const OpDesc op::div = binary("div", BinaryOp::Div, &div_backward, save_input(1) | save_output(0));
constinit const OpDesc op::pow = binary("pow", BinaryOp::Pow, &pow_backward, kSaveBoth | save_output(0));
constinit const OpDesc op::eq = comparison("eq", BinaryOp::Eq);
constinit const OpDesc op::ne = comparison("ne", BinaryOp::Ne);
constinit const OpDesc op::lt = comparison("lt", BinaryOp::Lt);
constinit const OpDesc op::le = comparison("le", BinaryOp::Le);
constinit const OpDesc op::gt = comparison("gt", BinaryOp::Gt);
constinit const OpDesc op::ge = comparison("ge", BinaryOp::Ge);
constinit const OpDesc op::where = {.name = "where",
                                    .inputs = kWhereInputs,
                                    .attrs = {},
                                    .replay = &replay_where,
                                    .cost = &cost::elementwise,
                                    .backward = &where_backward,
                                    .saved = save_input(0),
                                    .fusion = FusionRole::Elementwise};
constinit const OpDesc op::equal = {.name = "equal",
                                    .inputs = kPairInputs,
                                    .attrs = {},
                                    .flags = kOpNonDifferentiable | kOpHostRead,
                                    .replay = &replay_equal};
constinit const OpDesc op::allclose = {.name = "allclose",
                                       .inputs = kPairInputs,
                                       .attrs = kAllcloseAttrs,
                                       .flags = kOpNonDifferentiable | kOpHostRead,
                                       .replay = &replay_allclose};

}  // namespace kiln
