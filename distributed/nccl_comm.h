// NcclComm: one rank's NCCL communicator, made so that nothing about it can hang. NCCL alone
// would: ncclCommInitRank waits for every rank, and a collective whose peer never comes spins
// on the GPU forever, so the host blocks in the next synchronisation. Here:
//   - the communicator is non-blocking (ncclConfig_t::blocking = 0): init and every enqueue
//     return at once and are polled (ncclCommGetAsyncError) until done, failed, or past the
//     timeout;
//   - every collective enqueued is tracked by a CUDA event recorded after it, and a watchdog
//     thread (as PyTorch's ProcessGroupNCCL has) checks the events: one not complete by its
//     deadline, an asynchronous NCCL error, or an abort requested by another rank of the same
//     process (run_local) makes it call ncclCommAbort, which also ends the spinning kernels;
//   - from then on the communicator is broken: every call throws the first failure's reason.
// NCCL calls on the communicator are serialised by one mutex, because the watchdog may abort
// while the rank's thread uses it. CUDA builds with NCCL only.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../core/device.h"

namespace kiln::distributed::detail {

/// A request to abort, shared by the ranks of one run_local() (each rank's watchdog reads it).
class AbortSignal {
 public:
  /// Requests the abort with `reason` (the first reason is kept). Never throws.
  void raise(const std::string& reason) noexcept;
  /// True once raised (lock-free).
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  /// The reason given to raise().
  std::string reason() const;

 private:
  std::atomic<bool> raised_{false};
  mutable std::mutex mutex_;
  std::string reason_;
};

/// A collective in flight: the event recorded after it on its stream.
struct PendingCollective {
  const char* name = "";                           ///< "all_reduce", ...
  void* event = nullptr;                           ///< cudaEvent_t, owned
  std::chrono::steady_clock::time_point deadline;  ///< when the watchdog gives up on it
  ~PendingCollective();
};

/// One rank's non-blocking NCCL communicator with its watchdog (see the file comment).
class NcclComm {
 public:
  /// Joins the communicator `id` as rank `rank` of `size` on `device`; returns once every rank
  /// has joined, or throws kiln::Error (naming the rank, `caller` and what NCCL said) after
  /// `timeout`, a failure, or `abort` being raised.
  NcclComm(const char* caller, int rank, int size, Device device, const ncclUniqueId& id,
           std::chrono::milliseconds timeout, std::shared_ptr<AbortSignal> abort);
  /// Stops the watchdog; finalises the communicator when healthy (bounded by the timeout),
  /// else aborts it. Never throws.
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  /// This rank.
  int rank() const { return rank_; }
  /// Number of ranks.
  int size() const { return size_; }
  /// This rank's GPU.
  Device device() const { return device_; }
  /// The bound on every wait.
  std::chrono::milliseconds timeout() const { return timeout_; }

  /// Runs `call` (an NCCL enqueue on the communicator) under the communicator's lock and polls
  /// until it is enqueued; then records an event on `stream` and hands it to the watchdog.
  /// Throws kiln::Error naming `collective` and this rank when broken, on failure or timeout.
  std::shared_ptr<PendingCollective> enqueue(const char* collective, void* stream,
                                             const std::function<ncclResult_t(ncclComm_t)>& call);
  /// Throws kiln::Error "<collective>: ..." if the communicator is broken.
  void check_healthy(const char* collective) const;
  /// Blocks the host until `pending` has finished on the device, bounded by its deadline;
  /// throws (and aborts the communicator) on failure or timeout.
  void synchronize(const char* collective, const PendingCollective& pending);
  /// Marks the communicator broken with `reason` and aborts it (once). Never throws.
  void fail(const std::string& reason) noexcept;

 private:
  // Polls ncclCommGetAsyncError (mutex_ held by the caller through `lock`) until the pending
  // operation is done; throws after `deadline` or on an error, aborting the communicator.
  void poll_until_done(std::unique_lock<std::mutex>& lock, const char* what,
                       std::chrono::steady_clock::time_point deadline);
  // The watchdog thread's loop.
  void watch() noexcept;
  // ncclCommAbort, once (mutex_ held).
  void abort_locked() noexcept;
  // "rank 1 of 2 (cuda:1)".
  std::string who() const;

  const int rank_, size_;
  const Device device_;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<AbortSignal> abort_;
  mutable std::mutex mutex_;  // NCCL calls on comm_, failure_, aborted_, pending_
  std::condition_variable stop_cv_;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  bool stopping_ = false;
  std::string failure_;  // "" while healthy
  std::vector<std::shared_ptr<PendingCollective>> pending_;
  std::thread watchdog_;
};

/// "ncclSystemError: <NCCL's string> (<ncclGetLastError>)".
std::string nccl_error_text(ncclResult_t r, ncclComm_t comm);

}  // namespace kiln::distributed::detail
