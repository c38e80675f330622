// Optimizer's group bookkeeping, zero_grad and the untyped part of its state dict.
#include "optimizer.h"

#include <unordered_set>

#include "../core/graph_capture.h"
#include "../ops/factory.h"
#include "../tensor/shape.h"
#include "../ops/grad_mode.h"

namespace kiln::optim {

void Optimizer::step() {
  cuda::run_updatable([this] { step_impl(); });
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Group& group : groups_)
    for (Tensor p : group.params) {
      Tensor& grad = p.mutable_grad();
      if (!grad.defined()) continue;
      if (set_to_none)
        grad = Tensor();
      else
        grad.zero_();
    }
}

void Optimizer::check_group(size_t g) const {
  KILN_CHECK(g < groups_.size(), "{}: param group {} does not exist (the optimizer has {})", name_, g, groups_.size());
}

const std::vector<Tensor>& Optimizer::params(size_t g) const {
  check_group(g);
  return groups_[g].params;
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  out.reserve(num_params_);
  for (const Group& group : groups_) out.insert(out.end(), group.params.begin(), group.params.end());
  return out;
}

std::optional<double> Optimizer::initial_lr(size_t g) const {
  check_group(g);
  return groups_[g].initial_lr;
}

void Optimizer::set_initial_lr(size_t g, double lr) {
  check_group(g);
  KILN_CHECK(0.0 <= lr, "{}: invalid initial learning rate: {}", name_, lr);
  groups_[g].initial_lr = lr;
}

void Optimizer::add_group_params(std::vector<Tensor> params) {
  KILN_CHECK(!params.empty(), "{}: got an empty parameter list (param group {})", name_, groups_.size());
  std::unordered_set<const TensorImpl*> seen;
  for (const Group& group : groups_)
    for (const Tensor& p : group.params) seen.insert(p.unsafe_impl());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    const size_t index = num_params_ + i;
    KILN_CHECK(p.defined(), "{}: parameter {} is an undefined tensor", name_, index);
    KILN_CHECK(p.is_floating_point(), "{}: parameter {} has dtype {}; only floating point tensors can be optimized",
               name_, index, p.dtype());
    KILN_CHECK(p.is_leaf(), "{}: can't optimize a non-leaf tensor (parameter {})", name_, index);
    KILN_CHECK(seen.insert(p.unsafe_impl()).second,
               "{}: parameter {} appears more than once (in this group or in another group)", name_, index);
  }
  Group group;
  group.first = num_params_;
  num_params_ += params.size();
  group.params = std::move(params);
  groups_.push_back(std::move(group));
}

void Optimizer::check_grad(size_t index, const Tensor& param, const Tensor& grad) const {
  KILN_CHECK(grad.sizes() == param.sizes(),
             "{}: the gradient of parameter {} has shape {} but the parameter has "
             "shape {}",
             name_, index, shape_str(grad.sizes()), shape_str(param.sizes()));
  KILN_CHECK(grad.dtype() == param.dtype(),
             "{}: the gradient of parameter {} has dtype {} but the parameter has "
             "dtype {}",
             name_, index, grad.dtype(), param.dtype());
  KILN_CHECK(grad.device() == param.device(), "{}: the gradient of parameter {} is on {} but the parameter is on {}",
             name_, index, grad.device(), param.device());
}

void Optimizer::write_group_keys(StateDict& dict) const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    std::vector<int64_t> indices(groups_[g].params.size());
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(groups_[g].first + i);
    dict.insert(prefix + "params", from_vector(indices));
    if (groups_[g].initial_lr) dict.insert(prefix + "initial_lr", scalar_state(*groups_[g].initial_lr));
  }
}

std::vector<std::optional<double>> Optimizer::read_group_keys(StateReader& reader) const {
  const size_t count = groups_.size();
  KILN_CHECK(!reader.has("param_groups." + std::to_string(count) + ".params"),
             "{}.load_state_dict: the state dict has more parameter groups than the optimizer's {}", name_, count);
  std::vector<std::optional<double>> initial_lrs(count);
  for (size_t g = 0; g < count; ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    KILN_CHECK(reader.has(prefix + "params"),
               "{}.load_state_dict: the state dict has {} parameter groups but the "
               "optimizer has {}",
               name_, g, count);
    const Tensor& indices = reader.tensor(prefix + "params");
    const size_t n = groups_[g].params.size();
    KILN_CHECK(indices.dim() == 1 && !indices.is_floating_point() && indices.dtype() != kBool,
               "{}.load_state_dict: {}params must be a 1-D integer tensor, got {} of shape {}", name_, prefix,
               indices.dtype(), shape_str(indices.sizes()));
    KILN_CHECK(static_cast<size_t>(indices.numel()) == n,
               "{}.load_state_dict: parameter group {} of the state dict has {} parameters but the optimizer's has {}",
               name_, g, indices.numel(), n);
    const std::vector<int64_t> values = indices.to_vector<int64_t>();
    for (size_t i = 0; i < n; ++i)
      KILN_CHECK(values[i] == static_cast<int64_t>(groups_[g].first + i),
                 "{}.load_state_dict: {}params lists parameter {} at position {}; the optimizer numbers it {}", name_,
                 prefix, values[i], i, groups_[g].first + i);
    if (reader.has(prefix + "initial_lr")) {
      const double lr = reader.number(prefix + "initial_lr");
      KILN_CHECK(0.0 <= lr, "{}.load_state_dict: invalid {}initial_lr: {}", name_, prefix, lr);
      initial_lrs[g] = lr;
    }
  }
  return initial_lrs;
}

void Optimizer::set_initial_lrs(std::vector<std::optional<double>> lrs) {
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].initial_lr = lrs[g];
}

std::vector<std::vector<size_t>> fused_buckets(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  struct Key {
    Device device;
    DType dtype;
    bool contiguous;
    bool operator==(const Key&) const = default;
  };
  std::vector<Key> keys;
  std::vector<std::vector<size_t>> buckets;
  for (size_t k = 0; k < params.size(); ++k) {
    const Key key{params[k].device(), params[k].dtype(), params[k].is_contiguous() && grads[k].is_contiguous()};
    size_t b = 0;
    while (b < keys.size() && !(keys[b] == key)) ++b;
    if (b == keys.size()) {
      keys.push_back(key);
      buckets.emplace_back();
    }
    buckets[b].push_back(k);
  }
  return buckets;
}

Tensor load_state_tensor(const std::string& owner, const std::string& key, const Tensor& value, const Tensor& param,
                         size_t index) {
  KILN_CHECK(value.sizes() == param.sizes(), "{}.load_state_dict: {} has shape {} but parameter {} has shape {}", owner,
             key, shape_str(value.sizes()), index, shape_str(param.sizes()));
  KILN_CHECK(value.is_floating_point(), "{}.load_state_dict: {} has dtype {}; optimizer state is floating point", owner,
             key, value.dtype());
  Tensor out = value.to(param.device(), param.dtype());
  // A fresh copy: the optimizer must not write into the caller's dict.
  if (out.is_alias_of(value) || !out.is_contiguous()) out = out.clone();
  return out;
}

}  // namespace kiln::optim
