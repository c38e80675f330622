// Conversion of CUPTI's activity records into ProfileEvents (see cupti_records.h).
#include "cupti_records.h"

#include <cxxabi.h>
#include <fmt/format.h>

#include <cstdlib>

namespace kiln::profiler {

namespace {

const char* memcpy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "other";
  }
}

const char* memory_kind(int kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return "Managed";
    default:
      return "Unknown";
  }
}

ProfileEvent device_event(EventKind kind, uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                          uint32_t correlation) {
  ProfileEvent e;
  e.kind = kind;
  e.start_ns = static_cast<int64_t>(start);
  e.end_ns = static_cast<int64_t>(end);
  e.device = static_cast<int>(device);
  e.thread = stream;
  e.correlation = correlation;
  return e;
}

}  // namespace

std::optional<ProfileEvent> event_of(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      ProfileEvent e = device_event(EventKind::Kernel, k->start, k->end, k->deviceId, k->streamId, k->correlationId);
      e.name = k->name != nullptr ? k->name : "<unnamed kernel>";
      e.grid = {k->gridX, k->gridY, k->gridZ};
      e.block = {k->blockX, k->blockY, k->blockZ};
      e.registers_per_thread = k->registersPerThread;
      e.shared_memory_bytes = static_cast<int64_t>(k->staticSharedMemory) + k->dynamicSharedMemory;
      if (k->queued != CUPTI_TIMESTAMP_UNKNOWN) e.launch_ns = static_cast<int64_t>(k->queued);  // CUPTI's clock
      return e;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      ProfileEvent e = device_event(EventKind::Memcpy, m->start, m->end, m->deviceId, m->streamId, m->correlationId);
      e.detail = memcpy_kind(m->copyKind);
      e.name = fmt::format("Memcpy {} ({} -> {})", e.detail, memory_kind(m->srcKind), memory_kind(m->dstKind));
      e.transfer_bytes = static_cast<int64_t>(m->bytes);
      return e;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      ProfileEvent e = device_event(EventKind::Memset, m->start, m->end, m->deviceId, m->streamId, m->correlationId);
      e.name = fmt::format("Memset ({})", memory_kind(m->memoryKind));
      e.transfer_bytes = static_cast<int64_t>(m->bytes);
      return e;
    }
    default:
      return std::nullopt;
  }
}

std::string demangle(const std::string& name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string result = status == 0 && out != nullptr ? std::string(out) : name;
  std::free(out);
  return result;
}

}  // namespace kiln::profiler
