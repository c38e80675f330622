// What the reports say about expandable segments, on an allocator in a known state: a hole
// whose pages moved away (address space only), two blocks in use, and the free half of a page
// that also holds one of them (non-releasable). memory_summary's expandable line and verdict,
// snapshot_to_json's fields and the SVG map's pieces, legend and labels.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "allocator/memory_report.h"
#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + needle.size())) ++n;
  return n;
}

/// The known state: [0, 4) MiB unmapped hole, a2 = [4, 7) MiB, z = [7, 13) MiB, pages 2-6
/// mapped (page 6 half free), the rest of the 72 MiB range free and unmapped.
struct KnownState {
  TestAllocator a;
  void* a2 = nullptr;
  void* z = nullptr;
  uintptr_t base = 0;
  KnownState() : a(64 * kMiB, config()) {
    void* a1 = a->allocate(4 * kMiB);
    a2 = a->allocate(3 * kMiB);
    a->free(a1);
    a.source->complete_all_events();  // the work that used a1 has run
    z = a->allocate(6 * kMiB);        // pages 0-1 move under it
    base = reinterpret_cast<uintptr_t>(a1);
  }
  ~KnownState() {
    a->free(a2);
    a->free(z);
  }
  static AllocatorConfig config() {
    AllocatorConfig c;
    c.expandable_segments = true;
    return c;
  }
};

}  // namespace

TEST_CASE("expandable: memory_summary has a line on the segments, and the verdict counts only mapped free bytes") {
  KnownState k;
  const MemorySnapshot snap = k.a->snapshot();
  CHECK(snap.stats.reserved_bytes[StatPool::All].current == i64(10 * kMiB));
  CHECK(snap.stats.inactive_split_bytes[StatPool::All].current == i64(1 * kMiB));
  CHECK(expandable_summary(snap) ==
        "Expandable segments: 1 (1 large pool, 0 small pool), 10.0 MiB mapped in 5 pages of 2.0 MiB, 72.0 MiB of "
        "address space; 7 pages mapped and 2 unmapped so far, 0 waits for the GPU before unmapping.");
  CHECK(fragmentation_verdict(snap) ==
        "Fragmentation: moderate \u2014 1.0 MiB of 10.0 MiB reserved (10.0%) is non-releasable (free bytes on pages "
        "that hold live blocks, and free pieces of split segments); largest free block 1.0 MiB of 1.0 MiB free "
        "(100.0%).");
  const std::string summary = format_memory_summary(snap);
  CHECK(summary.find("| CPU reserved memory   |  10240 KiB |  10240 KiB |") != std::string::npos);
  const size_t table_end = summary.rfind("|\n");
  const size_t line = summary.find(expandable_summary(snap));
  const size_t verdict = summary.find(fragmentation_verdict(snap));
  CHECK(line != std::string::npos);
  CHECK(line > table_end);
  CHECK(verdict > line);

  // Classic segments only: no such line.
  TestAllocator classic;
  void* p = classic->allocate(3 * kMiB);
  CHECK(expandable_summary(classic->snapshot()).empty());
  CHECK(format_memory_summary(classic->snapshot()).find("Expandable") == std::string::npos);
  classic->free(p);
}

TEST_CASE("expandable: snapshot_to_json carries the page size, mapped bytes and mapped ranges") {
  KnownState k;
  const nlohmann::json doc = nlohmann::json::parse(snapshot_to_json(k.a->snapshot()));
  REQUIRE(doc.at("segments").size() == 1);
  const auto& seg = doc.at("segments")[0];
  CHECK(seg.at("is_expandable").get<bool>());
  CHECK(seg.at("address").get<uint64_t>() == k.base);
  CHECK(seg.at("total_size").get<uint64_t>() == 72 * kMiB);
  CHECK(seg.at("page_size").get<uint64_t>() == 2 * kMiB);
  CHECK(seg.at("mapped_size").get<uint64_t>() == 10 * kMiB);
  REQUIRE(seg.at("mapped_ranges").size() == 1);
  CHECK(seg.at("mapped_ranges")[0].at("address").get<uint64_t>() == k.base + 4 * kMiB);
  CHECK(seg.at("mapped_ranges")[0].at("size").get<uint64_t>() == 10 * kMiB);
  REQUIRE(seg.at("blocks").size() == 4);
  CHECK(seg.at("blocks")[0].at("state") == "inactive");
  CHECK(seg.at("blocks")[1].at("state") == "active");
  CHECK(doc.at("stats").at("num_map_calls").get<int64_t>() == 7);
  CHECK(doc.at("stats").at("num_unmap_calls").get<int64_t>() == 2);
}

TEST_CASE("expandable: the SVG map draws mapped, non-releasable and unmapped pieces up to the last page in use") {
  KnownState k;
  const MemorySnapshot snap = k.a->snapshot();
  const std::string svg = memory_map_svg(snap);
  CHECK(count(svg, "class=\"segment\"") == 1);
  CHECK(svg.find(fmt::format("{:#x}  10.0 MiB mapped, expandable", k.base)) != std::string::npos);
  CHECK(svg.find("large pool, default stream, 4 blocks; first 14.0 MiB of 72.0 MiB address space shown") !=
        std::string::npos);
  // The legend has the two expandable paints, and the bars start under its third line.
  CHECK(svg.find("expandable: free on mapped pages with nothing live (unmapped by empty_cache)") != std::string::npos);
  CHECK(svg.find("expandable: address space with no page mapped (no memory)") != std::string::npos);
  CHECK(svg.find("non-releasable: free piece of a split segment, or free on a page in use") != std::string::npos);
  CHECK(svg.find("y=\"136.0\"") != std::string::npos);
  // Pieces: the unmapped hole, the two blocks in use, the free half of page 6.
  CHECK(count(svg, "<title>") == 4);
  CHECK(count(svg, "fill=\"#f4f4f4\"><title>") == 1);
  CHECK(count(svg, "fill=\"#4e79a7\"><title>") == 2);
  CHECK(count(svg, "fill=\"#e15759\"><title>") == 1);
  CHECK(svg.find(fmt::format("{:#x}: 4.0 MiB expandable: address space with no page mapped (no memory)", k.base)) !=
        std::string::npos);
  CHECK(svg.find(fmt::format("{:#x}: 1.0 MiB free on a mapped page that holds live bytes (non-releasable)",
                             k.base + 13 * kMiB)) != std::string::npos);

  // Freed and emptied: cached pages are drawn as such before empty_cache unmaps them.
  k.a->free(k.z);
  const std::string cached = memory_map_svg(k.a->snapshot());
  CHECK(count(cached, "fill=\"#9dc7a2\"><title>") == 1);  // [8, 14) MiB: pages 4-6 hold nothing live
  k.z = k.a->allocate(6 * kMiB);
}
