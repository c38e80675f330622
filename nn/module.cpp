// Module bookkeeping: registration checks, recursive collection with dotted names,
// in-place device/dtype conversion, and the repr.
#include "module.h"

#include "../ops/grad_mode.h"

#include <ostream>
#include <sstream>

namespace kiln::nn {

Tensor Module::forward(const Tensor&) {
  KILN_FAIL("{}: forward() is not implemented for this module", name_);
}

void Module::check_new_name(const char* what, const std::string& name) const {
  KILN_CHECK(!name.empty(), "{}: {} name must not be empty", what, name_);
  KILN_CHECK(name.find('.') == std::string::npos, "{}: {} name \"{}\" must not contain \".\"", what, name_, name);
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list)
      if (n == name) return true;
    return false;
  };
  KILN_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_),
             "{}: {} already has an attribute named \"{}\"", what, name_, name);
}

Tensor& Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name("register_parameter", name);
  KILN_CHECK(value.defined(), "register_parameter: parameter \"{}\" of {} is an undefined tensor", name, name_);
  if (requires_grad && value.is_floating_point()) value.requires_grad_(true);
  parameters_.emplace_back(name, std::move(value));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name("register_buffer", name);
  KILN_CHECK(value.defined(), "register_buffer: buffer \"{}\" of {} is an undefined tensor", name, name_);
  buffers_.emplace_back(name, std::move(value));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name("register_module", name);
  KILN_CHECK(module != nullptr, "register_module: child \"{}\" of {} is null", name, name_);
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, bool recurse, bool params,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [n, t] : params ? parameters_ : buffers_) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, child] : children_) child->collect(prefix + n + ".", true, params, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", recurse, true, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", recurse, false, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [_, c] : children_) out.push_back(c);
  return out;
}

void Module::convert(std::optional<Device> device, std::optional<DType> dtype) {
  // Convert the whole tree first, then swap the results in, so a failure part-way (say,
  // out of memory) leaves every tensor as it was.
  std::vector<std::pair<Tensor, Tensor>> plan;
  NoGradGuard no_grad;  // moving parameters is not part of any computation to differentiate
  auto add = [&](const Tensor& t) {
    Tensor moved = device ? t.to(*device) : t;
    if (dtype && t.is_floating_point()) moved = moved.to(*dtype);
    plan.emplace_back(t, moved);
  };
  for (const auto& [_, t] : named_parameters()) add(t);
  for (const auto& [_, t] : named_buffers()) add(t);
  for (auto& [target, value] : plan) {
    if (!target.is_same(value)) target.set_data(value);  // requires_grad stays with the handle
  }
}

Module& Module::to(Device device) {
  convert(device, std::nullopt);
  return *this;
}

Module& Module::to(DType dtype) {
  KILN_CHECK(is_floating(dtype), "Module::to: only floating dtypes are allowed, got {}", dtype);
  convert(std::nullopt, dtype);
  return *this;
}

Module& Module::to(Device device, DType dtype) {
  KILN_CHECK(is_floating(dtype), "Module::to: only floating dtypes are allowed, got {}", dtype);
  convert(device, dtype);
  return *this;
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [_, child] : children_) child->train(on);
  return *this;
}

namespace {
// Indents every line but the first by `spaces` (PyTorch's _addindent).
std::string add_indent(const std::string& s, int spaces) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '\n') out += std::string(spaces, ' ');
  }
  return out;
}
}  // namespace

std::string Module::repr() const {
  std::vector<std::string> lines;
  std::istringstream extra(extra_repr());
  for (std::string line; std::getline(extra, line);) lines.push_back(line);
  const size_t extra_count = lines.size();
  for (const auto& [n, child] : children_) lines.push_back("(" + n + "): " + add_indent(child->repr(), 2));
  std::string out = name_ + "(";
  if (extra_count == 1 && children_.empty()) {
    out += lines[0];
  } else if (!lines.empty()) {
    out += "\n";
    for (const auto& l : lines) out += "  " + l + "\n";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

}  // namespace kiln::nn
