// Storage allocation: the one place that turns (bytes, device) into memory. CUDA devices
// are refused until the CUDA backend provides device memory.
#include "storage.h"

#include "../core/error.h"

namespace kiln {

std::shared_ptr<StorageImpl> allocate_storage(size_t nbytes, Device device, const char* op) {
  KILN_CHECK(device.is_cpu(),
             "{}: cannot allocate memory on {}: this build of Kiln has no CUDA memory allocator yet "
             "(the CUDA backend is not part of it); use Device::cpu()",
             op, device.str());
  return std::make_shared<StorageImpl>(cpu_allocate(nbytes, op), nbytes, device);
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
  return std::make_shared<StorageImpl>(DataPtr(data, context, &call_user_deleter), nbytes, device);
}

}  // namespace kiln
