// The table's layout and number formats against torch.profiler's own output: PyTorch 2.11
// profiling nn.Linear(1024, 4096) on a [64, 1024] input on an H200 (the sample).
// The rows are given as PyTorch summed them (its addmm row counts the kernel twice), so
// this checks the formatting alone; test_key_averages.cpp checks Kiln's sums.
#include "profiler/key_averages.h"
#include "synthetic.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::profiler;
using kiln::profiler::testing::row;

namespace {

// PyTorch ends every line, separators included, with the two spaces after the last column.
std::string lines(std::initializer_list<const char*> ls, std::initializer_list<const char*> footers) {
  std::string out;
  for (const char* l : ls) out += std::string(l) + "  \n";
  for (const char* l : footers) out += std::string(l) + "\n";
  return out;
}

}  // namespace

TEST_CASE("table: PyTorch's layout for nn.Linear, character for character") {
  const KeyAverages averages({
      row("linear_forward", EventKind::UserScope, 198084, 2591300, 0, 56000),
      row("aten::linear", EventKind::CpuOp, 24066, 2393200, 0, 56000),
      row("aten::addmm", EventKind::CpuOp, 223989, 2304100, 28000, 56000),
      row("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel",
          EventKind::Kernel, 0, 0, 28000, 28000),
      // The rest of the profile's host time, below the row limit.
      row("cudaLaunchKernel", EventKind::CpuOp, 2613000 - 198084 - 24066 - 223989, 2613000 - 198084 - 24066 - 223989, 0, 0),
  });
  TableOptions options;
  options.sort_by = "cuda_time_total";
  options.row_limit = 4;
  const std::string want = lines(
      {"-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------",
       "                                                   Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg     Self CUDA   Self CUDA %    CUDA total  CUDA time avg    # of Calls",
       "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------",
       "                                         linear_forward         7.58%     198.084us        99.17%       2.591ms       2.591ms       0.000us         0.00%      56.000us      56.000us             1",
       "                                           aten::linear         0.92%      24.066us        91.59%       2.393ms       2.393ms       0.000us         0.00%      56.000us      56.000us             1",
       "                                            aten::addmm         8.57%     223.989us        88.18%       2.304ms       2.304ms      28.000us       100.00%      56.000us      56.000us             1",
       "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x...         0.00%       0.000us         0.00%       0.000us       0.000us      28.000us       100.00%      28.000us      28.000us             1",
       "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------"},
      {"Self CPU time total: 2.613ms", "Self CUDA time total: 28.000us"});
  CHECK(averages.table(options) == want);
}

TEST_CASE("table: number formats, narrow names, CPU-only columns, memory and shapes") {
  CHECK(format_time(999.0) == "0.999us");
  CHECK(format_time(999999.0) == "999.999us");
  CHECK(format_time(1e6) == "1.000ms");
  CHECK(format_time(2.5e9) == "2.500s");
  CHECK(format_time_share(1.0, 3.0) == "33.33%");
  CHECK(format_time_share(0.0, 0.0) == "NaN");
  CHECK(format_memory(512) == "512 b");
  CHECK(format_memory(-1536) == "-1.50 Kb");
  CHECK(format_memory(3 << 20) == "3.00 Mb");
  CHECK(format_memory(int64_t{5} << 30) == "5.00 Gb");
  CHECK(format_shapes({{64, 1024}, {}, {4096}}) == "[[64, 1024], [], [4096]]");

  // No device time: the CUDA columns and footer disappear; the Name column is the longest
  // name plus 4; a name of 52 characters or more is cut.
  EventAverage a = row("mul", EventKind::CpuOp, 3000, 3000, 0, 0);
  a.count = 3;
  a.cpu_memory_usage = 2048;
  a.self_cpu_memory_usage = 1024;
  a.input_shapes = "[[2, 3], [2, 3]]";
  const KeyAverages cpu_only({a, row("softmax", EventKind::CpuOp, 1000, 1000, 0, 0)});
  TableOptions options;
  options.profile_memory = true;
  const std::string t = cpu_only.table(options);
  const std::string want = lines(
      {"-----------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  --------------------",
       "       Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg       CPU Mem  Self CPU Mem    # of Calls          Input Shapes",
       "-----------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  --------------------",
       "        mul        75.00%       3.000us        75.00%       3.000us       1.000us       2.00 Kb       1.00 Kb             3      [[2, 3], [2, 3]]",
       "    softmax        25.00%       1.000us        25.00%       1.000us       1.000us           0 b           0 b             1                      ",
       "-----------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  --------------------"},
      {"Self CPU time total: 4.000us"});
  CHECK(t == want);

  // sort_by orders largest first; row_limit cuts; a name at the limit gets "...".
  options = {};
  options.sort_by = "count";
  options.row_limit = 1;
  CHECK(cpu_only.table(options).find("softmax") == std::string::npos);
  options.sort_by = "self_cpu_time_total";
  CHECK(cpu_only.table(options).find("mul") < cpu_only.table(options).find("softmax"));
  options.sort_by = "bogus";
  CHECK_THROWS_WITH_AS(cpu_only.table(options), doctest::Contains("table: unknown sort_by \"bogus\""), Error);
  const std::string long_name(52, 'x');
  const std::string cut = KeyAverages({row(long_name, EventKind::CpuOp, 1, 1, 0, 0)}).table();
  CHECK(cut.find(fmt::format("{}...", long_name)) != std::string::npos);
  CHECK(KeyAverages().table().empty());

  // with_flops: PyTorch's column, in the unit of the smallest positive count.
  EventAverage mm = row("mm", EventKind::CpuOp, 10, 10, 0, 0), view = row("view", EventKind::CpuOp, 1, 1, 0, 0);
  mm.flops = 2.5e6;
  EventAverage big = row("addmm", EventKind::CpuOp, 10, 10, 0, 0);
  big.flops = 7.0e9;
  TableOptions flops;
  flops.with_flops = true;
  const std::string f = KeyAverages({mm, big, view}).table(flops);
  CHECK(f.find("Total MFLOPs") != std::string::npos);
  CHECK(f.find("       2.500  ") != std::string::npos);
  CHECK(f.find("    7000.000  ") != std::string::npos);
  CHECK(f.find("          --  ") != std::string::npos);
  CHECK(KeyAverages({view}).table(flops).find("FLOPs") == std::string::npos);  // nothing to show
}
