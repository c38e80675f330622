// The thread-per-rank runner behind run_local(), shared by the Threads and NCCL backends:
// one thread per rank makes its group, installs it as the thread's default group and runs
// the user's function. The first exception (in time) is kept and rethrown after every thread
// ended; each failure also breaks the group (hooks.abort) so that the other ranks stop
// waiting for the failed one at once. Groups are destroyed only after every rank's function
// has returned, so a finished rank never tears its communicator down under a running peer.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "process_group.h"

namespace kiln::distributed::detail {

/// What run_rank_threads() asks the backend for.
struct RankHooks {
  std::function<std::unique_ptr<ProcessGroup>(int rank)> make_group;  ///< called on the rank's thread
  std::function<void(const std::string& reason)> abort;              ///< break every rank's group; never throws
  std::function<void(int rank)> leave;                               ///< optional: rank's function returned
};

/// Runs fn(rank) on `world_size` threads as described above.
void run_rank_threads(int world_size, const RankHooks& hooks, const std::function<void(int)>& fn);

}  // namespace kiln::distributed::detail
