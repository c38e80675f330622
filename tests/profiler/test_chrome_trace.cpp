// The Chrome trace of a synthetic profile with device events (profiler/chrome_trace.h): a
// kernel and a memcpy launched by an op, a memset with no known launcher, read back as JSON
// and checked for the fields Perfetto needs, the GPU's pid and stream tids, launch geometry
// and exactly one matched flow per launched device event, starting at the launch.
#include <nlohmann/json.hpp>
#include <set>

#include "profiler/chrome_trace.h"
#include "synthetic.h"
#include "testing.h"

using namespace kiln;
using profiler::EventKind;
using profiler::ProfileEvent;

namespace {

// A host event on CPU thread 3.
ProfileEvent host(std::string name, int64_t start, int64_t end, int64_t parent) {
  ProfileEvent e = profiler::testing::host(std::move(name), start, end, parent);
  e.thread = 3;
  return e;
}

// Device work of `kind` on device 1, stream 7.
ProfileEvent device(std::string name, EventKind kind, int64_t start, int64_t end, int64_t launcher,
                    uint64_t correlation) {
  ProfileEvent e = profiler::testing::kernel(std::move(name), start, end, launcher);
  e.kind = kind;
  e.device = 1;
  e.thread = 7;  // the stream
  e.correlation = correlation;
  return e;
}

}  // namespace

TEST_CASE("chrome_trace: device events on the GPU's pid and stream, launch geometry, one flow per launch") {
  std::vector<ProfileEvent> events;
  events.push_back(host("kiln::linear", 1000, 9000, -1));
  events.push_back(host("kiln::addmm", 2000, 8000, 0));
  ProfileEvent kernel = device("sm90_xmma_gemm_f32f32", EventKind::Kernel, 5000, 33000, 1, 42);
  kernel.grid = {32, 2, 1};
  kernel.block = {128, 1, 1};
  kernel.registers_per_thread = 168;
  kernel.shared_memory_bytes = 49152;
  kernel.launch_ns = 4000;  // the cudaLaunchKernel inside addmm
  events.push_back(kernel);
  ProfileEvent copy = device("Memcpy DtoH (Device -> Pageable)", EventKind::Memcpy, 40000, 42000, 0, 43);
  copy.transfer_bytes = 1 << 20;
  copy.detail = "DtoH";
  events.push_back(copy);
  ProfileEvent set = device("Memset (Device)", EventKind::Memset, 50000, 50500, -1, 44);
  set.transfer_bytes = 4096;
  events.push_back(set);

  const nlohmann::json doc = nlohmann::json::parse(profiler::chrome_trace(events));
  REQUIRE(doc.contains("traceEvents"));
  std::map<std::string, nlohmann::json> by_name;
  std::vector<nlohmann::json> starts, finishes;
  std::set<std::string> process_names, thread_names;
  int64_t host_pid = -1;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e.contains("tid"));
    const std::string ph = e["ph"];
    if (ph == "M") {
      (e["name"] == "process_name" ? process_names : thread_names).insert(e["args"]["name"].get<std::string>());
    } else if (ph == "X") {
      by_name[e["name"].get<std::string>()] = e;
    } else if (ph == "s") {
      starts.push_back(e);
    } else if (ph == "f") {
      finishes.push_back(e);
    } else {
      FAIL("unexpected ph " << ph);
    }
  }
  host_pid = by_name.at("kiln::addmm")["pid"].get<int64_t>();
  CHECK(by_name.at("kiln::addmm")["cat"] == "cpu_op");

  const nlohmann::json& k = by_name.at("sm90_xmma_gemm_f32f32");
  CHECK(k["cat"] == "kernel");
  CHECK(k["pid"] == 1);  // the device
  CHECK(k["tid"] == 7);  // the stream
  CHECK(k["ts"].get<double>() == doctest::Approx(5.0));
  CHECK(k["dur"].get<double>() == doctest::Approx(28.0));
  CHECK(k["args"]["grid"] == nlohmann::json::parse("[32, 2, 1]"));
  CHECK(k["args"]["block"] == nlohmann::json::parse("[128, 1, 1]"));
  CHECK(k["args"]["registers per thread"] == 168);
  CHECK(k["args"]["shared memory"] == 49152);
  CHECK(k["args"]["correlation"] == 42);
  CHECK(k["args"]["External id"] == 1);  // addmm's index, as the op's own External id

  const nlohmann::json& m = by_name.at("Memcpy DtoH (Device -> Pageable)");
  CHECK(m["cat"] == "gpu_memcpy");
  CHECK(m["args"]["bytes"] == 1 << 20);
  CHECK(m["args"]["memory bandwidth (GB/s)"].get<double>() == doctest::Approx((1 << 20) / 2000.0));
  const nlohmann::json& z = by_name.at("Memset (Device)");
  CHECK(z["cat"] == "gpu_memset");
  CHECK_FALSE(z["args"].contains("External id"));

  // Flows: the kernel's from addmm, the memcpy's from linear; none for the memset.
  REQUIRE(starts.size() == 2);
  REQUIRE(finishes.size() == 2);
  for (const nlohmann::json& s : starts) {
    const auto match = std::find_if(finishes.begin(), finishes.end(), [&](const nlohmann::json& f) {
      return f["id"] == s["id"] && f["cat"] == s["cat"] && f["name"] == s["name"];
    });
    REQUIRE(match != finishes.end());
    CHECK(s["pid"] == host_pid);
    CHECK(s["tid"] == 3);
    CHECK((*match)["bp"] == "e");
    CHECK((*match)["pid"] == 1);
    CHECK((*match)["tid"] == 7);
    if (s["id"] == 42) {
      CHECK(s["ts"].get<double>() == doctest::Approx(4.0));         // the launch, inside addmm
      CHECK((*match)["ts"].get<double>() == doctest::Approx(5.0));  // the kernel's start
    } else {
      CHECK(s["id"] == 43);
      CHECK(s["ts"].get<double>() == doctest::Approx(1.0));  // launch time unknown: linear's start
    }
  }
  CHECK(process_names == std::set<std::string>{"kiln", "GPU 1"});
  CHECK(thread_names == std::set<std::string>{"thread 3", "stream 7"});
}
