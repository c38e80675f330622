// key_averages() on synthetic event streams: nesting (self vs total), device time that
// counts once, grouping by name and by input shapes, memory, and malformed links.
#include "profiler/key_averages.h"
#include "synthetic.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::profiler;
using kiln::profiler::testing::host;
using kiln::profiler::testing::kernel;

namespace {

const EventAverage& find(const KeyAverages& k, const std::string& key, const std::string& shapes = "") {
  for (const EventAverage& r : k.rows())
    if (r.key == key && r.input_shapes == shapes) return r;
  FAIL("no row " << key << " " << shapes);
  static EventAverage none;
  return none;
}

}  // namespace

TEST_CASE("key_averages: self and total times through nesting, kernels counted once") {
  // linear_forward { linear { addmm -> gemm kernel (28 us) } } and a bias kernel (5 us)
  // launched by linear itself.
  std::vector<ProfileEvent> ev;
  ev.push_back(host("linear_forward", 0, 100000, -1, EventKind::UserScope));  // 0
  ev.push_back(host("linear", 10000, 90000, 0));                              // 1
  ev.push_back(host("addmm", 20000, 60000, 1));                               // 2
  ev.push_back(kernel("gemm", 70000, 98000, 2));                              // 3
  ev.push_back(kernel("bias", 99000, 104000, 1));                             // 4
  const KeyAverages k = key_averages(ev);
  REQUIRE(k.rows().size() == 5);
  const EventAverage& fwd = find(k, "linear_forward");
  CHECK(fwd.cpu_time_total_ns == 100000);
  CHECK(fwd.self_cpu_time_total_ns == 100000 - 80000);
  CHECK(fwd.self_cuda_time_total_ns == 0);
  CHECK(fwd.cuda_time_total_ns == 28000 + 5000);
  const EventAverage& linear = find(k, "linear");
  CHECK(linear.self_cpu_time_total_ns == 80000 - 40000);
  CHECK(linear.self_cuda_time_total_ns == 5000);
  CHECK(linear.cuda_time_total_ns == 33000);
  const EventAverage& addmm = find(k, "addmm");
  CHECK(addmm.self_cpu_time_total_ns == 40000);
  CHECK(addmm.self_cuda_time_total_ns == 28000);
  CHECK(addmm.cuda_time_total_ns == 28000);  // PyTorch would print 56000 here
  const EventAverage& gemm = find(k, "gemm");
  CHECK(gemm.kind == EventKind::Kernel);
  CHECK(gemm.cpu_time_total_ns == 0);
  CHECK(gemm.self_cuda_time_total_ns == 28000);
  CHECK(gemm.cuda_time_total_ns == 28000);
  // First-seen order, by start time.
  CHECK(k.rows()[0].key == "linear_forward");
  CHECK(k.rows()[3].key == "gemm");
  // The footers: host self times add up to the profile's host time, device rows to its
  // device time.
  const std::string t = k.table();
  CHECK(t.find("Self CPU time total: 100.000us") != std::string::npos);
  CHECK(t.find("Self CUDA time total: 33.000us") != std::string::npos);
}

TEST_CASE("key_averages: calls of one name sum; grouping by input shapes splits them") {
  std::vector<ProfileEvent> ev;
  for (int i = 0; i < 3; ++i) {
    ProfileEvent e = host("add", i * 1000, i * 1000 + 100 * (i + 1), -1);
    e.input_shapes =
        i < 2 ? std::vector<std::vector<int64_t>>{{2, 3}, {2, 3}} : std::vector<std::vector<int64_t>>{{4}, {}};
    ev.push_back(e);
  }
  ev.push_back(host("add", 5000, 5050, -1, EventKind::UserScope));  // a scope named like an op: its own row
  const KeyAverages by_name = key_averages(ev);
  REQUIRE(by_name.rows().size() == 2);
  CHECK(by_name.rows()[0].count == 3);
  CHECK(by_name.rows()[0].cpu_time_total_ns == 100 + 200 + 300);
  CHECK(by_name.rows()[0].cpu_time_avg_ns() == doctest::Approx(200.0));
  CHECK(by_name.rows()[0].input_shapes.empty());
  CHECK(by_name.rows()[1].kind == EventKind::UserScope);
  const KeyAverages by_shape = key_averages(ev, true);
  REQUIRE(by_shape.rows().size() == 3);
  CHECK(find(by_shape, "add", "[[2, 3], [2, 3]]").count == 2);
  CHECK(find(by_shape, "add", "[[4], []]").count == 1);
  const std::string t = by_shape.table();
  CHECK(t.find("Input Shapes") != std::string::npos);
  CHECK(t.find("[[2, 3], [2, 3]]") != std::string::npos);
}

TEST_CASE("key_averages: memory totals include children, self excludes them") {
  std::vector<ProfileEvent> ev;
  ev.push_back(host("outer", 0, 100, -1));
  ev.push_back(host("inner", 10, 20, 0));
  ev[0].cpu_memory_bytes = 512;
  ev[1].cpu_memory_bytes = 2048;
  ev[1].cuda_memory_bytes = 4096;
  const KeyAverages k = key_averages(ev);
  CHECK(find(k, "outer").cpu_memory_usage == 2560);
  CHECK(find(k, "outer").self_cpu_memory_usage == 512);
  CHECK(find(k, "outer").cuda_memory_usage == 4096);
  CHECK(find(k, "outer").self_cuda_memory_usage == 0);
  CHECK(find(k, "inner").cuda_memory_usage == 4096);
  TableOptions o;
  o.profile_memory = true;
  o.sort_by = "cpu_memory_usage";
  const std::string t = k.table(o);
  CHECK(t.find("CUDA Mem") != std::string::npos);
  CHECK(t.find("outer") < t.find("inner"));
}

TEST_CASE("key_averages: zero-length profile prints NaN shares; malformed links are errors") {
  const KeyAverages k = key_averages({host("noop", 5, 5, -1)});
  CHECK(k.table().find("NaN") != std::string::npos);
  CHECK_THROWS_WITH_AS(key_averages({host("a", 0, 10, 0)}), doctest::Contains("a parent is an earlier event"), Error);
  CHECK_THROWS_WITH_AS(key_averages({host("a", 10, 0, -1)}), doctest::Contains("ends before it starts"), Error);
  CHECK_THROWS_WITH_AS(key_averages({kernel("k", 0, 10, 3)}), doctest::Contains("has launcher 3 of 1 events"), Error);
  CHECK_THROWS_WITH_AS(key_averages({kernel("k1", 0, 10, -1), kernel("k2", 0, 10, 0)}),
                       doctest::Contains("names device event 0 as its launcher"), Error);
}

TEST_CASE("key_averages: dropped device records are reported under the table, never silently") {
  KeyAverages k = key_averages({host("op", 0, 100, -1), kernel("k", 10, 60, 0)});
  const std::string clean = k.table();
  CHECK(clean.find("dropped") == std::string::npos);
  k.set_dropped_device_records(17);
  const std::string warned = k.table();
  CHECK(warned.find("Warning: CUPTI dropped 17 device activity records") != std::string::npos);
  CHECK(warned.find("Self CUDA time total: 0.050us") < warned.find("Warning: CUPTI dropped"));
}
