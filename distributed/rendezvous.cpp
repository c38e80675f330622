// The meeting point of a Threads group (rendezvous.h says how a collective uses it).
#include "rendezvous.h"

#include <fmt/ranges.h>

#include "../core/error.h"

namespace kiln::distributed::detail {

namespace {

// "rank 2" or "ranks 1, 3".
std::string ranks_phrase(const std::vector<int>& ranks) {
  return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "));
}

}  // namespace

Rendezvous::Rendezvous(int size, std::chrono::milliseconds timeout)
    : size_(size), timeout_(timeout), here_(size, false), left_(size, false), posts_(size) {
  KILN_CHECK(size >= 1, "run_local: the world size must be at least 1, got {}", size);
  KILN_CHECK(timeout.count() > 0, "run_local: the timeout must be positive, got {} ms", timeout.count());
}

std::shared_ptr<const std::vector<Post>> Rendezvous::exchange(int rank, const char* collective, Post post) {
  std::unique_lock lock(mutex_);
  KILN_CHECK(broken_.empty(), "{}: the process group is broken: {}", collective, broken_);
  KILN_INTERNAL_ASSERT(rank >= 0 && rank < size_ && !here_[rank], "rank {} arrived twice", rank);
  const uint64_t generation = generation_;
  posts_[rank] = std::move(post);
  here_[rank] = true;
  if (++arrived_ == size_) {
    published_ = std::make_shared<const std::vector<Post>>(std::move(posts_));
    posts_.assign(size_, Post{});
    here_.assign(size_, false);
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return published_;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (generation_ == generation) {
    KILN_CHECK(broken_.empty(), "{}: the process group is broken: {}", collective, broken_);
    std::vector<int> gone;
    for (int r = 0; r < size_; ++r)
      if (!here_[r] && left_[r]) gone.push_back(r);
    if (!gone.empty()) {
      broken_ = fmt::format("{} finished without joining {}", ranks_phrase(gone), collective);
      cv_.notify_all();
      KILN_FAIL("{}: {} (threads group of {}, seen from rank {})", collective, broken_, size_, rank);
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && generation_ == generation && broken_.empty()) {
      std::vector<int> missing;
      for (int r = 0; r < size_; ++r)
        if (!here_[r]) missing.push_back(r);
      broken_ = fmt::format("{} did not arrive at {} within {} ms", ranks_phrase(missing), collective,
                            timeout_.count());
      cv_.notify_all();
      KILN_FAIL("{}: {} (threads group of {}, seen from rank {})", collective, broken_, size_, rank);
    }
  }
  return published_;
}

void Rendezvous::meet(int rank, const char* collective) { exchange(rank, collective, Post{}); }

void Rendezvous::abort(const std::string& reason) noexcept {
  try {
    std::lock_guard lock(mutex_);
    if (broken_.empty()) broken_ = reason;
    cv_.notify_all();
  } catch (...) {  // a failed string copy: the group stays usable, waits still time out
  }
}

void Rendezvous::leave(int rank) noexcept {
  std::lock_guard lock(mutex_);
  left_[rank] = true;
  cv_.notify_all();
}

}  // namespace kiln::distributed::detail
