// Op records of copies and transfers (copy_, clone, contiguous, to, item, pin_memory, ...).
// Gradients pass through unchanged: the engine converts them back to each input's dtype
// and device.
#include "record_util.h"

namespace kiln {

namespace {

using namespace records;

constexpr const char* kSelf[] = {"self"};
constexpr const char* kCopyInputs[] = {"self", "src"};
constexpr AttrSpec kCopyAttrs[] = {{"non_blocking", AttrKind::Bool}};
constexpr AttrSpec kToAttrs[] = {
    {"device", AttrKind::Device}, {"dtype", AttrKind::DType}, {"non_blocking", AttrKind::Bool}};

Tensor scalar_result(const Scalar& s) { return full({}, s); }

std::vector<Tensor> replay_copy(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  const Tensor& x = inputs[0];
  if (&op == &op::copy_) {
    Tensor self = inputs[0];
    return one(self.copy_(inputs[1], attr_bool(attrs, 0)));
  }
  if (&op == &op::clone) return one(x.clone());
  if (&op == &op::contiguous) return one(x.contiguous());
  if (&op == &op::to || &op == &op::_to_copy)
    return one(x.to(attr_device(attrs, 0), attr_dtype(attrs, 1), attr_bool(attrs, 2)));
  if (&op == &op::item || &op == &op::_local_scalar_dense) return one(scalar_result(x.item()));
  if (&op == &op::to_vector) return one(x.to(Device::cpu()).clone());
  if (&op == &op::pin_memory || &op == &op::_pin_memory) return one(x.pin_memory());
  KILN_FAIL("replay: {} cannot be replayed", op.name);
}

std::vector<Tensor> identity_backward(const BackwardArgs& a) {
  auto g = grads(a.needs_grad.size());
  if (a.needs_grad[0]) g[0] = grad0(a);
  return g;
}

// copy_: the destination's old values are overwritten (no gradient); the source gets it all.
std::vector<Tensor> copy_backward(const BackwardArgs& a) {
  auto g = grads(2);
  if (a.needs_grad[1]) g[1] = grad0(a);
  return g;
}

constexpr OpDesc copy_desc(const char* name, std::span<const AttrSpec> attrs, uint32_t flags, BackwardFn bw,
                           std::span<const char* const> inputs = kSelf) {
  return OpDesc{.name = name, .inputs = inputs, .attrs = attrs, .flags = flags, .replay = &replay_copy, .backward = bw};
}

constexpr uint32_t kNoGrad = kOpNonDifferentiable | kOpHostRead;

// record_stream changes the allocator's bookkeeping only: nothing to replay.
std::vector<Tensor> replay_record_stream(const OpDesc&, std::span<const Tensor>, std::span<const AttrValue>) {
  KILN_FAIL("replay: record_stream takes a stream, which its record does not keep; call it again directly");
}

}  // namespace

constinit const OpDesc op::copy_ = copy_desc("copy_", kCopyAttrs, kOpInPlace, &copy_backward, kCopyInputs);
constinit const OpDesc op::clone = copy_desc("clone", {}, 0, &identity_backward);
constinit const OpDesc op::contiguous = copy_desc("contiguous", {}, 0, &identity_backward);
constinit const OpDesc op::to = copy_desc("to", kToAttrs, 0, &identity_backward);
constinit const OpDesc op::_to_copy = copy_desc("_to_copy", kToAttrs, 0, &identity_backward);
constinit const OpDesc op::item = copy_desc("item", {}, kNoGrad, nullptr);
constinit const OpDesc op::_local_scalar_dense = copy_desc("_local_scalar_dense", {}, kNoGrad, nullptr);
constinit const OpDesc op::to_vector = copy_desc("to_vector", {}, kNoGrad, nullptr);
constinit const OpDesc op::pin_memory = copy_desc("pin_memory", {}, 0, &identity_backward);
constinit const OpDesc op::_pin_memory = copy_desc("_pin_memory", {}, 0, &identity_backward);
constinit const OpDesc op::record_stream = {.name = "record_stream",
                                            .inputs = kSelf,
                                            .attrs = {},
                                            .flags = kOpNonDifferentiable,
                                            .replay = &replay_record_stream};

}  // namespace kiln
