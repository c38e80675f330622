// The default group's two homes: the process-wide group of init_process_group(), and the
// per-thread group run_local() gives each of its threads (which wins inside those threads).
// Internal to distributed/.
#pragma once

#include "process_group.h"

namespace kiln::distributed::detail {

/// The calling thread's run_local() group, or null.
ProcessGroup* thread_group();

/// Makes `group` the calling thread's default group (null clears it) while alive.
class ThreadGroupGuard {
 public:
  /// Installs `group` for this thread.
  explicit ThreadGroupGuard(ProcessGroup* group);
  /// Clears it.
  ~ThreadGroupGuard();
  ThreadGroupGuard(const ThreadGroupGuard&) = delete;
  ThreadGroupGuard& operator=(const ThreadGroupGuard&) = delete;
};

}  // namespace kiln::distributed::detail
