// Collectives in the profiler: each call is one op row named "<backend>:<collective>"
// (here "threads:all_reduce"), counted per call and seen from every rank's thread, with the
// ops the rank ran inside it nested under it.
#include <algorithm>
#include <string>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;
namespace dist = kiln::distributed;

namespace {

int64_t count_of(const profiler::KeyAverages& avg, const std::string& key) {
  const auto& rows = avg.rows();
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const profiler::EventAverage& r) { return r.key == key; });
  return it == rows.end() ? 0 : it->count;
}

}  // namespace

TEST_CASE("collectives show as op rows named backend:collective, one per call and rank") {
  profiler::Profiler prof({.activities = {profiler::Activity::CPU}});
  prof.start();
  dist::run_local(2, DeviceType::CPU, [&](int) {
    Tensor t = random({16});
    dist::all_reduce(t);
    dist::all_reduce(t, dist::ReduceOp::Max);
    dist::broadcast(t, 1);
    Tensor g = zeros({32});
    dist::all_gather(g, t);
    dist::reduce_scatter(t, g);
    dist::barrier();
  });
  prof.stop();
  const profiler::KeyAverages avg = prof.key_averages();
  CHECK(count_of(avg, "threads:all_reduce") == 4);
  CHECK(count_of(avg, "threads:broadcast") == 2);
  CHECK(count_of(avg, "threads:all_gather") == 2);
  CHECK(count_of(avg, "threads:reduce_scatter") == 2);
  CHECK(count_of(avg, "threads:barrier") == 2);
  CHECK(avg.table().find("threads:all_reduce") != std::string::npos);
  // Nothing is recorded without a profiler.
  profiler::Profiler idle({.activities = {profiler::Activity::CPU}});
  dist::run_local(1, DeviceType::CPU, [](int) {
    Tensor t = random({4});
    dist::all_reduce(t);
  });
  idle.start();
  idle.stop();
  CHECK(count_of(idle.key_averages(), "threads:all_reduce") == 0);
}
