// TensorOptions: the dtype, device and requires_grad a factory builds a tensor with.
// Implicit from a DType or a Device, so zeros({2, 3}, kFloat64) and randn(shape, dev) read
// as they do in PyTorch's C++ API.
#pragma once

#include "device.h"
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

  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  DType dtype_ = DType::Float32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
};

}  // namespace kiln
