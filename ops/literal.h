// tensor({...}): a tensor written as a (nested) braced list, like torch.tensor([...]).
//
//   tensor({1.0, 2.0, 3.0})     float32 (PyTorch's default dtype for Python floats)
//   tensor({1, 2, 3})           int64
//   tensor({true, false})       bool
//   tensor({{1, 2}, {3, 4}})    int64 [2, 2]; any depth
//   tensor({1, 2.5})            float32: one floating number makes the whole tensor floating
//   tensor(3.5)                 a 0-dim float32 tensor
//   tensor({1, 2}, kFloat16)    TensorOptions (dtype, device, requires_grad) as the 2nd argument
//
// Every list at one depth must have the same length: a ragged list is an error naming the
// offending row ("row [1] has 3 elements, expected 2 (as row [0])").
#pragma once

#include <concepts>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln {

/// A number or a braced list of NestedLists: what tensor() accepts. Implicit from every
/// number type and from braced lists, so nested braces read as they do in Python.
class NestedList {
 public:
  /// An empty list ({}).
  NestedList() = default;
  /// A number (a leaf).
  template <typename T>
    requires(std::is_arithmetic_v<T> || std::same_as<T, Half> || std::same_as<T, BFloat16>)
  NestedList(T v) : value_(v), leaf_(true) {}  // NOLINT: implicit by design
  /// A list of numbers or lists.
  NestedList(std::initializer_list<NestedList> items) : items_(items) {}  // NOLINT: implicit by design

  /// True for a number, false for a list.
  bool is_number() const { return leaf_; }
  /// The number (is_number() only).
  const Scalar& value() const { return value_; }
  /// The elements (lists only).
  const std::vector<NestedList>& items() const { return items_; }

 private:
  Scalar value_;
  bool leaf_ = false;
  std::vector<NestedList> items_;
};

/// A new tensor holding the values of a number or nested braced list; the dtype is inferred
/// (bool < int64 < float32, as torch.tensor) unless options give one.
Tensor tensor(const NestedList& data, TensorOptions options = {});

}  // namespace kiln
