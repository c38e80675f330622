// The Threads backend's collectives (threads_backend.h). Each one:
//   1. checks its arguments locally; a failure is posted rather than thrown at once, so the
//      other ranks learn of it at the meeting instead of waiting for a rank that left;
//   2. exchanges posts with every rank and checks that all made the same call (collective,
//      dtype, sizes, op, root): every rank sees the same posts, so all reach the same verdict;
//   3. computes its result from the others' inputs into a private buffer;
//   4. meets again (nobody reads an input any more), then writes its result.
// Step 4's order is what makes in-place calls (all_reduce) and outputs that alias inputs safe.
#include "threads_backend.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <type_traits>
#include <utility>

#include "../core/error.h"
#include "../tensor/dtype_dispatch.h"
#include "collective_checks.h"
#include "collective_scope.h"

namespace kiln::distributed::detail {

namespace {

/// A collective that finished before its call returned.
class DoneWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
  void synchronize() override {}
};

WorkHandle done() { return std::make_shared<DoneWork>(); }

using Posts = std::shared_ptr<const std::vector<Post>>;

// Throws (on every rank alike) unless all ranks passed their checks and made the same call.
void check_agreement(const char* collective, const std::vector<Post>& posts) {
  std::vector<CallSummary> calls;
  for (size_t r = 0; r < posts.size(); ++r) {
    KILN_CHECK(posts[r].error.empty(), "{}: rank {} failed its argument checks: {}", collective, r, posts[r].error);
    calls.push_back(posts[r].call);
  }
  check_same_call(collective, calls);
}

// Runs `check` and `fill` (which describes this rank's call in a Post), exchanges posts and
// checks agreement. A local check failure is posted, then rethrown on this rank.
template <typename Check, typename Fill>
Posts start(Rendezvous& rv, int rank, const char* collective, Check&& check, Fill&& fill) {
  Post post;
  post.call.collective = collective;
  std::exception_ptr local;
  try {
    check();
    fill(post);
  } catch (const Error& e) {
    post.error = e.what();
    local = std::current_exception();
  }
  Posts posts = rv.exchange(rank, collective, std::move(post));
  if (local) std::rethrow_exception(local);
  check_agreement(collective, *posts);
  return posts;
}

// Steps 3 and 4 for one rank: `compute` fills a private result, `write` stores it after the
// second meeting. A failure in between would leave the others at that meeting: break the
// group instead, so they fail now.
template <typename Compute>
void finish(Rendezvous& rv, int rank, const char* collective, Compute&& compute) {
  std::function<void()> write;
  try {
    write = compute();
  } catch (const std::exception& e) {
    rv.abort(fmt::format("rank {} failed inside {}: {}", rank, collective, e.what()));
    throw;
  }
  rv.meet(rank, collective);
  if (write) write();
}

// a + b with integers wrapping (no signed overflow).
template <typename A>
A add(A a, A b) {
  if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

// Combines two values under `op` (Avg sums; the division comes at the end). Bool: Sum and
// Max are OR, Min is AND. Floats: Max and Min propagate NaN, as torch.maximum does.
template <typename A>
A combine(A a, A b, ReduceOp op) {
  if constexpr (std::is_same_v<A, bool>) {
    return op == ReduceOp::Min ? (a && b) : (a || b);
  } else {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: return add(a, b);
      case ReduceOp::Max:
        if constexpr (std::is_floating_point_v<A>)
          if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<A>::quiet_NaN();
        return a < b ? b : a;
      case ReduceOp::Min:
        if constexpr (std::is_floating_point_v<A>)
          if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<A>::quiet_NaN();
        return b < a ? b : a;
    }
    return a;
  }
}

// out[i] = combine over ranks r = 0, 1, ... of posts[r].data[offset + i], for i < n, in blocks
// so the accumulator (float for 16-bit types) stays in cache.
template <typename T>
void reduce_ranks(T* out, const std::vector<Post>& posts, int64_t offset, int64_t n, ReduceOp op) {
  using A = acc_t<T>;
  constexpr int64_t kBlock = 1024;
  std::array<A, kBlock> acc;
  const int size = static_cast<int>(posts.size());
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    const T* first = static_cast<const T*>(posts[0].data) + offset + b;
    for (int64_t i = 0; i < m; ++i) acc[i] = static_cast<A>(first[i]);
    for (int r = 1; r < size; ++r) {
      const T* in = static_cast<const T*>(posts[r].data) + offset + b;
      for (int64_t i = 0; i < m; ++i) acc[i] = combine<A>(acc[i], static_cast<A>(in[i]), op);
    }
    if constexpr (std::is_floating_point_v<A>)
      if (op == ReduceOp::Avg)
        for (int64_t i = 0; i < m; ++i) acc[i] /= static_cast<A>(size);
    for (int64_t i = 0; i < m; ++i) out[b + i] = static_cast<T>(acc[i]);
  }
}

// The reduction of block [offset, offset + n) of every rank's input, written to `dst` after
// the second meeting.
std::function<void()> reduce_later(const std::vector<Post>& posts, int64_t offset, int64_t n, DType dtype,
                                   ReduceOp op, void* dst, const char* collective) {
  std::function<void()> write;
  dispatch_all(dtype, collective, [&]<typename T>() {
    auto result = std::shared_ptr<T[]>(new T[static_cast<size_t>(std::max<int64_t>(n, 1))]);
    reduce_ranks<T>(result.get(), posts, offset, n, op);
    write = [result, dst, n] {
      if (n > 0) std::memcpy(dst, result.get(), static_cast<size_t>(n) * sizeof(T));
    };
  });
  return write;
}

}  // namespace

ThreadsGroup::ThreadsGroup(int rank, std::shared_ptr<Rendezvous> rendezvous)
    : rank_(rank), rendezvous_(std::move(rendezvous)) {
  KILN_INTERNAL_ASSERT(rendezvous_ != nullptr && rank >= 0 && rank < rendezvous_->size());
}

WorkHandle ThreadsGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  CollectiveScope scope("threads:all_reduce");
  Posts posts = start(
      *rendezvous_, rank_, "all_reduce", [&] { check_all_reduce(*this, tensor, op); },
      [&](Post& p) {
        p.data = tensor.data_ptr();
        p.call.input_numel = p.call.output_numel = tensor.numel();
        p.call.dtype = tensor.dtype();
        p.call.op = op;
      });
  finish(*rendezvous_, rank_, "all_reduce", [&] {
    return reduce_later(*posts, 0, tensor.numel(), tensor.dtype(), op, tensor.data_ptr(), "all_reduce");
  });
  return done();
}

WorkHandle ThreadsGroup::broadcast(Tensor& tensor, int src) {
  CollectiveScope scope("threads:broadcast");
  Posts posts = start(
      *rendezvous_, rank_, "broadcast", [&] { check_broadcast(*this, tensor, src); },
      [&](Post& p) {
        p.data = tensor.data_ptr();
        p.call.input_numel = p.call.output_numel = tensor.numel();
        p.call.dtype = tensor.dtype();
        p.call.src = src;
      });
  // The root's tensor is only read, so the others copy straight into theirs.
  finish(*rendezvous_, rank_, "broadcast", [&]() -> std::function<void()> {
    if (rank_ != src && tensor.nbytes() > 0) std::memcpy(tensor.data_ptr(), (*posts)[src].data, tensor.nbytes());
    return {};
  });
  return done();
}

WorkHandle ThreadsGroup::all_gather(Tensor& output, const Tensor& input) {
  CollectiveScope scope("threads:all_gather");
  Posts posts = start(
      *rendezvous_, rank_, "all_gather", [&] { check_all_gather(*this, output, input); },
      [&](Post& p) {
        p.data = input.data_ptr();
        p.call.input_numel = input.numel();
        p.call.output_numel = output.numel();
        p.call.dtype = input.dtype();
      });
  finish(*rendezvous_, rank_, "all_gather", [&] {
    const size_t block = input.nbytes();
    auto result = std::make_shared<std::vector<unsigned char>>(output.nbytes());
    if (block > 0)
      for (int r = 0; r < size(); ++r) std::memcpy(result->data() + r * block, (*posts)[r].data, block);
    void* dst = output.data_ptr();
    return std::function<void()>([result, dst] {
      if (!result->empty()) std::memcpy(dst, result->data(), result->size());
    });
  });
  return done();
}

WorkHandle ThreadsGroup::reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op) {
  CollectiveScope scope("threads:reduce_scatter");
  Posts posts = start(
      *rendezvous_, rank_, "reduce_scatter", [&] { check_reduce_scatter(*this, output, input, op); },
      [&](Post& p) {
        p.data = input.data_ptr();
        p.call.input_numel = input.numel();
        p.call.output_numel = output.numel();
        p.call.dtype = input.dtype();
        p.call.op = op;
      });
  finish(*rendezvous_, rank_, "reduce_scatter", [&] {
    const int64_t n = output.numel();
    return reduce_later(*posts, rank_ * n, n, input.dtype(), op, output.data_ptr(), "reduce_scatter");
  });
  return done();
}

void ThreadsGroup::barrier() {
  CollectiveScope scope("threads:barrier");
  start(*rendezvous_, rank_, "barrier", [] {}, [](Post&) {});
}

}  // namespace kiln::distributed::detail
