// The thread-local state behind core/graph_capture.h: whether this thread captures, the update
// program being recorded, and the one being replayed.
#include "graph_capture.h"

#include <utility>

#include "error.h"

namespace kiln::cuda {

namespace {

// The nodes one run_updatable call launched during the capture, in order, with their kernels.
struct UpdateProgram {
  std::vector<void*> nodes;
  std::vector<const void*> funcs;
};

struct ThreadCapture {
  bool capturing = false;
  std::vector<detail::ReplayUpdate> updates;
  UpdateProgram* recording = nullptr;  // inside run_updatable during a capture
  UpdateProgram* updating = nullptr;   // inside an update pass
  void* exec = nullptr;                // the update pass's instantiated graph
  size_t next = 0;                     // the update pass's next node
};

thread_local ThreadCapture t_capture;

}  // namespace

bool graph_capture_active() { return t_capture.capturing; }

void run_updatable(const std::function<void()>& fn) {
  ThreadCapture& t = t_capture;
  if (!t.capturing || t.recording != nullptr) {  // eager, or nested in another updatable region
    fn();
    return;
  }
  auto program = std::make_shared<UpdateProgram>();
  t.recording = program.get();
  try {
    fn();
  } catch (...) {
    t.recording = nullptr;
    throw;
  }
  t.recording = nullptr;
  // Registered even without nodes: host-only work (a scheduler's step) must also run per replay.
  t.updates.push_back([fn, program](void* exec) {
    ThreadCapture& u = t_capture;
    KILN_CHECK(u.updating == nullptr && !u.capturing, "CudaGraph::replay: cannot replay while capturing or updating");
    u.updating = program.get();
    u.exec = exec;
    u.next = 0;
    struct Reset {
      ~Reset() {
        t_capture.updating = nullptr;
        t_capture.exec = nullptr;
      }
    } reset;
    fn();
    KILN_CHECK(u.next == program->nodes.size(),
               "CudaGraph::replay: the captured step launched {} updatable kernels, this step {}; a step captured in a "
               "CUDA graph must launch the same kernels every time",
               program->nodes.size(), u.next);
  });
}

namespace detail {

LaunchMode updatable_launch_mode() {
  const ThreadCapture& t = t_capture;
  if (t.updating != nullptr) return LaunchMode::Update;
  if (t.recording != nullptr) return LaunchMode::Capture;
  return LaunchMode::Eager;
}

void record_updatable_node(void* node, const void* func) {
  UpdateProgram* p = t_capture.recording;
  KILN_INTERNAL_ASSERT(p != nullptr, "record_updatable_node outside run_updatable");
  p->nodes.push_back(node);
  p->funcs.push_back(func);
}

void* next_updatable_node(const void* func, void** exec) {
  ThreadCapture& t = t_capture;
  UpdateProgram* p = t.updating;
  KILN_INTERNAL_ASSERT(p != nullptr, "next_updatable_node outside an update pass");
  KILN_CHECK(t.next < p->nodes.size() && p->funcs[t.next] == func,
             "CudaGraph::replay: this step launches a kernel the captured step did not (launch {} of {}); a step "
             "captured in a CUDA graph must launch the same kernels every time",
             t.next + 1, p->nodes.size());
  *exec = t.exec;
  return p->nodes[t.next++];
}

void begin_capture_updates() {
  ThreadCapture& t = t_capture;
  KILN_CHECK(!t.capturing, "CudaGraph::capture_begin: this thread is already capturing a CUDA graph");
  t.capturing = true;
  t.updates.clear();
}

std::vector<ReplayUpdate> end_capture_updates() noexcept {
  ThreadCapture& t = t_capture;
  t.capturing = false;
  t.recording = nullptr;
  return std::exchange(t.updates, {});
}

}  // namespace detail
}  // namespace kiln::cuda
