// Op records of the optimizers' fused steps (_fused_sgd_, _fused_adam_, _fused_adamw_). Each
// records its list form: the parameters and their states as one variadic list (params,
// grads, then each state list), the hyperparameters and the per-parameter step counts (or
// SGD's first-step flags) as attributes; a single-parameter call is a list of one. They write
// their inputs in place and have no gradient.
#include "../optimizer_step.h"
#include "record_util.h"

namespace kiln {

namespace {

using namespace records;

constexpr const char* kLists[] = {"params, grads, states..."};
constexpr AttrSpec kSgdAttrs[] = {{"num_params", AttrKind::Int},     {"first_steps", AttrKind::IntList},
                                  {"lr", AttrKind::Double},          {"momentum", AttrKind::Double},
                                  {"dampening", AttrKind::Double},   {"weight_decay", AttrKind::Double},
                                  {"nesterov", AttrKind::Bool},      {"maximize", AttrKind::Bool}};
constexpr AttrSpec kAdamAttrs[] = {{"num_params", AttrKind::Int},   {"steps", AttrKind::DoubleList},
                                   {"lr", AttrKind::Double},        {"beta1", AttrKind::Double},
                                   {"beta2", AttrKind::Double},     {"eps", AttrKind::Double},
                                   {"weight_decay", AttrKind::Double}, {"amsgrad", AttrKind::Bool},
                                   {"maximize", AttrKind::Bool}};

// The k-th list of n tensors in `inputs` (empty when the call had fewer lists).
std::span<const Tensor> list(std::span<const Tensor> inputs, size_t n, size_t k) {
  return k * n + n <= inputs.size() ? inputs.subspan(k * n, n) : std::span<const Tensor>();
}

std::vector<Tensor> replay_sgd(const OpDesc&, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  const auto n = static_cast<size_t>(attr_int(attrs, 0));
  const SgdConfig config{attr_double(attrs, 2), attr_double(attrs, 3), attr_double(attrs, 4),
                         attr_double(attrs, 5), attr_bool(attrs, 6),   attr_bool(attrs, 7)};
  const Shape& firsts = attr_ints(attrs, 1);
  const std::unique_ptr<bool[]> first(new bool[n]);
  for (size_t i = 0; i < n; ++i) first[i] = firsts[i] != 0;
  _fused_sgd_(list(inputs, n, 0), list(inputs, n, 1), list(inputs, n, 2), config, {first.get(), n});
  const auto params = list(inputs, n, 0);
  return {params.begin(), params.end()};
}

std::vector<Tensor> replay_adam(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  const auto n = static_cast<size_t>(attr_int(attrs, 0));
  const AdamConfig config{attr_double(attrs, 2), attr_double(attrs, 3), attr_double(attrs, 4), attr_double(attrs, 5),
                          attr_double(attrs, 6), attr_bool(attrs, 7),   attr_bool(attrs, 8)};
  const std::vector<double>& steps = attr_doubles(attrs, 1);
  using ListForm = void (*)(std::span<const Tensor>, std::span<const Tensor>, std::span<const Tensor>,
                            std::span<const Tensor>, std::span<const Tensor>, std::span<const double>,
                            const AdamConfig&);
  const ListForm call = &op == &op::_fused_adamw_ ? static_cast<ListForm>(&kiln::_fused_adamw_)
                                                  : static_cast<ListForm>(&kiln::_fused_adam_);
  call(list(inputs, n, 0), list(inputs, n, 1), list(inputs, n, 2), list(inputs, n, 3), list(inputs, n, 4), steps,
       config);
  const auto params = list(inputs, n, 0);
  return {params.begin(), params.end()};
}

constexpr OpDesc step_desc(const char* name, std::span<const AttrSpec> attrs, ReplayFn replay) {
  return OpDesc{.name = name,
                .inputs = kLists,
                .attrs = attrs,
                .flags = kOpVariadic | kOpInPlace | kOpNonDifferentiable,
                .replay = replay};
}

}  // namespace

constinit const OpDesc op::_fused_sgd_ = step_desc("_fused_sgd_", kSgdAttrs, &replay_sgd);
constinit const OpDesc op::_fused_adam_ = step_desc("_fused_adam_", kAdamAttrs, &replay_adam);
constinit const OpDesc op::_fused_adamw_ = step_desc("_fused_adamw_", kAdamAttrs, &replay_adam);

}  // namespace kiln
