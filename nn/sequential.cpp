// nn::Sequential.
#include "sequential.h"

#include <string>

namespace kiln::nn {

Sequential& Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(size()), std::move(module));
  return *this;
}

std::shared_ptr<Module> Sequential::operator[](size_t i) const {
  KILN_CHECK(i < size(), "{}: index {} is out of range for {} modules", name(), i, size());
  return named_children()[i].second;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& [_, m] : named_children()) h = m->forward(h);
  return h;
}

}  // namespace kiln::nn
