// run_local(): the single-process mode. One thread per rank, each with its own group as the
// thread's default group: Threads over shared memory for CPU, NCCL over cuda:0..n-1 for CUDA.
// A rank that throws breaks the group (the others fail at their next meeting instead of at
// the timeout) and its exception, the first one thrown, is what run_local rethrows.
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "../core/device.h"
#include "../core/error.h"
#include "default_group.h"
#include "process_group.h"
#include "threads_backend.h"
#ifdef KILN_WITH_NCCL
#include "nccl_backend.h"
#endif

namespace kiln::distributed {

namespace {

// The first exception any rank threw, and a way for each rank to report one.
class FirstFailure {
 public:
  // Keeps `e` if it is the first; returns true if it was.
  bool report(std::exception_ptr e) {
    std::lock_guard lock(mutex_);
    if (first_) return false;
    first_ = std::move(e);
    return true;
  }
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::mutex mutex_;
  std::exception_ptr first_;
};

std::string what(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

void run_threads(int world_size, std::chrono::milliseconds timeout, const std::function<void(int)>& fn) {
  auto rendezvous = std::make_shared<detail::Rendezvous>(world_size, timeout);
  FirstFailure failure;
  std::vector<std::thread> threads;
  threads.reserve(world_size);
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      detail::ThreadsGroup group(rank, rendezvous);
      detail::ThreadGroupGuard guard(&group);
      try {
        fn(rank);
      } catch (...) {
        std::exception_ptr e = std::current_exception();
        failure.report(e);
        rendezvous->abort(fmt::format("rank {} failed: {}", rank, what(e)));
      }
      rendezvous->leave(rank);
    });
  }
  for (std::thread& t : threads) t.join();
  failure.rethrow();
}

}  // namespace

void run_local(int world_size, DeviceType device_type, const std::function<void(int rank)>& fn,
               std::optional<std::chrono::milliseconds> timeout) {
  KILN_CHECK(world_size >= 1, "run_local: the world size must be at least 1, got {}", world_size);
  KILN_CHECK(detail::thread_group() == nullptr, "run_local: already inside run_local() (rank {} of {}); it does not nest",
             detail::thread_group()->rank(), detail::thread_group()->size());
  KILN_CHECK(static_cast<bool>(fn), "run_local: the function is empty");
  const std::chrono::milliseconds limit = timeout.has_value() ? *timeout : timeout_from_env();
  KILN_CHECK(limit.count() > 0, "run_local: the timeout must be positive, got {} ms", limit.count());
  if (device_type == DeviceType::CPU) {
    run_threads(world_size, limit, fn);
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
