// One rank's non-blocking NCCL communicator and its watchdog (nccl_comm.h says why).
#include "nccl_comm.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "../core/cuda_check.h"
#include "../core/cuda_guard.h"
#include "../core/error.h"

namespace kiln::distributed::detail {

namespace {

using Clock = std::chrono::steady_clock;

// Spins briefly, then sleeps: most polls end within microseconds, a hung peer takes seconds.
void back_off(int attempt) {
  if (attempt < 64)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(attempt < 1024 ? 20 : 200));
}

// cudaEventQuery as true (done) / false (running); other statuses are errors.
bool event_done(void* event, const char* what) {
  return cuda::ready(cudaEventQuery(static_cast<cudaEvent_t>(event)), what);
}

}  // namespace

std::string nccl_error_text(ncclResult_t r, ncclComm_t comm) {
  std::string text = fmt::format("{} (ncclResult_t {})", ncclGetErrorString(r), static_cast<int>(r));
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') text += fmt::format(": {}", last);
  }
  return text;
}

void AbortSignal::raise(const std::string& reason) noexcept {
  try {
    std::lock_guard lock(mutex_);
    if (raised_.load(std::memory_order_relaxed)) return;
    reason_ = reason;
  } catch (...) {  // keep the signal even if the reason could not be stored
  }
  raised_.store(true, std::memory_order_release);
}

std::string AbortSignal::reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

PendingCollective::~PendingCollective() {
  if (event != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

NcclComm::NcclComm(const char* caller, int rank, int size, Device device, const ncclUniqueId& id,
                   std::chrono::milliseconds timeout, std::shared_ptr<AbortSignal> abort)
    : rank_(rank), size_(size), device_(device), timeout_(timeout), abort_(std::move(abort)) {
  cuda::DeviceGuard guard(device.index());  // the communicator takes the current device
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const auto deadline = Clock::now() + timeout_;
  std::unique_lock lock(mutex_);
  ncclUniqueId copy = id;
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, size, copy, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    const std::string text = nccl_error_text(r, comm_);
    abort_locked();
    KILN_FAIL("{}: {} could not create its NCCL communicator: {}", caller, who(), text);
  }
  poll_until_done(lock, caller, deadline);
  lock.unlock();
  watchdog_ = std::thread([this] { watch(); });
}

NcclComm::~NcclComm() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  try {
    cuda::DeviceGuard guard(device_.index());
    std::unique_lock lock(mutex_);
    if (aborted_) return;
    if (failure_.empty() && !(abort_ && abort_->raised())) {
      // Healthy: let the queued collectives finish (bounded), then finalise and destroy.
      const auto deadline = Clock::now() + timeout_;
      bool finished = true;
      for (const auto& p : pending_) {
        for (int attempt = 0; !event_done(p->event, "~NcclComm"); ++attempt) {
          if (Clock::now() > deadline) {
            finished = false;
            break;
          }
          lock.unlock();
          back_off(attempt);
          lock.lock();
        }
        if (!finished) break;
      }
      pending_.clear();
      if (finished) {
        const ncclResult_t r = ncclCommFinalize(comm_);
        if (r == ncclInProgress) poll_until_done(lock, "destroy_process_group", deadline);
        if (r == ncclSuccess || r == ncclInProgress) {
          (void)ncclCommDestroy(comm_);
          comm_ = nullptr;
          aborted_ = true;
          return;
        }
      }
    }
    abort_locked();
  } catch (...) {
    // poll_until_done or a CUDA query failed: abort (poll_until_done may have already).
    std::lock_guard lock(mutex_);
    abort_locked();
  }
}

std::string NcclComm::who() const { return fmt::format("rank {} of {} ({})", rank_, size_, device_); }

void NcclComm::abort_locked() noexcept {
  if (!aborted_ && comm_ != nullptr) (void)ncclCommAbort(comm_);
  comm_ = nullptr;
  aborted_ = true;
}

void NcclComm::fail(const std::string& reason) noexcept {
  std::lock_guard lock(mutex_);
  if (failure_.empty()) {
    try {
      failure_ = reason;
    } catch (...) {
      failure_ = "NCCL communicator failed";
    }
  }
  abort_locked();
}

void NcclComm::check_healthy(const char* collective) const {
  std::lock_guard lock(mutex_);
  KILN_CHECK(failure_.empty() && !aborted_, "{}: the process group is broken: {}", collective,
             failure_.empty() ? "its NCCL communicator was aborted" : failure_);
}

void NcclComm::poll_until_done(std::unique_lock<std::mutex>& lock, const char* what, Clock::time_point deadline) {
  for (int attempt = 0;; ++attempt) {
    KILN_CHECK(!aborted_, "{}: the process group is broken: {}", what,
               failure_.empty() ? "its NCCL communicator was aborted" : failure_);
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return;
    std::string reason;
    if (state != ncclInProgress)
      reason = fmt::format("{}: NCCL failed on {}: {}", what, who(), nccl_error_text(state, comm_));
    else if (abort_ && abort_->raised())
      reason = fmt::format("{}: {} stopped waiting for NCCL: {}", what, who(), abort_->reason());
    else if (Clock::now() > deadline)
      reason = fmt::format(
          "{}: {} timed out after {} ms waiting for NCCL (a peer rank died or never called it); the communicator was "
          "aborted",
          what, who(), timeout_.count());
    if (!reason.empty()) {
      if (failure_.empty()) failure_ = reason;
      abort_locked();
      KILN_FAIL("{}", reason);
    }
    lock.unlock();
    back_off(attempt);
    lock.lock();
  }
}

std::shared_ptr<PendingCollective> NcclComm::enqueue(const char* collective, void* stream,
                                                     const std::function<ncclResult_t(ncclComm_t)>& call) {
  cuda::DeviceGuard guard(device_.index());
  std::unique_lock lock(mutex_);
  KILN_CHECK(failure_.empty() && !aborted_, "{}: the process group is broken: {}", collective,
             failure_.empty() ? "its NCCL communicator was aborted" : failure_);
  const auto deadline = Clock::now() + timeout_;
  const ncclResult_t r = call(comm_);
  if (r == ncclInProgress) {
    poll_until_done(lock, collective, deadline);
  } else if (r != ncclSuccess) {
    const std::string reason = fmt::format("{}: NCCL failed on {}: {}", collective, who(), nccl_error_text(r, comm_));
    if (failure_.empty()) failure_ = reason;
    abort_locked();
    KILN_FAIL("{}", reason);
  }
  auto pending = std::make_shared<PendingCollective>();
  pending->name = collective;
  cudaEvent_t event = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  pending->event = event;
  CUDA_CHECK(cudaEventRecord(event, static_cast<cudaStream_t>(stream)));
  pending->deadline = Clock::now() + timeout_;
  pending_.push_back(pending);
  return pending;
}

void NcclComm::synchronize(const char* collective, const PendingCollective& pending) {
  for (int attempt = 0;; ++attempt) {
    if (event_done(pending.event, collective)) {
      check_healthy(collective);  // an abort also ends the kernels: done is not success
      return;
    }
    check_healthy(collective);
    if (Clock::now() > pending.deadline) {
      const std::string reason = fmt::format(
          "{}: {} timed out after {} ms waiting for the collective to finish (a peer rank died or never called it); "
          "the communicator was aborted",
          collective, who(), timeout_.count());
      fail(reason);
      KILN_FAIL("{}", reason);
    }
    back_off(attempt);
  }
}

void NcclComm::watch() noexcept {
  const auto period = std::clamp<std::chrono::milliseconds>(timeout_ / 20, std::chrono::milliseconds(1),
                                                             std::chrono::milliseconds(100));
  (void)cudaSetDevice(device_.index());
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    stop_cv_.wait_for(lock, period);
    if (stopping_ || aborted_) continue;
    try {
      std::string reason;
      const auto now = Clock::now();
      std::erase_if(pending_, [](const std::shared_ptr<PendingCollective>& p) { return event_done(p->event, "watchdog"); });
      for (const auto& p : pending_) {
        if (now > p->deadline) {
          reason = fmt::format(
              "{}: {} did not finish within {} ms (a peer rank died or never called it); the watchdog aborted the "
              "NCCL communicator",
              p->name, who(), timeout_.count());
          break;
        }
      }
      if (reason.empty()) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
        if (r != ncclSuccess) state = r;
        if (state != ncclSuccess && state != ncclInProgress)
          reason = fmt::format("NCCL reported an error on {}: {}", who(), nccl_error_text(state, comm_));
      }
      if (reason.empty() && abort_ && abort_->raised()) reason = abort_->reason();
      if (!reason.empty()) {
        if (failure_.empty()) failure_ = reason;
        abort_locked();
      }
    } catch (const std::exception& e) {  // a CUDA error while querying: the device is unusable
      if (failure_.empty()) failure_ = fmt::format("the NCCL watchdog of {} failed: {}", who(), e.what());
      abort_locked();
    }
  }
}

}  // namespace kiln::distributed::detail
