// LaunchAttribution: the innermost event of the launching thread open at the launch time,
// on synthetic events (nesting, siblings, several threads, times outside every event).
#include <vector>

#include "profiler/launch_attribution.h"
#include "synthetic.h"
#include "testing.h"

using namespace kiln::profiler;
using kiln::profiler::testing::host;

namespace {

ProfileEvent on_thread(ProfileEvent e, uint64_t thread) {
  e.thread = thread;
  return e;
}

}  // namespace

TEST_CASE("launch attribution: the innermost open event of the launching thread") {
  // Thread 1: step [0, 100] holding linear [10, 60] (holding addmm [20, 50]) and add [70, 90].
  // Thread 2: scope [15, 80] holding mul [30, 40], begun in between thread 1's events.
  std::vector<ProfileEvent> events = {
      on_thread(host("step", 0, 100, -1, EventKind::UserScope), 1),
      on_thread(host("linear", 10, 60, 0), 1),
      on_thread(host("scope", 15, 80, -1, EventKind::UserScope), 2),
      on_thread(host("addmm", 20, 50, 1), 1),
      on_thread(host("mul", 30, 40, 2), 2),
      on_thread(host("add", 70, 90, 0), 1),
  };
  const LaunchAttribution attribution(events);

  CHECK(attribution.innermost(1, 25) == 3);    // inside addmm
  CHECK(attribution.innermost(1, 20) == 3);    // at its start
  CHECK(attribution.innermost(1, 50) == 3);    // at its end
  CHECK(attribution.innermost(1, 55) == 1);    // addmm ended, linear still open
  CHECK(attribution.innermost(1, 65) == 0);    // between linear and add: the step
  CHECK(attribution.innermost(1, 75) == 5);    // add
  CHECK(attribution.innermost(1, 5) == 0);     // before linear began
  CHECK(attribution.innermost(1, 101) == -1);  // after everything
  CHECK(attribution.innermost(1, -1) == -1);   // before everything

  // The same times on thread 2 find thread 2's events only.
  CHECK(attribution.innermost(2, 25) == 2);
  CHECK(attribution.innermost(2, 35) == 4);
  CHECK(attribution.innermost(2, 45) == 2);
  CHECK(attribution.innermost(2, 85) == -1);
  CHECK(attribution.innermost(2, 10) == -1);

  // A thread that recorded nothing launched outside every op.
  CHECK(attribution.innermost(3, 35) == -1);
}

TEST_CASE("launch attribution: device events among the host events are not launchers") {
  std::vector<ProfileEvent> events = {on_thread(host("add", 0, 100, -1), 1),
                                      kiln::profiler::testing::kernel("k", 10, 20, 0)};
  events[1].thread = 1;  // a stream number that happens to equal the thread's
  const LaunchAttribution attribution(events);
  CHECK(attribution.innermost(1, 15) == 0);
}

TEST_CASE("launch attribution: events given out of start order are found all the same") {
  // add [40, 50] listed before its enclosing scope [0, 100].
  std::vector<ProfileEvent> events = {on_thread(host("add", 40, 50, 1), 1),
                                      on_thread(host("scope", 0, 100, -1, EventKind::UserScope), 1)};
  const LaunchAttribution attribution(events);
  CHECK(attribution.innermost(1, 45) == 0);
  CHECK(attribution.innermost(1, 60) == 1);
  CHECK(attribution.innermost(1, 10) == 1);
}

TEST_CASE("launch attribution: an empty recording names no launcher") {
  const std::vector<ProfileEvent> events;
  const LaunchAttribution attribution(events);
  CHECK(attribution.innermost(1, 0) == -1);
}
