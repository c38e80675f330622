// Storage allocation: the one place that turns (bytes, device) into memory, through the
// device's caching allocator.
#include "storage.h"

#include "../allocator/memory.h"
#include "../core/error.h"
#include "../core/stream.h"
#include "object_pool.h"

namespace kiln {

std::shared_ptr<StorageImpl> allocate_storage(size_t nbytes, Device device, const char* op) {
  // Every device's memory comes from its caching allocator (host segments for the CPU); a
  // GPU block belongs to the thread's current stream on that device, as in PyTorch.
  CachingAllocator& allocator = caching_allocator(device, op);
  const StreamId stream = device.is_cuda() ? cuda::current_stream(device).id() : 0;
  return std::allocate_shared<StorageImpl>(PoolAllocator<StorageImpl>(), allocator.allocate_data(nbytes, stream, op),
                                           nbytes, device);
}

namespace {
void call_user_deleter(void* context, void* data) {
  auto* fn = static_cast<std::function<void(void*)>*>(context);
  if (*fn) {
    try {
      (*fn)(data);
    } catch (...) {
      // A deleter runs from a destructor; an exception here has nowhere to go.
    }
  }
  delete fn;
}
}  // namespace

std::shared_ptr<StorageImpl> wrap_storage(void* data, size_t nbytes, Device device,
                                          std::function<void(void*)> deleter) {
  auto* context = new std::function<void(void*)>(std::move(deleter));
  return std::allocate_shared<StorageImpl>(PoolAllocator<StorageImpl>(), DataPtr(data, context, &call_user_deleter),
                                           nbytes, device, StorageOrigin::External);
}

}  // namespace kiln
