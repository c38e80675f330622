// Host memory for tensors: 64-byte aligned blocks, so Eigen and vectorised loops can use
// aligned loads and a cache line is never shared between two tensors.
//
// DataPtr is the owning handle every allocator returns; a Storage holds one. The caching
// allocator of a later layer returns the same DataPtr type, so Storage never changes.
#pragma once

#include <cstddef>
#include <memory>

namespace kiln {

/// Frees the memory a DataPtr owns; `context` is whatever the allocator needs for that.
using DataDeleter = void (*)(void* context, void* data);

/// An owning pointer to raw memory plus the function that releases it.
class DataPtr {
 public:
  DataPtr() = default;
  /// Takes ownership of `data`: `deleter(context, data)` runs when the DataPtr dies.
  DataPtr(void* data, void* context, DataDeleter deleter) : data_(data), context_(context), deleter_(deleter) {}
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  DataPtr(DataPtr&& o) noexcept { swap(o); }
  DataPtr& operator=(DataPtr&& o) noexcept {
    DataPtr tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~DataPtr() {
    if (deleter_ != nullptr) deleter_(context_, data_);
  }

  void* get() const { return data_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  void swap(DataPtr& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(context_, o.context_);
    std::swap(deleter_, o.deleter_);
  }
  void* data_ = nullptr;
  void* context_ = nullptr;
  DataDeleter deleter_ = nullptr;
};

/// Alignment of every host block Kiln allocates, in bytes.
inline constexpr size_t kCpuAlignment = 64;

/// Allocates `nbytes` of 64-byte aligned host memory (a valid, unique pointer even for 0 bytes).
/// Throws kiln::Error naming `op` when the host is out of memory.
DataPtr cpu_allocate(size_t nbytes, const char* op = "empty");

}  // namespace kiln
