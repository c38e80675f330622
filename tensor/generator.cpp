// The default generator and its locking.
#include "generator.h"

#include "../core/error.h"

namespace kiln {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return offset_;
}

PhiloxState Generator::reserve(uint64_t blocks) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_state_ != nullptr) {
    PhiloxState state{seed_, capture_offset_};  // for_kernel() adds the device state
    capture_offset_ += blocks;
    return state;
  }
  PhiloxState state{seed_, offset_};
  offset_ += blocks;
  return state;
}

void Generator::begin_graph_capture(const uint64_t* device_state) {
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_CHECK(device_state != nullptr, "Generator::begin_graph_capture: the device state pointer is null");
  KILN_CHECK(capture_state_ == nullptr,
             "Generator::begin_graph_capture: a CUDA graph capture is already drawing from this generator");
  capture_state_ = device_state;
  capture_offset_ = 0;
}

uint64_t Generator::end_graph_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t used = capture_offset_;
  capture_state_ = nullptr;
  capture_offset_ = 0;
  return used;
}

PhiloxState Generator::for_kernel(PhiloxState state) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_state_ != nullptr) state.graph_state = capture_state_;
  return state;
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace kiln
