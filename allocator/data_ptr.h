// DataPtr: the owning handle to raw memory that every allocator returns and a Storage
// holds. It carries the function (and its context) that gives the memory back, so a Storage
// never needs to know which allocator, device or user deleter the memory came from.
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

}  // namespace kiln
