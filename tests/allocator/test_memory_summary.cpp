// Golden tests for memory_summary(): the table must read exactly like PyTorch 2.11's
// torch.cuda.memory_summary(), so every expected string below is written out in full. They
// were produced by PyTorch's own formatting code (torch/cuda/memory.py) run on the same
// numbers, with only the title and the CPU labels changed as Kiln specifies.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "allocator/memory_report.h"

using namespace kiln;

namespace {

constexpr int64_t KiB = 1024, MiB = KiB * KiB, GiB = MiB * KiB, TiB = GiB * KiB, PiB = TiB * KiB;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

/// {current, peak, allocated, freed} of one pool.
using Row = std::array<int64_t, 4>;

/// Sets the all / large_pool / small_pool stats of `a`.
void set(StatArray& a, const std::array<Row, 3>& rows) {
  for (size_t p = 0; p < 3; ++p) a.pools[p] = Stat{rows[p][0], rows[p][1], rows[p][2], rows[p][3]};
}

/// The statistics behind PyTorch 2.11's printout in issue 3 (Allocated memory, Active memory
/// and Allocations rows as printed there); the other rows are filled with made-up values so
/// every cell of the table is determined.
MemorySnapshot golden_snapshot() {
  MemorySnapshot snap;
  snap.device = "cuda:0";
  MemoryStats& st = snap.stats;
  set(st.allocated_bytes, {{{1511 * MiB + 786432, 2143 * MiB + 1000, 2133 * GiB + 76 * MiB, 2131 * GiB + 300 * MiB},
                            {1488 * MiB + 524288, 2128 * MiB, 2127 * GiB + 600 * MiB, 2126 * GiB + 100 * MiB},
                            {23 * MiB + 262144, 26 * MiB + 1000, 5 * GiB + 500 * MiB, 5 * GiB + 200 * MiB}}});
  set(st.active_bytes, {{{1511 * MiB + 786432, 2143 * MiB + 1000, 2133 * GiB + 76 * MiB, 2131 * GiB + 300 * MiB},
                         {1488 * MiB + 524288, 2128 * MiB, 2127 * GiB + 600 * MiB, 2126 * GiB + 100 * MiB},
                         {23 * MiB + 262144, 26 * MiB + 1000, 5 * GiB + 500 * MiB, 5 * GiB + 200 * MiB}}});
  set(st.requested_bytes, {{{1498 * MiB + 12345, 2139 * MiB, 2120 * GiB, 2118 * GiB + 900 * MiB},
                            {1477 * MiB, 2125 * MiB + 7, 2115 * GiB + 3, 2114 * GiB},
                            {21 * MiB + 12345, 25 * MiB, 4 * GiB + 1000 * MiB, 4 * GiB + 900 * MiB}}});
  set(st.reserved_bytes, {{{2200 * MiB, 2560 * MiB, 9 * GiB + 100 * MiB, 6 * GiB + 1000 * MiB},
                           {2160 * MiB, 2520 * MiB, 8 * GiB + 900 * MiB, 6 * GiB + 800 * MiB},
                           {40 * MiB, 42 * MiB, 200 * MiB, 160 * MiB}}});
  set(st.inactive_split_bytes, {{{150 * MiB + 4096, 420 * MiB, 1500 * GiB, 1499 * GiB + 1000 * MiB},
                                 {140 * MiB, 400 * MiB + 1, 1400 * GiB, 1399 * GiB + 900 * MiB},
                                 {10 * MiB + 4096, 20 * MiB, 100 * GiB, 99 * GiB + 1000 * MiB}}});
  set(st.allocation, {{{162, 162, 63600, 63438},
                       {109, 109, 33065, 32956},
                       {53, 59, 30535, 30482}}});
  set(st.active, {{{165, 170, 63610, 63445},
                   {110, 112, 33070, 32960},
                   {55, 60, 30540, 30485}}});
  set(st.segment, {{{130, 140, 1210, 1080},
                    {110, 118, 1100, 990},
                    {20, 22, 110, 90}}});
  set(st.inactive_split, {{{37, 52, 41000, 40963},
                           {25, 40, 30000, 29975},
                           {12, 14, 11000, 10988}}});
  return snap;
}

/// The `n` lines of `summary` starting at the row named `name`.
std::string rows(const std::string& summary, const std::string& name, int n = 3) {
  std::istringstream in(summary);
  std::string line, out;
  int taken = 0;
  while (std::getline(in, line)) {
    if (taken == 0 && line.rfind("| " + name, 0) != 0) continue;
    out += (taken ? "\n" : "") + line;
    if (++taken == n) break;
  }
  return out;
}

/// A CUDA snapshot whose only non-zero statistics are `a`'s member `m`.
MemorySnapshot with(StatArray MemoryStats::*m, const std::array<Row, 3>& rows_of_a) {
  MemorySnapshot snap;
  snap.device = "cuda:0";
  set(snap.stats.*m, rows_of_a);
  return snap;
}

const char* kGoldenVerdict =
    "Fragmentation: low \u2014 150.0 MiB of 2.1 GiB reserved (6.8%) is non-releasable (free pieces of split "
    "segments); no free blocks are cached.\n";

}  // namespace

TEST_CASE("memory_summary reproduces PyTorch's full table") {
  const std::string expected = R"(|===========================================================================|
|                   Kiln CUDA memory summary, device ID 0                   |
|---------------------------------------------------------------------------|
|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |
|===========================================================================|
|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
|---------------------------------------------------------------------------|
| Allocated memory      |   1511 MiB |   2143 MiB |   2133 GiB |   2131 GiB |
|       from large pool |   1488 MiB |   2128 MiB |   2127 GiB |   2126 GiB |
|       from small pool |     23 MiB |     26 MiB |      5 GiB |      5 GiB |
|---------------------------------------------------------------------------|
| Active memory         |   1511 MiB |   2143 MiB |   2133 GiB |   2131 GiB |
|       from large pool |   1488 MiB |   2128 MiB |   2127 GiB |   2126 GiB |
|       from small pool |     23 MiB |     26 MiB |      5 GiB |      5 GiB |
|---------------------------------------------------------------------------|
| Requested memory      |   1498 MiB |   2139 MiB |   2120 GiB |   2118 GiB |
|       from large pool |   1477 MiB |   2125 MiB |   2115 GiB |   2114 GiB |
|       from small pool |     21 MiB |     25 MiB |      4 GiB |      4 GiB |
|---------------------------------------------------------------------------|
| GPU reserved memory   |   2200 MiB |   2560 MiB |   9316 MiB |   7144 MiB |
|       from large pool |   2160 MiB |   2520 MiB |   9092 MiB |   6944 MiB |
|       from small pool |     40 MiB |     42 MiB |    200 MiB |    160 MiB |
|---------------------------------------------------------------------------|
| Non-releasable memory | 153604 KiB | 430080 KiB |   1500 GiB |   1499 GiB |
|       from large pool | 143360 KiB | 409600 KiB |   1400 GiB |   1399 GiB |
|       from small pool |  10244 KiB |  20480 KiB |    100 GiB |     99 GiB |
|---------------------------------------------------------------------------|
| Allocations           |     162    |     162    |   63600    |   63438    |
|       from large pool |     109    |     109    |   33065    |   32956    |
|       from small pool |      53    |      59    |   30535    |   30482    |
|---------------------------------------------------------------------------|
| Active allocs         |     165    |     170    |   63610    |   63445    |
|       from large pool |     110    |     112    |   33070    |   32960    |
|       from small pool |      55    |      60    |   30540    |   30485    |
|---------------------------------------------------------------------------|
| GPU reserved segments |     130    |     140    |    1210    |    1080    |
|       from large pool |     110    |     118    |    1100    |     990    |
|       from small pool |      20    |      22    |     110    |      90    |
|---------------------------------------------------------------------------|
| Non-releasable allocs |      37    |      52    |   41000    |   40963    |
|       from large pool |      25    |      40    |   30000    |   29975    |
|       from small pool |      12    |      14    |   11000    |   10988    |
|---------------------------------------------------------------------------|
| Oversize allocations  |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| Oversize GPU segments |       0    |       0    |       0    |       0    |
|===========================================================================|
)";
  CHECK(format_memory_summary(golden_snapshot()) == expected + kGoldenVerdict);
  CHECK(format_memory_summary(golden_snapshot(), false) == expected + kGoldenVerdict);
}

TEST_CASE("memory_summary abbreviated drops the per-pool rows") {
  const std::string expected = R"(|===========================================================================|
|                   Kiln CUDA memory summary, device ID 0                   |
|---------------------------------------------------------------------------|
|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |
|===========================================================================|
|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
|---------------------------------------------------------------------------|
| Allocated memory      |   1511 MiB |   2143 MiB |   2133 GiB |   2131 GiB |
|---------------------------------------------------------------------------|
| Active memory         |   1511 MiB |   2143 MiB |   2133 GiB |   2131 GiB |
|---------------------------------------------------------------------------|
| Requested memory      |   1498 MiB |   2139 MiB |   2120 GiB |   2118 GiB |
|---------------------------------------------------------------------------|
| GPU reserved memory   |   2200 MiB |   2560 MiB |   9316 MiB |   7144 MiB |
|---------------------------------------------------------------------------|
| Non-releasable memory | 153604 KiB | 430080 KiB |   1500 GiB |   1499 GiB |
|---------------------------------------------------------------------------|
| Allocations           |     162    |     162    |   63600    |   63438    |
|---------------------------------------------------------------------------|
| Active allocs         |     165    |     170    |   63610    |   63445    |
|---------------------------------------------------------------------------|
| GPU reserved segments |     130    |     140    |    1210    |    1080    |
|---------------------------------------------------------------------------|
| Non-releasable allocs |      37    |      52    |   41000    |   40963    |
|---------------------------------------------------------------------------|
| Oversize allocations  |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| Oversize GPU segments |       0    |       0    |       0    |       0    |
|===========================================================================|
)";
  CHECK(format_memory_summary(golden_snapshot(), true) == expected + kGoldenVerdict);
}

TEST_CASE("memory_summary lines are 77 columns and boxed") {
  std::istringstream in(format_memory_summary(golden_snapshot()));
  std::string line;
  int table_lines = 0;
  while (std::getline(in, line) && line.rfind("Fragmentation:", 0) != 0) {
    CHECK(line.size() == 77);
    CHECK(line.front() == '|');
    CHECK(line.back() == '|');
    ++table_lines;
  }
  CHECK(table_lines == 47);
}

TEST_CASE("size units: the all row picks the unit of each column at 768 units") {
  // B -> KiB at 768 KiB; KiB -> MiB at 768 MiB; the pool rows follow the all row's unit.
  CHECK(rows(format_memory_summary(with(&MemoryStats::allocated_bytes,
                                        {{{786431, 786432, 805306367, 805306368},
                                          {786000, 786432, 805306367 - 5 * KiB, 805306367},
                                          {431, 1023, 1048575, 1}}})),
             "Allocated memory") ==
        "| Allocated memory      | 786431 B   |    768 KiB | 786431 KiB |    768 MiB |\n"
        "|       from large pool | 786000 B   |    768 KiB | 786426 KiB |    767 MiB |\n"
        "|       from small pool |    431 B   |      0 KiB |   1023 KiB |      0 MiB |");
  // MiB -> GiB -> TiB -> PiB, and PiB is the last unit (int64's maximum is 8191 PiB).
  CHECK(rows(format_memory_summary(with(&MemoryStats::allocated_bytes,
                                        {{{768 * GiB - 1, 768 * GiB, 768 * TiB, 768 * PiB},
                                          {700 * GiB, 1 * GiB, 768 * TiB - 1, kInt64Max},
                                          {68 * GiB - 1, 768 * GiB - 1, 1, 5 * PiB - 1}}})),
             "Allocated memory") ==
        "| Allocated memory      | 786431 MiB |    768 GiB |    768 TiB |    768 PiB |\n"
        "|       from large pool | 716800 MiB |      1 GiB |    767 TiB |   8191 PiB |\n"
        "|       from small pool |  69631 MiB |    767 GiB |      0 TiB |      4 PiB |");
  // Below 768 of a unit the column stays one unit down: 700 KiB prints in bytes, 700 MiB in
  // KiB; zero prints in bytes.
  CHECK(rows(format_memory_summary(
                 with(&MemoryStats::allocated_bytes, {{{700 * KiB, 700 * MiB, kInt64Max, 0}, {}, {}}})),
             "Allocated memory") ==
        "| Allocated memory      | 716800 B   | 716800 KiB |   8191 PiB |      0 B   |\n"
        "|       from large pool |      0 B   |      0 KiB |      0 PiB |      0 B   |\n"
        "|       from small pool |      0 B   |      0 KiB |      0 PiB |      0 B   |");
  // Every byte row formats the same way (here the reserved row, under its GPU name).
  CHECK(rows(format_memory_summary(
                 with(&MemoryStats::reserved_bytes, {{{768 * KiB, 768 * KiB - 1, 0, 0}, {}, {}}})),
             "GPU reserved memory", 1) ==
        "| GPU reserved memory   |    768 KiB | 786431 B   |      0 B   |      0 B   |");
}

TEST_CASE("count units: K and M from 750,000 of the all row") {
  CHECK(rows(format_memory_summary(with(&MemoryStats::allocation,
                                        {{{749999, 750000, 749999999, 750000000},
                                          {700000, 749999, 1000, 749999999},
                                          {49999, 1, 999, 0}}})),
             "Allocations") ==
        "| Allocations           |  749999    |     750 K  |  749999 K  |     750 M  |\n"
        "|       from large pool |  700000    |     749 K  |       1 K  |     749 M  |\n"
        "|       from small pool |   49999    |       0 K  |       0 K  |       0 M  |");
}

TEST_CASE("very large counts widen the row as PyTorch's does") {
  // M is the last suffix: beyond 9,999,999 M the number overflows its 7 columns.
  const std::string got = rows(format_memory_summary(with(&MemoryStats::active,
                                                          {{{10'000'000'000'000, kInt64Max, 999'999'999'999,
                                                             123'456'789},
                                                            {},
                                                            {}}})),
                               "Active allocs");
  CHECK(got ==
        "| Active allocs         | 10000000 M  | 9223372036854 M  |  999999 M  |  123456 K  |\n"
        "|       from large pool |       0 M  |       0 M  |       0 M  |       0 K  |\n"
        "|       from small pool |       0 M  |       0 M  |       0 M  |       0 K  |");
}

TEST_CASE("oversize rows format against themselves") {
  MemorySnapshot snap;
  snap.device = "cuda:0";
  snap.stats.oversize_allocations = Stat{3, 800'000, 1'000'000'000, 999'999'997};
  snap.stats.oversize_segments = Stat{2, 5, 7, 5};
  const std::string s = format_memory_summary(snap);
  CHECK(rows(s, "Oversize allocations", 1) ==
        "| Oversize allocations  |       3    |     800 K  |    1000 M  |     999 M  |");
  CHECK(rows(s, "Oversize GPU segments", 1) ==
        "| Oversize GPU segments |       2    |       5    |       7    |       5    |");
}

TEST_CASE("the CUDA title centres the device index") {
  MemorySnapshot snap;
  snap.device = "cuda:10";
  snap.stats.num_ooms = 4;
  snap.stats.num_alloc_retries = 123456789;
  const std::string s = format_memory_summary(snap);
  CHECK(s.rfind("|===========================================================================|\n"
                "|                   Kiln CUDA memory summary, device ID 10                  |\n"
                "|---------------------------------------------------------------------------|\n"
                "|            CUDA OOMs: 4            |        cudaMalloc retries: 123456789  |\n",
                0) == 0);
}

TEST_CASE("a CPU snapshot says CPU where PyTorch says GPU or CUDA") {
  MemorySnapshot snap;
  snap.device = "cpu";
  MemoryStats& st = snap.stats;
  set(st.allocated_bytes, {{{3 * MiB, 5 * MiB, 40 * MiB, 37 * MiB},
                            {2 * MiB, 4 * MiB, 30 * MiB, 28 * MiB},
                            {MiB, MiB, 10 * MiB, 9 * MiB}}});
  set(st.reserved_bytes, {{{20 * MiB, 22 * MiB, 22 * MiB, 2 * MiB},
                           {20 * MiB, 20 * MiB, 20 * MiB, 0},
                           {0, 2 * MiB, 2 * MiB, 2 * MiB}}});
  set(st.segment, {{{1, 2, 2, 1}, {1, 1, 1, 0}, {0, 1, 1, 1}}});
  st.oversize_segments = Stat{1, 1, 1, 0};
  st.num_ooms = 3;
  st.num_alloc_retries = 12;
  const std::string verdict =
      "Fragmentation: low \u2014 0 B of 20.0 MiB reserved (0.0%) is non-releasable (free pieces of split "
      "segments); no free blocks are cached.\n";
  const std::string expected = R"(|===========================================================================|
|                          Kiln CPU memory summary                          |
|---------------------------------------------------------------------------|
|             CPU OOMs: 3            |            malloc retries: 12        |
|===========================================================================|
|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
|---------------------------------------------------------------------------|
| Allocated memory      |   3072 KiB |   5120 KiB |  40960 KiB |  37888 KiB |
|---------------------------------------------------------------------------|
| Active memory         |      0 B   |      0 B   |      0 B   |      0 B   |
|---------------------------------------------------------------------------|
| Requested memory      |      0 B   |      0 B   |      0 B   |      0 B   |
|---------------------------------------------------------------------------|
| CPU reserved memory   |  20480 KiB |  22528 KiB |  22528 KiB |   2048 KiB |
|---------------------------------------------------------------------------|
| Non-releasable memory |      0 B   |      0 B   |      0 B   |      0 B   |
|---------------------------------------------------------------------------|
| Allocations           |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| Active allocs         |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| CPU reserved segments |       1    |       2    |       2    |       1    |
|---------------------------------------------------------------------------|
| Non-releasable allocs |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| Oversize allocations  |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| Oversize CPU segments |       1    |       1    |       1    |       0    |
|===========================================================================|
)";
  CHECK(format_memory_summary(snap, true) == expected + verdict);

  const std::string full = format_memory_summary(snap);
  CHECK(rows(full, "CPU reserved memory") ==
        "| CPU reserved memory   |  20480 KiB |  22528 KiB |  22528 KiB |   2048 KiB |\n"
        "|       from large pool |  20480 KiB |  20480 KiB |  20480 KiB |      0 KiB |\n"
        "|       from small pool |      0 KiB |   2048 KiB |   2048 KiB |   2048 KiB |");
  CHECK(rows(full, "CPU reserved segments") ==
        "| CPU reserved segments |       1    |       2    |       2    |       1    |\n"
        "|       from large pool |       1    |       1    |       1    |       0    |\n"
        "|       from small pool |       0    |       1    |       1    |       1    |");
  CHECK(rows(full, "Oversize CPU segments", 1) ==
        "| Oversize CPU segments |       1    |       1    |       1    |       0    |");
  CHECK(full.find("GPU") == std::string::npos);
  CHECK(full.find("CUDA") == std::string::npos);
  CHECK(full.find("cudaMalloc") == std::string::npos);
}
