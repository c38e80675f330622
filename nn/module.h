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
#include "state_dict.h"

namespace kiln::nn {

/// What Module::load_state_dict() did not match (PyTorch's _IncompatibleKeys): keys the
/// module has but the state dict lacks, and keys the state dict has but the module lacks.
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
  /// True when every key matched.
  bool empty() const { return missing_keys.empty() && unexpected_keys.empty(); }
};

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

  /// Every parameter and buffer under its dotted name ("0.weight", "fc.bias"), in PyTorch's
  /// order (each module's parameters, then its buffers, then its children). The values
  /// share memory with the module's tensors (writing into one writes the module) but carry
  /// no autograd state, as PyTorch's detached state_dict() values.
  StateDict state_dict() const;
  /// Copies `state_dict` into the parameters and buffers (converting dtype and device as
  /// copy_ does) and returns the keys that did not match. Throws, listing every problem,
  /// when a shape differs or (with strict) a key is missing or unexpected; a load that
  /// throws changes nothing.
  IncompatibleKeys load_state_dict(const StateDict& state_dict, bool strict = true);

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
  void collect_state(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
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
