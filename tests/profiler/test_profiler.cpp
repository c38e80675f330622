// The Profiler on real ops (CPU device): what it records and when, nesting under
// RecordFunction scopes, input shapes, one profiler at a time, the schedule, and the Chrome
// trace read back as JSON.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "profiler/profiler.h"
#include "profiler/record_function.h"
#include "testing.h"

using namespace kiln;
using profiler::EventKind;
using profiler::Profiler;
using profiler::ProfilerAction;
using profiler::RecordFunction;

namespace {

const profiler::ProfileEvent* find_event(const Profiler& p, const std::string& name) {
  for (const profiler::ProfileEvent& e : p.events())
    if (e.name == name) return &e;
  return nullptr;
}

int64_t count_named(const std::vector<profiler::ProfileEvent>& events, const std::string& name) {
  int64_t n = 0;
  for (const profiler::ProfileEvent& e : events) n += e.name == name;
  return n;
}

}  // namespace

TEST_CASE("profiler: ops and scopes between start and stop, nested, with shapes") {
  const Tensor a = randn({2, 3}), b = randn({2, 3});
  (void)add(a, b);  // before start: not recorded
  Profiler prof({.record_shapes = true});
  prof.start();
  {
    RecordFunction scope("forward");
    const Tensor c = mul(add(a, b), 2.0);
    (void)c;
  }
  prof.stop();
  (void)add(a, b);  // after stop: not recorded

  const profiler::ProfileEvent* forward = find_event(prof, "forward");
  const profiler::ProfileEvent* add_event = find_event(prof, "kiln::add");
  const profiler::ProfileEvent* mul_event = find_event(prof, "kiln::mul");
  REQUIRE(forward != nullptr);
  REQUIRE(add_event != nullptr);
  REQUIRE(mul_event != nullptr);
  CHECK(forward->kind == EventKind::UserScope);
  CHECK(add_event->kind == EventKind::CpuOp);
  CHECK(count_named(prof.events(), "kiln::add") == 1);
  // Both ops ran inside the scope, which is their parent, and within its time.
  const auto forward_index = static_cast<int64_t>(forward - prof.events().data());
  CHECK(add_event->parent == forward_index);
  CHECK(mul_event->parent == forward_index);
  CHECK(add_event->start_ns >= forward->start_ns);
  CHECK(mul_event->end_ns <= forward->end_ns);
  CHECK(add_event->end_ns <= mul_event->start_ns);
  CHECK(add_event->input_shapes == std::vector<std::vector<int64_t>>{{2, 3}, {2, 3}});
  // A number operand's slot shows as [], as in PyTorch's Input Shapes.
  CHECK(mul_event->input_shapes == std::vector<std::vector<int64_t>>{{2, 3}, {}});

  const profiler::KeyAverages k = prof.key_averages();
  const std::string t = k.table({.sort_by = "cpu_time_total"});
  CHECK(t.find("kiln::add") != std::string::npos);
  CHECK(t.find("forward") < t.find("kiln::add"));   // the scope's total contains the op's
  CHECK(t.find("Self CUDA") == std::string::npos);  // no device activity recorded
  const std::string by_shape = prof.key_averages(true).table();
  CHECK(by_shape.find("[[2, 3], [2, 3]]") != std::string::npos);
}

TEST_CASE("profiler: one at a time; scopes that outlive the recording; bad calls") {
  Profiler first, second;
  first.start();
  CHECK_THROWS_WITH_AS(second.start(), doctest::Contains("another profiler is running"), Error);
  CHECK_THROWS_WITH_AS(first.start(), doctest::Contains("already running"), Error);
  auto open = std::make_unique<RecordFunction>("still open");
  first.stop();
  open.reset();  // closes after the recording ended: ignored
  const profiler::ProfileEvent* e = find_event(first, "still open");
  REQUIRE(e != nullptr);
  CHECK(e->end_ns >= e->start_ns);  // ended with the recording
  CHECK_THROWS_WITH_AS(first.stop(), doctest::Contains("not running"), Error);
  CHECK_THROWS_WITH_AS(first.step(), doctest::Contains("not running"), Error);
  second.start();  // free again
  second.stop();
  CHECK(second.events().empty());
  { RecordFunction idle("nobody listens"); }  // no profiler: nothing happens
  CHECK_THROWS_WITH_AS(Profiler({.schedule = profiler::Schedule{.active = 0}}),
                       doctest::Contains("active must be at least 1"), Error);
}

TEST_CASE("schedule: torch.profiler.schedule's actions, step by step") {
  const profiler::Schedule s{.wait = 1, .warmup = 1, .active = 2, .repeat = 2, .skip_first = 1};
  const ProfilerAction want[] = {ProfilerAction::None,   ProfilerAction::None,          ProfilerAction::Warmup,
                                 ProfilerAction::Record, ProfilerAction::RecordAndSave, ProfilerAction::None,
                                 ProfilerAction::Warmup, ProfilerAction::Record,        ProfilerAction::RecordAndSave,
                                 ProfilerAction::None,   ProfilerAction::None};
  for (int64_t step = 0; step < 11; ++step) {
    CAPTURE(step);
    CHECK(profiler::schedule_action(s, step) == want[step]);
  }
  CHECK(profiler::schedule_action({.active = 1}, 1000) == ProfilerAction::RecordAndSave);  // repeat 0: forever
}

TEST_CASE("profiler: a schedule records only the active steps and hands each span over") {
  const Tensor a = ones({4}), b = ones({4});
  std::vector<int64_t> adds_per_trace;
  std::vector<int64_t> steps_at_trace;
  std::vector<std::vector<std::string>> step_scopes;  // per trace, the ProfilerStep#N events
  bool adds_inside_steps = true;
  Profiler prof({.schedule = profiler::Schedule{.wait = 1, .warmup = 1, .active = 2, .repeat = 2},
                 .on_trace_ready = [&](Profiler& p) {
                   adds_per_trace.push_back(count_named(p.events(), "kiln::add"));
                   steps_at_trace.push_back(p.step_number());
                   step_scopes.emplace_back();
                   for (const profiler::ProfileEvent& e : p.events()) {
                     if (e.name.rfind("ProfilerStep#", 0) == 0) {
                       CHECK(e.kind == EventKind::UserScope);
                       step_scopes.back().push_back(e.name);
                     }
                     if (e.name == "kiln::add")
                       adds_inside_steps &= e.parent >= 0 && p.events()[static_cast<size_t>(e.parent)].name.rfind(
                                                                 "ProfilerStep#", 0) == 0;
                   }
                 }});
  prof.start();
  for (int step = 0; step < 10; ++step) {
    for (int i = 0; i <= step; ++i) (void)add(a, b);  // step k runs k + 1 adds
    prof.step();
  }
  prof.stop();
  // Cycles of 4 steps: wait (step 0), warmup (1), active (2, 3); then 4..7; repeat 2.
  CHECK(adds_per_trace == std::vector<int64_t>{3 + 4, 7 + 8});
  CHECK(steps_at_trace == std::vector<int64_t>{4, 8});
  // As in torch.profiler: each recorded step is a ProfilerStep#N scope around its ops.
  CHECK(step_scopes == std::vector<std::vector<std::string>>{{"ProfilerStep#2", "ProfilerStep#3"},
                                                             {"ProfilerStep#6", "ProfilerStep#7"}});
  CHECK(adds_inside_steps);
}

TEST_CASE("profiler: the Chrome trace parses back with every field a viewer needs") {
  Profiler prof({.record_shapes = true});
  prof.start();
  {
    RecordFunction scope("step");
    (void)relu(randn({8}));
  }
  prof.stop();
  const std::string path = "kiln_test_trace.json";
  prof.export_chrome_trace(path);
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::remove(path.c_str());
  REQUIRE(doc.contains("traceEvents"));
  std::set<std::string> names, cats;
  bool thread_named = false, process_named = false;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e.contains("tid"));
    if (e["ph"] == "M") {
      thread_named |= e["name"] == "thread_name";
      process_named |= e["name"] == "process_name";
      continue;
    }
    CHECK(e["ph"] == "X");
    CHECK(e["ts"].get<double>() >= 0);
    CHECK(e["dur"].get<double>() >= 0);
    names.insert(e["name"].get<std::string>());
    cats.insert(e["cat"].get<std::string>());
    if (e["name"] == "kiln::relu") CHECK(e["args"]["Input Dims"] == nlohmann::json::parse("[[8]]"));
  }
  CHECK(names.count("step") == 1);
  CHECK(names.count("kiln::relu") == 1);
  CHECK(names.count("kiln::randn") == 1);
  CHECK(cats == std::set<std::string>{"cpu_op", "user_annotation"});
  CHECK(thread_named);
  CHECK(process_named);
  CHECK_THROWS_WITH_AS(prof.export_chrome_trace("/nonexistent-dir/trace.json"),
                       doctest::Contains("export_chrome_trace: cannot open"), Error);
}

TEST_CASE("profiler: profile_memory charges each block to the op or scope that allocated or freed it") {
  const Tensor a = randn({256, 256}), b = randn({256, 256});  // 256 KiB each
  constexpr int64_t kBlock = 256 * 256 * 4;
  Profiler prof({.profile_memory = true});
  prof.start();
  {
    RecordFunction scope("outer");
    const Tensor c = add(a, b);
    const Tensor d = mul(c, b);
    (void)d;
  }  // c and d are freed here, inside "outer"
  prof.stop();
  const profiler::KeyAverages k = prof.key_averages();
  const profiler::EventAverage* add_row = nullptr;
  const profiler::EventAverage* outer_row = nullptr;
  for (const profiler::EventAverage& r : k.rows()) {
    if (r.key == "kiln::add") add_row = &r;
    if (r.key == "outer") outer_row = &r;
  }
  REQUIRE(add_row != nullptr);
  REQUIRE(outer_row != nullptr);
  CHECK(add_row->self_cpu_memory_usage == kBlock);
  CHECK(add_row->cpu_memory_usage == kBlock);
  CHECK(outer_row->self_cpu_memory_usage == -2 * kBlock);
  CHECK(outer_row->cpu_memory_usage == 0);  // two blocks made inside, both freed inside
  const std::string t = k.table();
  CHECK(t.find("Self CPU Mem") != std::string::npos);
  CHECK(t.find("256.00 Kb") != std::string::npos);
  CHECK(t.find("-512.00 Kb") != std::string::npos);

  // Without profile_memory the allocators are not observed and the columns stay away.
  Profiler plain;
  plain.start();
  (void)add(a, b);
  plain.stop();
  for (const profiler::ProfileEvent& e : plain.events()) CHECK(e.cpu_memory_bytes == 0);
  CHECK(plain.key_averages().table().find("CPU Mem") == std::string::npos);
}

TEST_CASE("profiler: without device activity the profile has CPU columns only and says why") {
  Profiler cpu_only({.activities = {profiler::Activity::CPU}});
  CHECK(cpu_only.device_activity_status() == "not recorded yet");
  cpu_only.start();
  (void)relu(randn({16}));
  cpu_only.stop();
  CHECK(cpu_only.device_activity_status() == "CUDA activity was not requested");
  CHECK(cpu_only.dropped_device_records() == 0);
  for (const profiler::ProfileEvent& e : cpu_only.events()) CHECK_FALSE(profiler::on_device(e.kind));
  const std::string table = cpu_only.key_averages().table();
  CHECK(table.find("kiln::relu") != std::string::npos);
  CHECK(table.find("Self CUDA") == std::string::npos);

  Profiler both;  // CPU and CUDA, the default
  both.start();
  (void)relu(randn({16}));
  both.stop();
  if (cuda::is_available()) {
    CHECK(both.device_activity_status() == "");  // CPU ops launch no kernels, though
  } else {
    INFO(both.device_activity_status());
    CHECK(both.device_activity_status().find("CPU columns only") != std::string::npos);
    CHECK(both.key_averages().table().find("Self CUDA") == std::string::npos);
  }
  for (const profiler::ProfileEvent& e : both.events()) CHECK_FALSE(profiler::on_device(e.kind));
}

TEST_CASE("EmitNvtx: guards nest; ops and scopes run the same with ranges on") {
  CHECK_FALSE(profiler::nvtx_enabled());
  {
    profiler::EmitNvtx outer;
    CHECK(profiler::nvtx_enabled());
    {
      profiler::EmitNvtx inner;
      RecordFunction scope("nvtx_scope");
      const Tensor r = relu(full({4}, -2.0f));
      CHECK(sum(r).item<float>() == 0.0f);
    }
    CHECK(profiler::nvtx_enabled());  // the outer guard is still alive
    // With a profiler recording too, both see the op.
    Profiler prof({.activities = {profiler::Activity::CPU}});
    prof.start();
    (void)relu(randn({4}));
    prof.stop();
    CHECK(count_named(prof.events(), "kiln::relu") == 1);
  }
  CHECK_FALSE(profiler::nvtx_enabled());
#ifdef KILN_WITH_CUDA
  CHECK(profiler::nvtx_available());
#endif
}
