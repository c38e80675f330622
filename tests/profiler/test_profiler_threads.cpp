// The profiler while ops run on several threads: recordings of four busy threads, and
// recordings started and stopped while the threads keep running. Every thread's events nest
// in that thread's own stack. `make tsan` runs this under ThreadSanitizer (with the other
// tests that start threads); in the ordinary suites it checks the attribution.
#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "profiler/profiler.h"
#include "profiler/record_function.h"
#include "testing.h"

using namespace kiln;
using profiler::Profiler;
using profiler::ProfileEvent;
using profiler::RecordFunction;

namespace {

constexpr int kThreads = 4;

// kThreads threads, each repeating one step: a "worker_step" scope around
// add(mul(a, b), 1.0) and sum(). hold() parks them between steps, so a test can start or
// stop a profiler while no op runs; release() lets them go on.
class Workers {
 public:
  Workers() : steps_(kThreads) {
    for (int t = 0; t < kThreads; ++t)
      threads_.emplace_back([this, t] {
        const Tensor a = randn({8, 8}), b = randn({8, 8});
        while (!quit_.load()) {
          if (hold_.load()) {
            parked_.fetch_add(1);
            while (hold_.load() && !quit_.load()) std::this_thread::yield();
            parked_.fetch_sub(1);
            continue;
          }
          {
            RecordFunction scope("worker_step");
            const Tensor c = add(mul(a, b), 1.0);
            (void)sum(c);
          }
          steps_[t].fetch_add(1);
        }
      });
  }
  ~Workers() {
    quit_ = true;
    for (std::thread& th : threads_) th.join();
  }
  // Returns once every thread is parked between two steps.
  void hold() {
    hold_ = true;
    while (parked_.load() < kThreads) std::this_thread::yield();
  }
  void release() { hold_ = false; }
  // Returns once every thread has completed two more steps (one of them wholly after now).
  void wait_two_steps() {
    std::vector<int64_t> from(kThreads);
    for (int t = 0; t < kThreads; ++t) from[t] = steps_[t].load();
    for (int t = 0; t < kThreads; ++t)
      while (steps_[t].load() < from[t] + 2) std::this_thread::yield();
  }

 private:
  std::atomic<bool> quit_{false}, hold_{false};
  std::atomic<int> parked_{0};
  std::vector<std::atomic<int64_t>> steps_;  // completed worker_step scopes per thread
  std::vector<std::thread> threads_;
};

// Checks what holds for every recording: a parent began earlier, on the same thread; every
// kiln::add sits in a worker_step with its input shape. Returns the kiln::add events per
// thread, and (through `charged`) those charged with their output's memory.
std::map<uint64_t, int64_t> check_nesting(const std::vector<ProfileEvent>& events, std::map<uint64_t, int64_t>& charged) {
  std::map<uint64_t, int64_t> adds;
  for (size_t i = 0; i < events.size(); ++i) {
    const ProfileEvent& e = events[i];
    CHECK(e.end_ns >= e.start_ns);
    if (e.parent < 0) continue;
    REQUIRE(e.parent < static_cast<int64_t>(i));
    const ProfileEvent& p = events[static_cast<size_t>(e.parent)];
    CHECK(p.thread == e.thread);
    CHECK(p.start_ns <= e.start_ns);
    if (e.name == "kiln::add") {
      CHECK(p.name == "worker_step");
      CHECK(e.input_shapes == std::vector<std::vector<int64_t>>{{8, 8}, {}});  // x + 1: the number's slot is []
      ++adds[e.thread];
      if (e.cpu_memory_bytes > 0) ++charged[e.thread];
    }
  }
  return adds;
}

}  // namespace

TEST_CASE("profiler: four threads recorded at once, each event inside its parent on its own thread") {
  Workers workers;
  for (int round = 0; round < 3; ++round) {
    Profiler prof({.record_shapes = true, .profile_memory = true});
    workers.hold();
    prof.start();
    workers.release();
    workers.wait_two_steps();
    workers.hold();
    prof.stop();
    workers.release();

    const std::vector<ProfileEvent>& events = prof.events();
    REQUIRE(!events.empty());
    std::map<uint64_t, int64_t> charged;
    const std::map<uint64_t, int64_t> adds = check_nesting(events, charged);
    CHECK(adds.size() == static_cast<size_t>(kThreads));  // each thread, under its own number
    CHECK(charged == adds);  // every add's [8, 8] output charged to it, on its own thread
    for (const ProfileEvent& e : events) {
      if (e.parent < 0) continue;
      CHECK(e.end_ns <= events[static_cast<size_t>(e.parent)].end_ns);  // a child ends inside its parent
    }
  }
}

TEST_CASE("profiler: recordings started and stopped while four threads keep running ops") {
  // No pause around start() and stop(): ops and scopes begin and end on other threads while
  // the profiler installs and removes its observers. (An op still running at stop() may end
  // after its scope does, or miss its memory at start(), because the profiler adds its op
  // observer after starting the collector and removes it before stopping it; only what holds
  // regardless is checked here.)
  Workers workers;
  for (int round = 0; round < 3; ++round) {
    Profiler prof({.record_shapes = true, .profile_memory = true});
    prof.start();
    workers.wait_two_steps();
    prof.stop();

    const std::vector<ProfileEvent>& events = prof.events();
    REQUIRE(!events.empty());
    std::map<uint64_t, int64_t> charged;
    const std::map<uint64_t, int64_t> adds = check_nesting(events, charged);
    // Each thread ran a whole step after start() returned: its add is inside its scope and
    // charged with its memory.
    CHECK(adds.size() == static_cast<size_t>(kThreads));
    CHECK(charged.size() == static_cast<size_t>(kThreads));
  }
}
