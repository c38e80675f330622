// Sequential: runs its children in order, each one's output feeding the next.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include "module.h"

namespace kiln::nn {

/// A chain of modules named "0", "1", ... in the order they were added.
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  /// Builds the chain from modules given by value: Sequential(Linear(2, 3), ReLU()).
  /// Modules cannot be copied, so lvalues are refused (std::move them, or push_back a
  /// shared_ptr): without that rule Sequential(other_sequential) would pick this constructor
  /// and recurse into itself forever.
  template <typename... M>
    requires(sizeof...(M) > 0 &&
             ((std::is_base_of_v<Module, std::decay_t<M>> && !std::is_lvalue_reference_v<M>) && ...))
  explicit Sequential(M&&... modules) : Module("Sequential") {
    (push_back(std::make_shared<std::decay_t<M>>(std::forward<M>(modules))), ...);
  }

  /// Appends a module (registered under the next index).
  Sequential& push_back(std::shared_ptr<Module> module);
  /// Number of modules in the chain.
  size_t size() const { return named_children().size(); }
  /// The i-th module.
  std::shared_ptr<Module> operator[](size_t i) const;
  /// Feeds x through every module in order.
  Tensor forward(const Tensor& x) override;

 protected:
  explicit Sequential(std::string name) : Module(std::move(name)) {}
};

}  // namespace kiln::nn
