// The virtual-memory calls of a SegmentSource that has none: the allocator only makes them
// after vmm_granularity() said there is virtual memory, so reaching one is a Kiln bug.
#include "segment_source.h"

#include "../core/error.h"

namespace kiln {

namespace {
[[noreturn]] void no_vmm(const SegmentSource& source, const char* call) {
  detail::throw_internal(__FILE__, __LINE__, "vmm_granularity() > 0",
                         fmt::format("{}: the {} segment source has no virtual memory", call, source.device_name()));
}
}  // namespace

void* SegmentSource::reserve_address_range(size_t) { no_vmm(*this, "reserve_address_range"); }
void SegmentSource::release_address_range(void*, size_t) { no_vmm(*this, "release_address_range"); }
PageHandle SegmentSource::create_page() { no_vmm(*this, "create_page"); }
void SegmentSource::release_page(PageHandle) { no_vmm(*this, "release_page"); }
void SegmentSource::map_pages(void*, const PageHandle*, size_t) { no_vmm(*this, "map_pages"); }
void SegmentSource::unmap_pages(void*, size_t) { no_vmm(*this, "unmap_pages"); }

}  // namespace kiln
