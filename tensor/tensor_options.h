// TensorOptions: the dtype, device and requires_grad a factory builds a tensor with. The
// dtype is optional: factories default to float32, except full() and arange(), which
// infer it from their values as PyTorch does.
// Implicit from a DType or a Device, so zeros({2, 3}, kFloat64) and randn(shape, dev) read
// as they do in PyTorch's C++ API.
#pragma once

#include <optional>

#include "../core/device.h"
#include "dtype.h"

namespace kiln {

/// How a new tensor is made: element type, device, and whether it will carry gradients.
class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType dtype) : dtype_(dtype) {}     // NOLINT: implicit by design
  TensorOptions(Device device) : device_(device) {}  // NOLINT: implicit by design
  TensorOptions(DeviceType type) : device_(type == DeviceType::CPU ? Device::cpu() : Device::cuda(0)) {}  // NOLINT

  /// A copy with the dtype replaced.
  TensorOptions dtype(DType d) const {
    TensorOptions o = *this;
    o.dtype_ = d;
    return o;
  }
  /// A copy with the device replaced.
  TensorOptions device(Device d) const {
    TensorOptions o = *this;
    o.device_ = d;
    return o;
  }
  /// A copy with requires_grad replaced.
  TensorOptions requires_grad(bool r) const {
    TensorOptions o = *this;
    o.requires_grad_ = r;
    return o;
  }

  /// The dtype asked for, or float32 when none was given.
  DType dtype() const { return dtype_.value_or(DType::Float32); }
  /// Whether a dtype was given (full() and arange() infer one from their values otherwise).
  bool has_dtype() const { return dtype_.has_value(); }
  Device device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  std::optional<DType> dtype_;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
};

}  // namespace kiln
