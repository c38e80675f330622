// NVTX emission: an op observer that pushes "kiln::<op>" ranges, and the push/pop calls that
// RecordFunction uses. NVTX v3 is header-only: without a tool attached each call is an
// indirect call to a stub.
#include "nvtx.h"

#include <mutex>
#include <string>
#include <vector>

#include "../ops/op_scope.h"

#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define KILN_HAVE_NVTX 1
#else
#define KILN_HAVE_NVTX 0
#endif

namespace kiln::profiler {

namespace detail {
std::atomic<bool> g_emit_nvtx{false};
}

namespace {

#if KILN_HAVE_NVTX
nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("kiln");
  return d;
}
#endif

// Every op scope becomes a range; the name is built in a per-thread buffer.
class NvtxRecorder final : public OpObserver {
 public:
  void on_op_begin(const OpCall& call) override {
    thread_local std::string name;
    name.assign("kiln::").append(call.name);
    nvtx_push(name.c_str());
  }
  void on_op_end(const OpCall&) override { nvtx_pop(); }
};

NvtxRecorder& recorder() {
  static NvtxRecorder* r = new NvtxRecorder();  // immortal: ops may end during exit
  return *r;
}

std::mutex g_guard_mutex;
int g_guards = 0;

}  // namespace

bool nvtx_available() { return KILN_HAVE_NVTX != 0; }

void nvtx_push(const char* name) {
#if KILN_HAVE_NVTX
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  nvtxDomainRangePushEx(domain(), &attributes);
#else
  (void)name;
#endif
}

void nvtx_pop() {
#if KILN_HAVE_NVTX
  nvtxDomainRangePop(domain());
#endif
}

EmitNvtx::EmitNvtx() {
  std::lock_guard<std::mutex> lock(g_guard_mutex);
  if (g_guards++ == 0) {
    add_op_observer(&recorder());
    detail::g_emit_nvtx.store(true, std::memory_order_relaxed);
  }
}

EmitNvtx::~EmitNvtx() {
  std::lock_guard<std::mutex> lock(g_guard_mutex);
  if (--g_guards == 0) {
    detail::g_emit_nvtx.store(false, std::memory_order_relaxed);
    remove_op_observer(&recorder());
  }
}

}  // namespace kiln::profiler
