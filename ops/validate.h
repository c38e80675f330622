// Input validation shared by the ops: defined tensors, one device, PyTorch's result type.
// Every message starts with the op's name, as the whole library's errors do.
#pragma once

#include <initializer_list>
#include <optional>

#include "../tensor/tensor.h"

namespace kiln {

/// Throws "<op>: argument '<arg>' is an undefined tensor" for a default-constructed handle.
void check_defined(const char* op, const Tensor& t, const char* arg = "input");

/// The one device all tensors live on. A 0-dim CPU tensor may join tensors on a GPU, as in
/// PyTorch; any other mix throws "<op>: expected all tensors to be on the same device...".
Device common_device(const char* op, std::initializer_list<const Tensor*> tensors);

/// PyTorch's type promotion for an op's operands: tensors with dims outrank 0-dim tensors,
/// which outrank plain numbers, except that a higher category (bool < integer < floating)
/// always wins; a floating number with integer tensors gives float32.
class ResultType {
 public:
  /// Adds a tensor operand.
  ResultType& add(const Tensor& t);
  /// Adds a plain-number operand.
  ResultType& add(const Scalar& s);
  /// The promoted dtype (requires at least one operand).
  DType get() const;

 private:
  std::optional<DType> dim_, zero_dim_, wrapped_;
};

/// result type of two tensors.
DType result_type(const Tensor& a, const Tensor& b);
/// result type of a tensor and a number.
DType result_type(const Tensor& a, const Scalar& b);

/// A 0-dim CPU tensor holding `value` as `dtype` (the form numbers take inside ops).
Tensor scalar_tensor(const Scalar& value, DType dtype);

}  // namespace kiln
