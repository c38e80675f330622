// Storage: the memory behind one or more tensors. Views share a Storage and differ only in
// sizes, strides and offset, so a Storage is reference-counted and outlives every view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "../allocator/data_ptr.h"
#include "../core/device.h"

namespace kiln {

/// Where a storage's memory comes from: what is_pinned() and record_stream() ask.
enum class StorageOrigin : uint8_t {
  CachingAllocator,  ///< the device's caching allocator (allocate_storage)
  PinnedHost,        ///< the pinned host cache (allocator/pinned_host_allocator.h)
  External,          ///< memory Kiln does not own (from_blob, wrap_storage)
};

/// A block of memory on one device, owned (or, for from_blob, merely referenced).
class StorageImpl {
 public:
  /// Wraps memory an allocator handed out.
  StorageImpl(DataPtr data, size_t nbytes, Device device, StorageOrigin origin = StorageOrigin::CachingAllocator)
      : data_(std::move(data)), nbytes_(nbytes), device_(device), origin_(origin) {}

  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  StorageOrigin origin() const { return origin_; }
  /// The version counter autograd reads: bumped by every in-place write to this memory,
  /// shared by all views of it.
  uint32_t version() const { return version_; }
  /// Marks an in-place write (ops whose record says they modify an input call this).
  void bump_version() { ++version_; }

 private:
  DataPtr data_;
  size_t nbytes_;
  Device device_;
  StorageOrigin origin_;
  uint32_t version_ = 0;
};

/// Allocates fresh storage of `nbytes` on `device` (op names the caller for error messages).
std::shared_ptr<StorageImpl> allocate_storage(size_t nbytes, Device device, const char* op);

/// Wraps memory Kiln does not own; `deleter` (may be empty) runs when the last view dies.
std::shared_ptr<StorageImpl> wrap_storage(void* data, size_t nbytes, Device device,
                                          std::function<void(void*)> deleter);

}  // namespace kiln
