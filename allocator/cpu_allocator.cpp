// Aligned host allocation with a clear error instead of std::bad_alloc.
#include "cpu_allocator.h"

#include <cstdlib>

#include "../core/error.h"

namespace kiln {

namespace {
void cpu_free(void* /*context*/, void* data) { std::free(data); }
}  // namespace

DataPtr cpu_allocate(size_t nbytes, const char* op) {
  // aligned_alloc wants a multiple of the alignment; round up, and give 0-byte requests a
  // real block so every storage has a distinct, non-null address.
  size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  if (rounded == 0) rounded = kCpuAlignment;
  KILN_CHECK(rounded >= nbytes, "{}: cannot allocate {} bytes on the CPU (size overflows)", op, nbytes);
  void* data = std::aligned_alloc(kCpuAlignment, rounded);
  KILN_CHECK(data != nullptr, "{}: out of host memory: tried to allocate {} bytes ({:.2f} GiB) on the CPU",
             op, nbytes, static_cast<double>(nbytes) / (1024.0 * 1024.0 * 1024.0));
  return DataPtr(data, nullptr, &cpu_free);
}

}  // namespace kiln
