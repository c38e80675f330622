// The snapshot exports: the JSON document must carry every field of the snapshot with its
// value (parsed back here with nlohmann::json), and the SVG map must be a self-contained
// picture with one bar per segment, escaped text, a legend and a bounded size.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "allocator/memory_report.h"

using namespace kiln;

namespace {

constexpr uint64_t KiB = 1024, MiB = KiB * KiB;

/// Occurrences of `needle` in `hay`.
size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + needle.size())) ++n;
  return n;
}

/// Two segments (a split large one on a side stream in a private pool, a whole small one),
/// three history entries and a few statistics.
MemorySnapshot sample() {
  MemorySnapshot snap;
  snap.device = "cuda:1";
  SegmentInfo large;
  large.address = 0x7f3a00000000;
  large.total_size = 20 * MiB;
  large.allocated_size = 8 * MiB;
  large.active_size = 10 * MiB;
  large.requested_size = 8 * MiB - 1000;
  large.stream = 0x5555deadbeef;
  large.is_large = true;
  large.pool_id = 7;
  large.blocks = {{0x7f3a00000000, 8 * MiB, 8 * MiB - 1000, BlockState::Active},
                  {0x7f3a00800000, 2 * MiB, 0, BlockState::AwaitingFree},
                  {0x7f3a00a00000, 10 * MiB, 0, BlockState::Inactive}};
  SegmentInfo small;
  small.address = 0x7f3b00000000;
  small.total_size = 2 * MiB;
  small.blocks = {{0x7f3b00000000, 2 * MiB, 0, BlockState::Inactive}};
  snap.segments = {large, small};
  snap.history = {{TraceAction::SegmentAlloc, 0x7f3a00000000, 20 * MiB, 0x5555deadbeef, 100},
                  {TraceAction::Alloc, 0x7f3a00000000, 8 * MiB, 0x5555deadbeef, 105},
                  {TraceAction::Oom, 0, 80ull << 30, 0, 9000000000}};
  snap.stats.reserved_bytes[StatPool::All].current = 22 * MiB;
  snap.stats.reserved_bytes[StatPool::Large].current = 20 * MiB;
  snap.stats.allocated_bytes[StatPool::All].current = 8 * MiB;
  snap.stats.inactive_split_bytes[StatPool::All].current = 10 * MiB;
  snap.stats.num_ooms = 1;
  snap.stats.max_split_size = -1;
  return snap;
}

}  // namespace

TEST_CASE("snapshot_to_json carries every field and value") {
  const MemorySnapshot snap = sample();
  const std::string text = snapshot_to_json(snap);
  CHECK(text.rfind("{\n  \"", 0) == 0);  // dump(2): indented by two spaces
  const nlohmann::json doc = nlohmann::json::parse(text);
  CHECK(doc.at("device") == "cuda:1");

  const auto& segs = doc.at("segments");
  REQUIRE(segs.is_array());
  REQUIRE(segs.size() == 2);
  const auto& s0 = segs[0];
  CHECK(s0.at("address").get<uint64_t>() == 0x7f3a00000000);
  CHECK(s0.at("total_size").get<uint64_t>() == 20 * MiB);
  CHECK(s0.at("allocated_size").get<uint64_t>() == 8 * MiB);
  CHECK(s0.at("active_size").get<uint64_t>() == 10 * MiB);
  CHECK(s0.at("requested_size").get<uint64_t>() == 8 * MiB - 1000);
  CHECK(s0.at("stream").get<uint64_t>() == 0x5555deadbeef);
  CHECK(s0.at("is_large").is_boolean());
  CHECK(s0.at("is_large").get<bool>() == true);
  CHECK(s0.at("pool_id").get<uint64_t>() == 7);
  const auto& blocks = s0.at("blocks");
  REQUIRE(blocks.size() == 3);
  CHECK(blocks[0].at("address").get<uint64_t>() == 0x7f3a00000000);
  CHECK(blocks[0].at("size").get<uint64_t>() == 8 * MiB);
  CHECK(blocks[0].at("requested_size").get<uint64_t>() == 8 * MiB - 1000);
  CHECK(blocks[0].at("state") == "active");
  CHECK(blocks[1].at("address").get<uint64_t>() == 0x7f3a00800000);
  CHECK(blocks[1].at("state") == "awaiting_free");
  CHECK(blocks[2].at("size").get<uint64_t>() == 10 * MiB);
  CHECK(blocks[2].at("requested_size").get<uint64_t>() == 0);
  CHECK(blocks[2].at("state") == "inactive");
  for (const auto& b : blocks) CHECK(b.size() == 4);
  // A classic segment: not expandable, all of it mapped, no page size or ranges.
  CHECK(s0.at("is_expandable").get<bool>() == false);
  CHECK(s0.at("page_size").get<uint64_t>() == 0);
  CHECK(s0.at("mapped_size").get<uint64_t>() == 20 * MiB);
  CHECK(s0.at("mapped_ranges").is_array());
  CHECK(s0.at("mapped_ranges").empty());
  CHECK(s0.size() == 13);

  const auto& s1 = segs[1];
  CHECK(s1.at("address").get<uint64_t>() == 0x7f3b00000000);
  CHECK(s1.at("is_large").get<bool>() == false);
  CHECK(s1.at("stream").get<uint64_t>() == 0);
  CHECK(s1.at("pool_id").get<uint64_t>() == 0);
  REQUIRE(s1.at("blocks").size() == 1);
  CHECK(s1.at("blocks")[0].at("state") == "inactive");

  const auto& hist = doc.at("history");
  REQUIRE(hist.size() == 3);
  CHECK(hist[0].at("action") == "segment_alloc");
  CHECK(hist[0].at("address").get<uint64_t>() == 0x7f3a00000000);
  CHECK(hist[0].at("size").get<uint64_t>() == 20 * MiB);
  CHECK(hist[0].at("stream").get<uint64_t>() == 0x5555deadbeef);
  CHECK(hist[0].at("time_us").get<int64_t>() == 100);
  CHECK(hist[1].at("action") == "alloc");
  CHECK(hist[1].at("time_us").get<int64_t>() == 105);
  CHECK(hist[2].at("action") == "oom");
  CHECK(hist[2].at("size").get<uint64_t>() == 80ull << 30);
  CHECK(hist[2].at("time_us").get<int64_t>() == 9000000000);
  for (const auto& e : hist) CHECK(e.size() == 5);

  const auto& stats = doc.at("stats");
  CHECK(stats.size() == 125);
  for (const auto& [key, value] : stats_to_map(snap.stats)) {
    CAPTURE(key);
    CHECK(stats.at(key).get<int64_t>() == value);
  }
  CHECK(stats.at("reserved_bytes.all.current").get<int64_t>() == int64_t(22 * MiB));
  CHECK(stats.at("max_split_size").get<int64_t>() == -1);
  CHECK(doc.size() == 4);
}

TEST_CASE("snapshot_to_json of an empty snapshot has empty arrays") {
  MemorySnapshot snap;
  snap.device = "cpu";
  const nlohmann::json doc = nlohmann::json::parse(snapshot_to_json(snap));
  CHECK(doc.at("device") == "cpu");
  CHECK(doc.at("segments").is_array());
  CHECK(doc.at("segments").empty());
  CHECK(doc.at("history").is_array());
  CHECK(doc.at("history").empty());
  CHECK(doc.at("stats").at("num_ooms").get<int64_t>() == 0);
}

TEST_CASE("memory_map_svg is a self-contained picture with a bar per segment") {
  const MemorySnapshot snap = sample();
  const std::string svg = memory_map_svg(snap);
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.size() > 7);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(count(svg, "<svg") == 1);
  CHECK(count(svg, "</svg>") == 1);
  CHECK(count(svg, "class=\"segment\"") == 2);
  CHECK(count(svg, "<g") == count(svg, "</g>"));
  CHECK(count(svg, "<text") == count(svg, "</text>"));
  // Nothing external: no scripts, links, images, fonts or style imports.
  for (const char* banned : {"<script", "href", "<image", "url(", "@import", "<foreignObject", "<iframe"}) {
    CAPTURE(banned);
    CHECK(svg.find(banned) == std::string::npos);
  }
  CHECK(count(svg, "http") == 1);  // the SVG namespace, which names but does not fetch
  // Title, legend, verdict.
  CHECK(svg.find("Kiln memory map, cuda:1: reserved 22.0 MiB, allocated 8.0 MiB, non-releasable 10.0 MiB, "
                 "2 segments") != std::string::npos);
  CHECK(svg.find("class=\"legend\"") != std::string::npos);
  for (const char* legend : {"active (in use)", "awaiting free (stream events)",
                             "inactive split: free piece of a split segment (non-releasable)",
                             "inactive whole segment (releasable by empty_cache)"}) {
    CAPTURE(legend);
    CHECK(svg.find(legend) != std::string::npos);
  }
  CHECK(svg.find(fragmentation_verdict(snap)) != std::string::npos);
  // One shape with a tooltip per block, each state in its colour.
  CHECK(count(svg, "<title>") == 4);
  CHECK(count(svg, "fill=\"#4e79a7\"><title>") == 1);  // active
  CHECK(count(svg, "fill=\"#f28e2b\"><title>") == 1);  // awaiting free
  CHECK(count(svg, "fill=\"#e15759\"><title>") == 1);  // free piece of the split segment
  CHECK(count(svg, "fill=\"#c7c7c7\"><title>") == 1);  // the whole free small segment
  // Segment labels: address, size, pool, stream; block sizes inside wide blocks.
  CHECK(svg.find("0x7f3a00000000  20.0 MiB") != std::string::npos);
  CHECK(svg.find("private pool 7 (large), stream 0x5555deadbeef, 3 blocks") != std::string::npos);
  CHECK(svg.find("small pool, default stream, 1 block<") != std::string::npos);
  CHECK(svg.find("class=\"size\" fill=\"#ffffff\">8.0 MiB</text>") != std::string::npos);
  CHECK(svg.find("class=\"size\" fill=\"#202020\">2.0 MiB</text>") != std::string::npos);
}

TEST_CASE("memory_map_svg escapes text for XML") {
  MemorySnapshot snap = sample();
  snap.device = "cuda:<0> & \"x\"";
  const std::string svg = memory_map_svg(snap);
  CHECK(svg.find("cuda:&lt;0&gt; &amp; &quot;x&quot;") != std::string::npos);
  CHECK(svg.find("<0>") == std::string::npos);
  CHECK(svg.find("& ") == std::string::npos);
}

TEST_CASE("memory_map_svg keeps tiny blocks visible and sizes to scale") {
  MemorySnapshot snap;
  snap.device = "cpu";
  SegmentInfo seg;
  seg.address = 0x1000;
  seg.total_size = 2 * MiB;
  seg.blocks = {{0x1000, 512, 512, BlockState::Active}, {0x1200, 2 * MiB - 512, 0, BlockState::Inactive}};
  snap.segments = {seg};
  const std::string svg = memory_map_svg(snap);
  // The 512 B block gets the 2 px minimum; the rest of the 824 px bar goes to the other.
  CHECK(svg.find("<rect x=\"360.00\" y=\"116.0\" width=\"2.00\"") != std::string::npos);
  CHECK(svg.find("<rect x=\"362.00\" y=\"116.0\" width=\"822.00\"") != std::string::npos);
  CHECK(svg.find(">512 B</text>") == std::string::npos);  // no room for its label
  CHECK(svg.find(">2.0 MiB</text>") != std::string::npos);
}

TEST_CASE("memory_map_svg caps thousands of segments and blocks") {
  MemorySnapshot snap;
  snap.device = "cuda:0";
  for (uint64_t i = 0; i < 1000; ++i) {
    SegmentInfo seg;
    seg.address = (1000 - i) * 4 * MiB;  // given in reverse: the map sorts by address
    seg.total_size = 2 * MiB;
    seg.blocks = {{seg.address, 2 * MiB, 0, BlockState::Inactive}};
    snap.segments.push_back(seg);
  }
  const std::string svg = memory_map_svg(snap);
  CHECK(count(svg, "class=\"segment\"") == 200);
  CHECK(svg.find("800 more segments not drawn (the first 200 by address are shown).") != std::string::npos);
  CHECK(svg.find(fmt::format("{:#x}  2.0 MiB", 4 * MiB)) < svg.find(fmt::format("{:#x}  2.0 MiB", 8 * MiB)));
  CHECK(svg.find(fmt::format("{:#x}  2.0 MiB", 1000 * 4 * MiB)) == std::string::npos);

  // 4096 alternating 512 B blocks cannot each get 2 px: the bar is drawn as slices.
  MemorySnapshot dense;
  dense.device = "cuda:0";
  SegmentInfo seg;
  seg.address = 0x10000;
  seg.total_size = 2 * MiB;
  for (uint64_t i = 0; i < 4096; ++i) {
    const bool active = i % 2 == 0;
    seg.blocks.push_back({seg.address + i * 512, 512, active ? 512u : 0u,
                          active ? BlockState::Active : BlockState::Inactive});
  }
  dense.segments = {seg};
  const std::string d = memory_map_svg(dense);
  CHECK(d.find("4096 blocks in 412 slices") != std::string::npos);
  CHECK(count(d, "<title>") == 0);
  CHECK(count(d, "class=\"slice\"") >= 412);
  CHECK(count(d, "class=\"slice\"") <= 2 * 412);
  CHECK(d.size() < 200 * KiB);

  // An empty snapshot says so.
  MemorySnapshot empty;
  empty.device = "cpu";
  const std::string e = memory_map_svg(empty);
  CHECK(count(e, "class=\"segment\"") == 0);
  CHECK(e.find("No segments are reserved.") != std::string::npos);
  CHECK(e.find("Fragmentation: none") != std::string::npos);
}
