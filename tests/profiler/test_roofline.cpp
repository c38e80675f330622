// The roofline columns of key_averages().table() (TFLOP/s, GB/s, Bound, Roof %) and the
// device-ceilings footer, on synthetic rows and hand-made ceilings (no GPU needed): values
// computed by hand from the rows' FLOPs, bytes and Self CUDA time, the bound on each side of
// the ridge point, "--" where a cell does not apply, and tables without ceilings unchanged.
#include <fmt/format.h>

#include <sstream>
#include <vector>

#include "profiler/device_ceilings.h"
#include "profiler/key_averages.h"
#include "synthetic.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::profiler;
using kiln::profiler::testing::row;

namespace {

// An H200 as device_ceilings() would describe it: 132 SMs at 1980 MHz, sm_90's FLOPs per
// clock per SM (float32 256, TF32 2048, half 4096, float64 256), 4.31 TB/s measured.
DeviceCeilings h200() {
  DeviceCeilings c;
  c.device = 0;
  c.device_name = "NVIDIA H200";
  c.memory_bytes_per_s = 4.31e12;
  c.memory_source = "measured: D2D copy of 256 MiB, median of 10";
  const double sm_hz = 132 * 1980e6;
  c.float32_flops_per_s = sm_hz * 256;
  c.tf32_flops_per_s = sm_hz * 2048;
  c.half_flops_per_s = sm_hz * 4096;
  c.float64_flops_per_s = sm_hz * 256;
  c.flops_source = "132 SMs x 1980 MHz x FLOPs/clock/SM for sm_90";
  return c;
}

// Round ceilings for the ridge: 100 TFLOP/s float32 over 2 TB/s, so 50 FLOPs per byte.
DeviceCeilings round_ceilings() {
  DeviceCeilings c;
  c.device_name = "test";
  c.memory_bytes_per_s = 2e12;
  c.float32_flops_per_s = 100e12;
  return c;
}

// The last `n` whitespace-separated cells of the table line whose first cell is `name`,
// joined by single spaces.
std::string last_cells(const std::string& table, const std::string& name, size_t n) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> cells;
    for (std::string w; words >> w;) cells.push_back(w);
    if (!cells.empty() && cells[0] == name && cells.size() >= n)
      return fmt::format("{}", fmt::join(cells.end() - static_cast<long>(n), cells.end(), " "));
  }
  FAIL("no line " << name);
  return {};
}

// The nn.Linear sample of test_table.cpp (PyTorch's sums), with addmm's FLOPs and bytes:
// x [64, 1024] @ w^T [1024, 4096] + bias [4096], float32, its kernel 28 us.
std::vector<EventAverage> linear_rows(MathKind addmm_math) {
  const int64_t rest = 2613000 - 198084 - 24066 - 223989;  // the profile's other host time
  std::vector<EventAverage> rows = {
      row("linear_forward", EventKind::UserScope, 198084, 2591300, 0, 56000),
      row("aten::linear", EventKind::CpuOp, 24066, 2393200, 0, 56000),
      row("aten::addmm", EventKind::CpuOp, 223989, 2304100, 28000, 56000),
      row("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_"
          "kernel",
          EventKind::Kernel, 0, 0, 28000, 28000),
      row("cudaLaunchKernel", EventKind::CpuOp, rest, rest, 0, 0),
  };
  rows[2].flops = 2.0 * 64 * 1024 * 4096;
  rows[2].bytes = 4.0 * (4096 + 64 * 1024 + 1024 * 4096 + 64 * 4096);  // bias, x, w, out
  rows[2].math = addmm_math;
  return rows;
}

std::string lines(std::initializer_list<const char*> ls, std::initializer_list<std::string> footers) {
  std::string out;
  for (const char* l : ls) out += std::string(l) + "  \n";
  for (const std::string& l : footers) out += l + "\n";
  return out;
}

}  // namespace

TEST_CASE("roofline: the nn.Linear sample with H200 ceilings, character for character") {
  KeyAverages averages(linear_rows(MathKind::Float32));
  averages.set_device_ceilings(h200());
  TableOptions options;
  options.sort_by = "cuda_time_total";
  options.row_limit = 4;
  options.with_flops = true;
  // addmm: 536870912 FLOPs / 28 us = 19.174 TFLOP/s; 18104320 bytes / 28 us = 646.6 GB/s;
  // 29.65 FLOPs per byte is past float32's ridge 66.91 / 4.31 = 15.5: compute-bound, at
  // 19.174 / 66.908 = 28.7% of the float32 peak.
  // clang-format off
  const std::string want = lines(
      {"-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------",
       "                                                   Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg     Self CUDA   Self CUDA %    CUDA total  CUDA time avg    # of Calls  Total MFLOPs       TFLOP/s          GB/s         Bound        Roof %",
       "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------",
       "                                         linear_forward         7.58%     198.084us        99.17%       2.591ms       2.591ms       0.000us         0.00%      56.000us      56.000us             1            --            --            --            --            --",
       "                                           aten::linear         0.92%      24.066us        91.59%       2.393ms       2.393ms       0.000us         0.00%      56.000us      56.000us             1            --            --            --            --            --",
       "                                            aten::addmm         8.57%     223.989us        88.18%       2.304ms       2.304ms      28.000us       100.00%      56.000us      56.000us             1       536.871        19.174         646.6       compute         28.7%",
       "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x...         0.00%       0.000us         0.00%       0.000us       0.000us      28.000us       100.00%      28.000us      28.000us             1            --            --            --            --            --",
       "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------"},
      {"Self CPU time total: 2.613ms", "Self CUDA time total: 28.000us",
       "Device ceilings (NVIDIA H200, device 0): memory 4.31 TB/s (measured: D2D copy of 256 MiB, median of 10)",
       "Peak TFLOP/s: float32 66.9, TF32 535.3, float16/bfloat16 1070.5, float64 66.9 (132 SMs x 1980 MHz x FLOPs/clock/SM for sm_90)"});
  // clang-format on
  CHECK(averages.table(options) == want);

  // The same GEMM in TF32: the ridge moves to 535.27 / 4.31 = 124.2 FLOPs per byte, so the
  // op is now memory-bound, its roof 29.65 x 4.31 TB/s = 127.8 TFLOP/s, reached to 15.0%.
  KeyAverages tf32(linear_rows(MathKind::TF32));
  tf32.set_device_ceilings(h200());
  CHECK(last_cells(tf32.table(options), "aten::addmm", 5) == "536.871 19.174 646.6 memory 15.0%");
  // In half precision the ridge is higher still: memory-bound at the same share.
  KeyAverages half(linear_rows(MathKind::Half));
  half.set_device_ceilings(h200());
  CHECK(last_cells(half.table(options), "aten::addmm", 4) == "19.174 646.6 memory 15.0%");
}

TEST_CASE("roofline: the bound on each side of the ridge, and the share of the roof") {
  // 100 TFLOP/s and 2 TB/s: the ridge is 50 FLOPs per byte. Every row runs 5 GFLOPs in
  // 100 us of Self CUDA (50 TFLOP/s achieved) and moves a different number of bytes:
  //   past_ridge   100 FLOPs per byte: compute, roof 100 TFLOP/s, 50%
  //   at_ridge     exactly 50: compute (the ridge itself counts as compute), 50%
  //   below_ridge  25: memory, roof 25 x 2 TB/s = 50 TFLOP/s, 100%
  //   just_below   a hair under 50: memory, roof just under 100 TFLOP/s, 50%
  //   no_bytes     moves nothing: compute, 50%
  auto op = [](std::string name, double bytes) {
    EventAverage r = row(std::move(name), EventKind::CpuOp, 1000, 1000, 100000, 100000);
    r.flops = 5e9;
    r.bytes = bytes;
    r.math = MathKind::Float32;
    return r;
  };
  KeyAverages averages({
      op("past_ridge", 5e7),
      op("at_ridge", 1e8),
      op("below_ridge", 2e8),
      op("just_below", 1e8 + 1e3),
      op("no_bytes", 0),
      row("kernel", EventKind::Kernel, 0, 0, 400000, 400000),
  });
  averages.set_device_ceilings(round_ceilings());
  TableOptions options;
  options.with_flops = true;
  const std::string t = averages.table(options);
  CHECK(last_cells(t, "past_ridge", 4) == "50.000 500.0 compute 50.0%");
  CHECK(last_cells(t, "at_ridge", 4) == "50.000 1000.0 compute 50.0%");
  CHECK(last_cells(t, "below_ridge", 4) == "50.000 2000.0 memory 100.0%");
  CHECK(last_cells(t, "just_below", 4) == "50.000 1000.0 memory 50.0%");
  CHECK(last_cells(t, "no_bytes", 4) == "50.000 0.0 compute 50.0%");
  CHECK(last_cells(t, "kernel", 5) == "-- -- -- -- --");

  // Totals sum over calls: twice the FLOPs and bytes in twice the time is the same rate. A
  // faster kernel is a larger share, not capped at 100% (200 TFLOP/s on a 100 TFLOP/s roof).
  EventAverage twice = op("twice", 2e8);
  twice.count = 2;
  twice.flops *= 2;
  twice.bytes *= 2;
  twice.self_cuda_time_total_ns *= 2;
  EventAverage fast = op("fast", 5e7);
  fast.self_cuda_time_total_ns = 25000;
  KeyAverages more({twice, fast});
  more.set_device_ceilings(round_ceilings());
  const std::string m = more.table(options);
  CHECK(last_cells(m, "twice", 4) == "50.000 2000.0 memory 100.0%");
  CHECK(last_cells(m, "fast", 4) == "200.000 2000.0 compute 200.0%");
}

TEST_CASE("roofline: empty cells, unknown ceilings, and tables that stay as they were") {
  // gelu on 64 x 1024 float32 in 2 us; cpu_add has FLOPs but no device time; copy_ moves
  // bytes but has no FLOPs; int_add has FLOPs but no floating arithmetic.
  EventAverage gelu = row("gelu", EventKind::CpuOp, 5000, 5000, 2000, 2000);
  gelu.flops = 64 * 1024;
  gelu.bytes = 2 * 4 * 64 * 1024;
  gelu.math = MathKind::Float32;
  EventAverage host_only = row("cpu_add", EventKind::CpuOp, 3000, 3000, 0, 0);
  host_only.flops = 1e6;
  host_only.bytes = 1.2e7;
  host_only.math = MathKind::Float32;
  EventAverage copy = row("copy_", EventKind::CpuOp, 1000, 1000, 4000, 4000);
  copy.bytes = 1e6;
  EventAverage integer = row("int_add", EventKind::CpuOp, 1000, 1000, 1000, 1000);
  integer.flops = 1e6;
  integer.bytes = 1.2e7;
  const std::vector<EventAverage> rows = {gelu, host_only, copy, integer,
                                          row("elementwise_kernel", EventKind::Kernel, 0, 0, 7000, 7000)};
  KeyAverages with(rows);
  with.set_device_ceilings(h200());
  TableOptions options;
  options.with_flops = true;
  const std::string t = with.table(options);
  // gelu: 65536 FLOPs / 2 us = 0.033 TFLOP/s, 524288 bytes / 2 us = 262.1 GB/s; 0.125 FLOPs
  // per byte: memory-bound, roof 0.125 x 4.31 TB/s = 0.539 TFLOP/s, reached to 6.1%.
  CHECK(last_cells(t, "gelu", 4) == "0.033 262.1 memory 6.1%");
  CHECK(last_cells(t, "cpu_add", 4) == "-- -- -- --");
  CHECK(last_cells(t, "copy_", 5) == "-- -- -- -- --");
  // No arithmetic, no peak to compare against: rates, but no bound.
  CHECK(last_cells(t, "int_add", 4) == "1.000 12000.0 -- --");
  CHECK(t.find("Device ceilings (NVIDIA H200, device 0)") != std::string::npos);

  // An arithmetic the device has no known peak for, or an unknown bandwidth: no bound.
  DeviceCeilings partial = h200();
  partial.tf32_flops_per_s = 0;
  EventAverage tf32 = gelu;
  tf32.math = MathKind::TF32;
  KeyAverages unknown_peak({tf32});
  unknown_peak.set_device_ceilings(partial);
  CHECK(last_cells(unknown_peak.table(options), "gelu", 4) == "0.033 262.1 -- --");
  partial = h200();
  partial.memory_bytes_per_s = 0;
  KeyAverages unknown_memory({gelu});
  unknown_memory.set_device_ceilings(partial);
  CHECK(last_cells(unknown_memory.table(options), "gelu", 4) == "0.033 262.1 -- --");

  // Without ceilings the table is PyTorch's: Total FLOPs last, no footer line.
  const KeyAverages without(rows);
  const std::string plain = without.table(options);
  CHECK(plain.find("TFLOP/s") == std::string::npos);
  CHECK(plain.find("Bound") == std::string::npos);
  CHECK(plain.find("Device ceilings") == std::string::npos);
  CHECK(plain.find("Total KFLOPs  \n") != std::string::npos);
  CHECK(last_cells(plain, "gelu", 2) == "1 65.536");
  // With them, the four columns follow Total FLOPs.
  CHECK(t.find("Total KFLOPs       TFLOP/s          GB/s         Bound        Roof %  \n") != std::string::npos);
  // Ceilings set but with_flops off, or no device time at all: exactly the table without them.
  CHECK(with.table() == without.table());
  KeyAverages host(std::vector<EventAverage>{host_only}), host_ceilings(std::vector<EventAverage>{host_only});
  host_ceilings.set_device_ceilings(h200());
  CHECK(host_ceilings.table(options) == host.table(options));
  CHECK(host_ceilings.table(options).find("Total MFLOPs") != std::string::npos);
  // set_with_flops (a profile recorded with with_flops) shows them as the option does, and
  // clearing the ceilings takes them away again.
  with.set_with_flops(true);
  CHECK(with.table() == t);
  with.set_device_ceilings(std::nullopt);
  CHECK(with.table() == plain);
}

TEST_CASE("device ceilings: the peak per arithmetic, and the footer") {
  const DeviceCeilings c = h200();
  CHECK(c.flops_per_s(MathKind::Float32) == doctest::Approx(66.90816e12));
  CHECK(c.flops_per_s(MathKind::TF32) == doctest::Approx(535.26528e12));
  CHECK(c.flops_per_s(MathKind::Half) == doctest::Approx(1070.53056e12));
  CHECK(c.flops_per_s(MathKind::Float64) == doctest::Approx(66.90816e12));
  CHECK(c.flops_per_s(MathKind::None) == 0);
  CHECK(describe(c) ==
        "Device ceilings (NVIDIA H200, device 0): memory 4.31 TB/s (measured: D2D copy of 256 MiB, median of 10)\n"
        "Peak TFLOP/s: float32 66.9, TF32 535.3, float16/bfloat16 1070.5, float64 66.9 (132 SMs x 1980 MHz x "
        "FLOPs/clock/SM for sm_90)");
  // Unknown rates are left out of the footer; nothing known at all says so.
  DeviceCeilings fallback;
  fallback.device = 1;
  fallback.device_name = "Some GPU";
  fallback.memory_bytes_per_s = 1.5e12;
  fallback.memory_source = "theoretical: 2 x 1500 MHz x 4096-bit bus; the D2D copy could not run";
  fallback.float32_flops_per_s = 40e12;
  fallback.flops_source = "assumed";
  CHECK(describe(fallback) ==
        "Device ceilings (Some GPU, device 1): memory 1.50 TB/s (theoretical: 2 x 1500 MHz x 4096-bit bus; the D2D "
        "copy could not run)\nPeak TFLOP/s: float32 40.0 (assumed)");
  CHECK(describe(DeviceCeilings{}) == "Device ceilings (, device 0): memory unknown ()\nPeak TFLOP/s: unknown ()");
#ifndef KILN_WITH_CUDA
  // CPU-only builds have no ceilings.
  CHECK_FALSE(device_ceilings(0).has_value());
#endif
}
