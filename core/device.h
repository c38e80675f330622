// Device: where a tensor's memory lives (the host CPU or one CUDA GPU), plus the few
// queries about CUDA that every layer needs (is a GPU there, how many).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace kiln {

/// The kinds of device a tensor can live on.
enum class DeviceType : uint8_t { CPU, CUDA };

/// Number of device types, for kernel tables indexed by device type.
inline constexpr int kNumDeviceTypes = 2;

/// A device: a type and, for CUDA, the GPU's index.
class Device {
 public:
  /// The host CPU.
  static constexpr Device cpu() { return Device(DeviceType::CPU, 0); }
  /// CUDA GPU number `index` (checked when memory is first allocated there).
  static Device cuda(int index = 0);

  constexpr DeviceType type() const { return type_; }
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }
  constexpr bool operator==(const Device&) const = default;

  /// PyTorch's spelling: "cpu" or "cuda:0".
  std::string str() const;

 private:
  constexpr Device(DeviceType type, int index) : type_(type), index_(static_cast<int16_t>(index)) {}
  DeviceType type_;
  int16_t index_;
};

namespace cuda {
/// True when Kiln was built with CUDA and at least one GPU is visible.
bool is_available();
/// Number of visible GPUs (0 without CUDA support or without a GPU).
int device_count();
/// True when this build of Kiln contains the CUDA backend.
bool is_built();
}  // namespace cuda

}  // namespace kiln

template <>
struct fmt::formatter<kiln::Device> : fmt::formatter<std::string> {
  auto format(const kiln::Device& d, fmt::format_context& ctx) const {
    return fmt::formatter<std::string>::format(d.str(), ctx);
  }
};
