// run_local(): the single-process mode. One thread per rank, each with its own group as the
// thread's default group: Threads over shared memory for CPU, NCCL over cuda:0..n-1 for CUDA.
// A rank that throws breaks the group (the others fail at their next meeting instead of at
// the timeout) and its exception, the first one thrown, is what run_local rethrows.
#include <memory>
#include <string>

#include "../core/device.h"
#include "../core/error.h"
#include "default_group.h"
#include "process_group.h"
#include "rank_threads.h"
#include "threads_backend.h"
#ifdef KILN_WITH_NCCL
#include "nccl_backend.h"
#endif

namespace kiln::distributed {

void run_local(int world_size, DeviceType device_type, const std::function<void(int rank)>& fn,
               std::optional<std::chrono::milliseconds> timeout) {
  KILN_CHECK(world_size >= 1, "run_local: the world size must be at least 1, got {}", world_size);
  KILN_CHECK(detail::thread_group() == nullptr, "run_local: already inside run_local() (rank {} of {}); it does not nest",
             detail::thread_group()->rank(), detail::thread_group()->size());
  KILN_CHECK(static_cast<bool>(fn), "run_local: the function is empty");
  const std::chrono::milliseconds limit = timeout.has_value() ? *timeout : timeout_from_env();
  KILN_CHECK(limit.count() > 0, "run_local: the timeout must be positive, got {} ms", limit.count());
  if (device_type == DeviceType::CPU) {
    auto rendezvous = std::make_shared<detail::Rendezvous>(world_size, limit);
    detail::RankHooks hooks;
    hooks.make_group = [&](int rank) { return std::make_unique<detail::ThreadsGroup>(rank, rendezvous); };
    hooks.abort = [&](const std::string& reason) { rendezvous->abort(reason); };
    hooks.leave = [&](int rank) { rendezvous->leave(rank); };
    detail::run_rank_threads(world_size, hooks, fn);
    return;
  }
#ifdef KILN_WITH_NCCL
  const int gpus = cuda::device_count();
  KILN_CHECK(world_size <= gpus, "run_local: {} ranks on CUDA need {} GPUs, but {} are visible", world_size, world_size,
             gpus);
  detail::run_nccl_threads(world_size, limit, fn);
#else
  KILN_FAIL("run_local: CUDA ranks need the nccl backend, which is not in this build (a CUDA build that found NCCL)");
#endif
}

}  // namespace kiln::distributed
