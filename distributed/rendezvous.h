// Rendezvous: where the ranks of a Threads group (threads of one process) meet. One object
// per group, shared by its ranks. Each collective is two meetings:
//   1. exchange(): every rank posts what it brings (its call: collective, sizes, dtype, data
//      pointer, or the message of a local argument error) and waits for all the others'; all
//      ranks then see the same list, so they all reach the same verdict on it;
//   2. a plain meeting after the ranks have read each other's data, so that no rank writes
//      its result (or starts the next collective) while another still reads its input.
// A meeting counts arrivals per generation; the last rank to arrive publishes the posts and
// opens the next generation. Every wait is bounded by the group's timeout: a rank that does
// not come, that left (its run_local function returned) or that failed makes the others throw
// a kiln::Error naming it and the collective, and breaks the group for good (later calls fail
// at once, as a NCCL communicator is unusable after ncclCommAbort).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collective_checks.h"
#include "process_group.h"

namespace kiln::distributed::detail {

/// What one rank brings to a meeting.
struct Post {
  CallSummary call;      ///< the call (collective "" at the second meeting)
  void* data = nullptr;  ///< this rank's input (broadcast: the tensor)
  std::string error;     ///< a local argument error of this rank, reported to every rank
};

/// The meeting point of one Threads group's ranks.
class Rendezvous {
 public:
  /// A meeting point for `size` ranks whose waits are bounded by `timeout`.
  Rendezvous(int size, std::chrono::milliseconds timeout);

  /// Number of ranks.
  int size() const { return size_; }
  /// The bound on each wait.
  std::chrono::milliseconds timeout() const { return timeout_; }

  /// Posts rank `rank`'s `post` for `collective` and returns every rank's, in rank order,
  /// once all have posted; throws kiln::Error on timeout or a broken group.
  std::shared_ptr<const std::vector<Post>> exchange(int rank, const char* collective, Post post);
  /// Waits until every rank has arrived here (a barrier); same failures as exchange().
  void meet(int rank, const char* collective);
  /// Breaks the group: every waiting and later call throws with `reason` (the first reason
  /// is kept). Never throws.
  void abort(const std::string& reason) noexcept;
  /// Records that rank `rank` will never come again (its thread finished): ranks waiting
  /// for it fail at once instead of at the timeout. Never throws.
  void leave(int rank) noexcept;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  std::vector<bool> here_;  // arrived in the current generation
  std::vector<bool> left_;  // will never arrive again
  std::vector<Post> posts_;
  std::shared_ptr<const std::vector<Post>> published_;  // the last completed generation's posts
  std::string broken_;                                  // why the group is broken ("" = usable)
};

}  // namespace kiln::distributed::detail
