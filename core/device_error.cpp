// The host side of device-side errors (Note [Device-side errors], device_error.h): the
// message registry, the per-device records and the check every synchronisation point runs.
#include "device_error.h"

#include <array>
#include <atomic>
#include <deque>
#include <mutex>

#include "error.h"

#ifdef KILN_WITH_CUDA
#include "cuda_guard.h"
#endif

namespace kiln::cuda {

namespace {

// Registered messages; kind k is messages()[k - 1] (0 is no message). A deque, so a message
// stays where it is while others are added.
struct Registry {
  std::mutex mutex;
  std::deque<std::string> messages;
};
Registry& registry() {
  static Registry r;  // built on first use: ops register from their own static initialisers
  return r;
}

#ifdef KILN_WITH_CUDA
constexpr int kMaxDevices = 64;

std::mutex g_slot_mutex;
// Host addresses of the kMaxDevices reports (one mapped allocation), null until a kernel
// first asks for a slot: until then there is nothing to check.
std::atomic<DeviceErrorReport*> g_reports{nullptr};
std::array<DeviceErrorSlot, kMaxDevices> g_slots{};
std::array<std::atomic<bool>, kMaxDevices> g_slot_ready{};
#endif

}  // namespace

uint32_t register_device_error(const std::string& format) {
  // A message that fmt cannot fill would turn a user's error into a format error later.
  try {
    (void)fmt::format(fmt::runtime(format), int64_t{0}, int64_t{0}, int64_t{0});
  } catch (const fmt::format_error& e) {
    KILN_INTERNAL_ASSERT(false, "register_device_error: bad message \"{}\": {}", format, e.what());
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.messages.push_back(format);
  return static_cast<uint32_t>(r.messages.size());
}

std::string format_device_error(uint32_t kind, const int64_t (&args)[3]) {
  Registry& r = registry();
  std::string format;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (kind == 0 || kind > r.messages.size())
      return fmt::format("a kernel reported an error of unknown kind {} (values {}, {}, {})", kind, args[0], args[1],
                         args[2]);
    format = r.messages[kind - 1];
  }
  return fmt::format(fmt::runtime(format), args[0], args[1], args[2]);
}

#ifdef KILN_WITH_CUDA

DeviceErrorSlot device_error_slot(int device) {
  KILN_INTERNAL_ASSERT(device >= 0 && device < kMaxDevices, "device_error_slot: device {} out of range", device);
  const auto d = static_cast<size_t>(device);
  if (g_slot_ready[d].load(std::memory_order_acquire)) [[likely]]
    return g_slots[d];
  std::lock_guard<std::mutex> lock(g_slot_mutex);
  if (g_slot_ready[d].load(std::memory_order_relaxed)) return g_slots[d];
  DeviceGuard guard(device);
  DeviceErrorReport* reports = g_reports.load(std::memory_order_relaxed);
  if (reports == nullptr) {
    // Portable: one allocation serves every device. Never freed (like Kiln's streams), so
    // kernels still queued at exit never write to freed memory.
    void* p = nullptr;
    CUDA_CHECK(cudaHostAlloc(&p, sizeof(DeviceErrorReport) * kMaxDevices, cudaHostAllocMapped | cudaHostAllocPortable));
    reports = static_cast<DeviceErrorReport*>(p);
    for (int k = 0; k < kMaxDevices; ++k) reports[k] = DeviceErrorReport{1, 0, 0, 0, {0, 0, 0}};
    g_reports.store(reports, std::memory_order_release);
  }
  void* report = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&report, reports + device, 0));
  void* claim = nullptr;
  CUDA_CHECK(cudaMalloc(&claim, sizeof(unsigned long long)));
  // Zeroed before any kernel can use it: the memset runs on the legacy stream, which is
  // waited for here (once per device and process).
  CUDA_CHECK(cudaMemset(claim, 0, sizeof(unsigned long long)));
  CUDA_CHECK(cudaStreamSynchronize(nullptr));
  g_slots[d] = DeviceErrorSlot{static_cast<unsigned long long*>(claim), static_cast<DeviceErrorReport*>(report)};
  g_slot_ready[d].store(true, std::memory_order_release);
  return g_slots[d];
}

void check_device_error(int device) {
  DeviceErrorReport* reports = g_reports.load(std::memory_order_acquire);
  if (reports == nullptr || device < 0 || device >= kMaxDevices) [[likely]]
    return;
  DeviceErrorReport& r = reports[device];
  std::atomic_ref<uint32_t> epoch(r.epoch);
  const uint32_t e = epoch.load(std::memory_order_acquire);
  if (std::atomic_ref<uint32_t>(r.reported).load(std::memory_order_acquire) != e) [[likely]]
    return;
  // A kernel finished reporting in this epoch (it fenced before writing `reported`).
  const uint32_t kind = std::atomic_ref<uint32_t>(r.kind).load(std::memory_order_relaxed);
  int64_t args[3];
  for (size_t k = 0; k < 3; ++k) args[k] = std::atomic_ref<int64_t>(r.args[k]).load(std::memory_order_relaxed);
  // Taking the error opens the next epoch (0 is skipped: `reported` starts there). Of two
  // threads checking at once, the one whose exchange succeeds raises it.
  uint32_t expected = e;
  if (!epoch.compare_exchange_strong(expected, e + 1 == 0 ? 1 : e + 1, std::memory_order_acq_rel)) return;
  KILN_FAIL("{} (found on the device by a kernel on cuda:{}; raised at the first synchronization after it)",
            format_device_error(kind, args), device);
}

#else  // CPU-only build: no kernel can record anything.

DeviceErrorSlot device_error_slot(int device) {
  KILN_FAIL("device_error_slot: this build of Kiln has no CUDA support (device {})", device);
}

void check_device_error(int) {}

#endif

}  // namespace kiln::cuda
