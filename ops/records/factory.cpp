// Op records of the factories and fills. Factories have no tensor inputs; their attributes
// rebuild them. The random ones (rand, randn, uniform_, normal_) draw new numbers when
// replayed, as a captured graph's replay should; from_vector and tensor take the caller's
// host data, which a record does not keep, so they cannot be replayed (capture keeps their
// results as constants).
#include "record_util.h"

namespace kiln {

namespace {

using namespace records;

constexpr const char* kSelf[] = {"self"};
constexpr AttrSpec kSizeAttrs[] = {{"size", AttrKind::IntList}, {"dtype", AttrKind::DType}, {"device", AttrKind::Device}};
constexpr AttrSpec kFullAttrs[] = {
    {"size", AttrKind::IntList}, {"fill_value", AttrKind::Scalar}, {"dtype", AttrKind::DType}, {"device", AttrKind::Device}};
constexpr AttrSpec kEyeAttrs[] = {
    {"n", AttrKind::Int}, {"m", AttrKind::Int}, {"dtype", AttrKind::DType}, {"device", AttrKind::Device}};
constexpr AttrSpec kArangeAttrs[] = {{"start", AttrKind::Scalar},
                                     {"end", AttrKind::Scalar},
                                     {"step", AttrKind::Scalar},
                                     {"dtype", AttrKind::DType},
                                     {"device", AttrKind::Device}};
constexpr AttrSpec kFillAttrs[] = {{"value", AttrKind::Scalar}};
constexpr AttrSpec kUniformAttrs[] = {{"from", AttrKind::Double}, {"to", AttrKind::Double}};
constexpr AttrSpec kNormalAttrs[] = {{"mean", AttrKind::Double}, {"std", AttrKind::Double}};

TensorOptions options_at(std::span<const AttrValue> attrs, size_t dtype_slot) {
  return TensorOptions(attr_dtype(attrs, dtype_slot)).device(attr_device(attrs, dtype_slot + 1));
}

std::vector<Tensor> replay_factory(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  if (&op == &op::full) return one(full(attr_ints(attrs, 0), attr_scalar(attrs, 1), options_at(attrs, 2)));
  if (&op == &op::eye) return one(eye(attr_int(attrs, 0), attr_int(attrs, 1), options_at(attrs, 2)));
  if (&op == &op::arange)
    return one(arange(attr_scalar(attrs, 0), attr_scalar(attrs, 1), attr_scalar(attrs, 2), options_at(attrs, 3)));
  if (&op == &op::empty) return one(empty(attr_ints(attrs, 0), options_at(attrs, 1)));
  if (&op == &op::zeros) return one(zeros(attr_ints(attrs, 0), options_at(attrs, 1)));
  if (&op == &op::ones) return one(ones(attr_ints(attrs, 0), options_at(attrs, 1)));
  if (&op == &op::rand) return one(rand(attr_ints(attrs, 0), options_at(attrs, 1)));
  if (&op == &op::randn) return one(randn(attr_ints(attrs, 0), options_at(attrs, 1)));
  Tensor self = inputs[0];
  if (&op == &op::fill_) return one(self.fill_(attr_scalar(attrs, 0)));
  if (&op == &op::zero_) return one(self.zero_());
  if (&op == &op::uniform_) return one(self.uniform_(attr_double(attrs, 0), attr_double(attrs, 1)));
  return one(self.normal_(attr_double(attrs, 0), attr_double(attrs, 1)));
}

// Overwritten values: nothing flows back to the old contents.
std::vector<Tensor> fill_backward(const BackwardArgs& a) { return grads(a.needs_grad.size()); }

constexpr OpDesc factory(const char* name, std::span<const AttrSpec> attrs, uint32_t flags = 0,
                         ReplayFn replay = &replay_factory) {
  return OpDesc{.name = name,
                .inputs = {},
                .attrs = attrs,
                .flags = kOpFactory | kOpNonDifferentiable | flags,
                .replay = replay};
}

constexpr OpDesc fill(const char* name, std::span<const AttrSpec> attrs, uint32_t flags = 0) {
  return OpDesc{.name = name,
                .inputs = kSelf,
                .attrs = attrs,
                .flags = kOpInPlace | flags,
                .replay = &replay_factory,
                .backward = &fill_backward};
}

}  // namespace

constinit const OpDesc op::empty = factory("empty", kSizeAttrs);
constinit const OpDesc op::zeros = factory("zeros", kSizeAttrs);
constinit const OpDesc op::ones = factory("ones", kSizeAttrs);
constinit const OpDesc op::full = factory("full", kFullAttrs);
constinit const OpDesc op::eye = factory("eye", kEyeAttrs);
constinit const OpDesc op::arange = factory("arange", kArangeAttrs);
constinit const OpDesc op::rand = factory("rand", kSizeAttrs, kOpRandom);
constinit const OpDesc op::randn = factory("randn", kSizeAttrs, kOpRandom);
constinit const OpDesc op::from_vector = factory("from_vector", kSizeAttrs, 0, nullptr);
constinit const OpDesc op::tensor = factory("tensor", kSizeAttrs, 0, nullptr);
constinit const OpDesc op::fill_ = fill("fill_", kFillAttrs);
constinit const OpDesc op::zero_ = fill("zero_", {});
constinit const OpDesc op::uniform_ = fill("uniform_", kUniformAttrs, kOpRandom);
constinit const OpDesc op::normal_ = fill("normal_", kNormalAttrs, kOpRandom);

}  // namespace kiln
