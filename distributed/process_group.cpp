// The public face of kiln::distributed (process_group.h): the default group and its
// lifetime, and the free collective functions, which resolve the group, call it and wait
// unless async. Argument checks and profiler rows live in the backends (collective_checks.h,
// collective_scope.h), so a collective called on a group directly (as DDP does) is checked
// and profiled the same way.
#include "process_group.h"

#include <mutex>

#include "../core/device.h"
#include "../core/error.h"
#include "default_group.h"
#include "threads_backend.h"
#ifdef KILN_WITH_NCCL
#include "nccl_backend.h"
#endif

namespace kiln::distributed {

namespace {

std::mutex g_mutex;
std::unique_ptr<ProcessGroup> g_group;  // init_process_group()'s
thread_local ProcessGroup* t_group = nullptr;  // run_local()'s, in its threads

ProcessGroup& resolve(ProcessGroup* group) { return group != nullptr ? *group : default_group(); }

WorkHandle finish(WorkHandle work, bool async_op) {
  if (!async_op) work->wait();
  return work;
}

}  // namespace

namespace detail {
ProcessGroup* thread_group() { return t_group; }
ThreadGroupGuard::ThreadGroupGuard(ProcessGroup* group) { t_group = group; }
ThreadGroupGuard::~ThreadGroupGuard() { t_group = nullptr; }
}  // namespace detail

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::NCCL: return "nccl";
    case Backend::Threads: return "threads";
  }
  return "?";
}

bool is_nccl_available() {
#ifdef KILN_WITH_NCCL
  return true;
#else
  return false;
#endif
}

void init_process_group(const InitOptions& options) {
  KILN_CHECK(t_group == nullptr, "init_process_group: this thread runs inside run_local(), which has its own group");
  std::lock_guard lock(g_mutex);
  KILN_CHECK(g_group == nullptr, "init_process_group: already initialised (rank {} of {}); call destroy_process_group() first",
             g_group->rank(), g_group->size());
  const LaunchEnv env = read_launch_env();
  const Backend backend = options.backend.value_or(cuda::is_available() && is_nccl_available() ? Backend::NCCL : Backend::Threads);
  const std::chrono::milliseconds timeout = options.timeout.has_value() ? *options.timeout : timeout_from_env();
  KILN_CHECK(timeout.count() > 0, "init_process_group: the timeout must be positive, got {} ms", timeout.count());
  if (backend == Backend::Threads) {
    KILN_CHECK(env.world_size == 1,
               "init_process_group: the threads backend has one rank per process, but the {} launch asks for world "
               "size {}; use the nccl backend, or run_local() for threads",
               env.source, env.world_size);
    g_group = std::make_unique<detail::ThreadsGroup>(0, std::make_shared<detail::Rendezvous>(1, timeout));
    return;
  }
#ifdef KILN_WITH_NCCL
  g_group = detail::make_nccl_group(env, timeout);
#else
  KILN_FAIL("init_process_group: the nccl backend is not in this build (it needs a CUDA build that found NCCL)");
#endif
}

bool is_initialized() {
  if (t_group != nullptr) return true;
  std::lock_guard lock(g_mutex);
  return g_group != nullptr;
}

void destroy_process_group() {
  KILN_CHECK(t_group == nullptr, "destroy_process_group: run_local()'s group ends when run_local() returns");
  std::unique_ptr<ProcessGroup> group;
  {
    std::lock_guard lock(g_mutex);
    KILN_CHECK(g_group != nullptr, "destroy_process_group: no process group is initialised");
    group = std::move(g_group);
  }
  group.reset();  // backends finish or abort their queued work in their destructors
}

ProcessGroup& default_group() {
  if (t_group != nullptr) return *t_group;
  std::lock_guard lock(g_mutex);
  KILN_CHECK(g_group != nullptr,
             "default_group: no process group: call init_process_group() first, or run inside run_local()");
  return *g_group;
}

int get_rank() { return default_group().rank(); }

int get_world_size() { return default_group().size(); }

WorkHandle all_reduce(Tensor& tensor, ReduceOp op, bool async_op, ProcessGroup* group) {
  return finish(resolve(group).all_reduce(tensor, op), async_op);
}

WorkHandle broadcast(Tensor& tensor, int src, bool async_op, ProcessGroup* group) {
  return finish(resolve(group).broadcast(tensor, src), async_op);
}

WorkHandle all_gather(Tensor& output, const Tensor& input, bool async_op, ProcessGroup* group) {
  return finish(resolve(group).all_gather(output, input), async_op);
}

WorkHandle reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op, bool async_op, ProcessGroup* group) {
  return finish(resolve(group).reduce_scatter(output, input, op), async_op);
}

void barrier(ProcessGroup* group) { resolve(group).barrier(); }

}  // namespace kiln::distributed
