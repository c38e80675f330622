// The copies behind to, copy_, clone, contiguous, item, to_vector and equal in the profiler's
// CPU-only recording: each is a "kiln::<op>" row of the table, and the events nest as
// PyTorch's do (aten::to > aten::_to_copy > aten::copy_, aten::item >
// aten::_local_scalar_dense), so a device copy's memcpy row, tied to the innermost op, sits
// under them (tests/cuda/test_transfer_profiler.cpp checks that part on a GPU).
#include <string>
#include <vector>

#include "profiler/profiler.h"
#include "testing.h"

using namespace kiln;
using profiler::ProfileEvent;
using profiler::Profiler;

namespace {

// The names from `e` up through its parents: {"kiln::copy_", "kiln::_to_copy", "kiln::to"}.
std::vector<std::string> chain(const std::vector<ProfileEvent>& events, const ProfileEvent& e) {
  std::vector<std::string> names{e.name};
  for (int64_t p = e.parent; p >= 0; p = events[static_cast<size_t>(p)].parent)
    names.push_back(events[static_cast<size_t>(p)].name);
  return names;
}

// The chains of every event named `name`.
std::vector<std::vector<std::string>> chains_of(const std::vector<ProfileEvent>& events, const std::string& name) {
  std::vector<std::vector<std::string>> out;
  for (const ProfileEvent& e : events)
    if (e.name == name) out.push_back(chain(events, e));
  return out;
}

using Chains = std::vector<std::vector<std::string>>;

}  // namespace

TEST_CASE("profiler: each copy is a kiln:: op, nested as PyTorch's table nests aten:: ops") {
  const Tensor x = testing::random({8, 16});
  Tensor dst = empty({8, 16});
  const Tensor one = full({1}, 0.5);
  Profiler prof({.record_shapes = true});
  prof.start();
  const Tensor y = x.to(kFloat64);
  dst.copy_(y);
  const double v = one.item<double>();
  const std::vector<float> values = x.t().to_vector<float>();
  const bool same = equal(x, dst);
  const Tensor c = x.clone();
  const Tensor t = x.t().contiguous();
  prof.stop();
  CHECK(v == 0.5);
  CHECK(values.size() == 128);
  CHECK(same);

  const std::vector<ProfileEvent>& events = prof.events();
  CHECK(chains_of(events, "kiln::to") == Chains{{"kiln::to"}});
  CHECK(chains_of(events, "kiln::_to_copy") == Chains{{"kiln::_to_copy", "kiln::to"}});
  CHECK(chains_of(events, "kiln::item") == Chains{{"kiln::item"}});
  CHECK(chains_of(events, "kiln::_local_scalar_dense") == Chains{{"kiln::_local_scalar_dense", "kiln::item"}});
  CHECK(chains_of(events, "kiln::to_vector") ==
        Chains{{"kiln::to_vector"}, {"kiln::to_vector", "kiln::equal"}, {"kiln::to_vector", "kiln::equal"}});
  CHECK(chains_of(events, "kiln::equal") == Chains{{"kiln::equal"}});
  CHECK(chains_of(events, "kiln::clone") == Chains{{"kiln::clone"}, {"kiln::clone", "kiln::contiguous"}});
  CHECK(chains_of(events, "kiln::contiguous") == Chains{{"kiln::contiguous"}});
  // Every copy_ in begin order: to's, the user's, to_vector's, equal's two, clone's, contiguous's.
  CHECK(chains_of(events, "kiln::copy_") == Chains{{"kiln::copy_", "kiln::_to_copy", "kiln::to"},
                                                   {"kiln::copy_"},
                                                   {"kiln::copy_", "kiln::to_vector"},
                                                   {"kiln::copy_", "kiln::to_vector", "kiln::equal"},
                                                   {"kiln::copy_", "kiln::to_vector", "kiln::equal"},
                                                   {"kiln::copy_", "kiln::clone"},
                                                   {"kiln::copy_", "kiln::clone", "kiln::contiguous"}});
  // A nested op lies within its parent's time.
  for (const ProfileEvent& e : events) {
    if (e.parent < 0) continue;
    const ProfileEvent& parent = events[static_cast<size_t>(e.parent)];
    CHECK(e.start_ns >= parent.start_ns);
    CHECK(e.end_ns <= parent.end_ns);
  }

  const std::string table = prof.key_averages().table();
  for (const char* row : {"kiln::to ", "kiln::_to_copy ", "kiln::copy_ ", "kiln::item ", "kiln::_local_scalar_dense ",
                          "kiln::to_vector ", "kiln::equal ", "kiln::clone ", "kiln::contiguous "}) {
    INFO(row);
    CHECK(table.find(row) != std::string::npos);
  }
}
