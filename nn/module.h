// Module: the base of every layer. It owns named parameters, buffers and child modules,
// and gives the PyTorch conveniences on top of them: dotted named_parameters(), to(device /
// dtype) that moves every tensor in place (so handles held elsewhere follow), train/eval,
// and the printed repr PyTorch users recognise.
#pragma once

#include <deque>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln::nn {

/// Base class of layers; see the file comment. Not copyable (a layer has identity); movable.
class Module {
 public:
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

  /// The layer's class name as shown in its repr ("Linear").
  const std::string& name() const { return name_; }

  /// The layer's computation; the base class throws (a container without forward).
  virtual Tensor forward(const Tensor& x);
  /// Calls forward(x).
  Tensor operator()(const Tensor& x) { return forward(x); }

  /// Adds a parameter; floating parameters are marked requires_grad (unless told not to).
  /// Returns the stored handle (it stays valid while the module lives). Names must be
  /// unique and contain no '.'.
  Tensor& register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  /// Adds a buffer: state that is not trained (running statistics, masks).
  Tensor& register_buffer(const std::string& name, Tensor value);
  /// Adds a child module and returns it.
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  /// Parameters of this module and (with recurse) its descendants, in registration order.
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// Parameters with dotted names ("0.weight", "encoder.fc.bias").
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  /// Buffers of this module and (with recurse) its descendants.
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// Buffers with dotted names.
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  /// Direct children.
  std::vector<std::shared_ptr<Module>> children() const;
  /// Direct children with their names.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }

  /// Moves every parameter and buffer to `device`, in place.
  Module& to(Device device);
  /// Converts every floating parameter and buffer to `dtype`, in place.
  Module& to(DType dtype);
  /// to(device) then to(dtype).
  Module& to(Device device, DType dtype);

  /// Sets training mode on this module and its descendants.
  Module& train(bool on = true);
  /// Sets evaluation mode (train(false)).
  Module& eval() { return train(false); }
  /// True in training mode.
  bool is_training() const { return training_; }

  /// One-line description of the layer's configuration ("in_features=2, ...").
  virtual std::string extra_repr() const { return {}; }
  /// PyTorch-style printout of the module tree.
  std::string repr() const;

 protected:
  explicit Module(std::string name) : name_(std::move(name)) {}

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const char* what, const std::string& name) const;
  void collect(const std::string& prefix, bool recurse, bool params,
               std::vector<std::pair<std::string, Tensor>>& out) const;
  void convert(std::optional<Device> device, std::optional<DType> dtype);

  std::string name_;
  bool training_ = true;
  // Deques, not vectors: register_parameter/register_buffer return a reference to the
  // stored handle, which must survive later registrations (a vector would reallocate).
  std::deque<std::pair<std::string, Tensor>> parameters_;
  std::deque<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// Writes m.repr().
std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace kiln::nn
