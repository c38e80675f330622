// The thread-per-rank runner of run_local() (rank_threads.h).
#include "rank_threads.h"

#include <exception>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "default_group.h"

namespace kiln::distributed::detail {

namespace {

std::string what(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

void run_rank_threads(int world_size, const RankHooks& hooks, const std::function<void(int)>& fn) {
  std::mutex mutex;
  std::exception_ptr first;
  std::latch all_done(world_size);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(world_size));
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      std::unique_ptr<ProcessGroup> group;
      try {
        group = hooks.make_group(rank);
        ThreadGroupGuard guard(group.get());
        fn(rank);
      } catch (...) {
        std::exception_ptr e = std::current_exception();
        {
          std::lock_guard lock(mutex);
          if (!first) first = e;
        }
        hooks.abort(fmt::format("rank {} failed: {}", rank, what(e)));
      }
      if (hooks.leave) hooks.leave(rank);
      all_done.arrive_and_wait();
      group.reset();
    });
  }
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace kiln::distributed::detail
