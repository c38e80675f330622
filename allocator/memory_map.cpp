// The snapshot exported for eyes and for tools: a JSON document, and an SVG memory map.
//
// A summary table says how much is non-releasable; the map shows where: one bar per
// segment, its blocks drawn to scale and coloured by state, so the free pieces stranded
// between live blocks are visible. The SVG is self-contained (no scripts, fonts, images or
// links), opens in any browser, and stays small for thousands of segments: only the first
// kMaxSegments by address are drawn (fewer once kMaxShapes shapes are drawn), and a segment
// with more blocks than its bar can show is drawn as runs of equal state, or, when even
// those are too many, as thin slices stacked by the share of each state. An expandable
// segment's bar shows its address range up to its last mapped page or block in use, free
// bytes cut by what the pages under them hold (expandable_view.h): non-releasable on pages
// with live bytes, cached on mapped pages with nothing live, or address space with no page.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "expandable_view.h"
#include "memory_report.h"

namespace kiln {

std::string snapshot_to_json(const MemorySnapshot& snapshot) {
  nlohmann::json doc;
  doc["device"] = snapshot.device;
  nlohmann::json segments = nlohmann::json::array();
  for (const SegmentInfo& seg : snapshot.segments) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const BlockInfo& b : seg.blocks) {
      blocks.push_back({{"address", b.address},
                        {"size", b.size},
                        {"requested_size", b.requested_size},
                        {"state", block_state_name(b.state)}});
    }
    nlohmann::json ranges = nlohmann::json::array();
    for (const AddressRange& r : seg.mapped_ranges) ranges.push_back({{"address", r.address}, {"size", r.size}});
    segments.push_back({{"address", seg.address},
                        {"total_size", seg.total_size},
                        {"is_expandable", seg.is_expandable},
                        {"page_size", seg.page_size},
                        {"mapped_size", seg.is_expandable ? seg.mapped_size : seg.total_size},
                        {"mapped_ranges", std::move(ranges)},
                        {"allocated_size", seg.allocated_size},
                        {"active_size", seg.active_size},
                        {"requested_size", seg.requested_size},
                        {"stream", static_cast<uint64_t>(seg.stream)},
                        {"is_large", seg.is_large},
                        {"pool_id", seg.pool_id},
                        {"blocks", std::move(blocks)}});
  }
  doc["segments"] = std::move(segments);
  nlohmann::json history = nlohmann::json::array();
  for (const TraceEntry& e : snapshot.history) {
    history.push_back({{"action", trace_action_name(e.action)},
                       {"address", e.address},
                       {"size", e.size},
                       {"stream", static_cast<uint64_t>(e.stream)},
                       {"time_us", e.time_us}});
  }
  doc["history"] = std::move(history);
  doc["stats"] = stats_to_map(snapshot.stats);
  return doc.dump(2);
}

namespace {

constexpr size_t kMaxSegments = 200;   // bars drawn; the rest are counted in a note
constexpr size_t kMaxShapes = 40000;   // and no more bars once this many shapes are drawn
constexpr double kWidth = 1200;        // picture width
constexpr double kMargin = 16;
constexpr double kBarX = 360;          // left edge of the bars; the labels sit left of it
constexpr double kBarWidth = kWidth - kBarX - kMargin;
constexpr double kBarHeight = 24;
constexpr double kRowHeight = 36;
constexpr double kTop = 116;           // first bar row, under title, verdict and legend
constexpr double kTopExpandable = 136; // ... when the legend has a third line (expandable segments)
constexpr double kMinBlockPx = 2;      // narrowest block drawn, so a 512 B block stays visible
constexpr double kCharPx = 6.2;        // width of one character of the 10 px monospace labels

/// How a block is drawn: Inactive splits in two, because only whole free segments can be
/// released to the device; in expandable segments free bytes are non-releasable (on a page
/// with live bytes), cached on a mapped page, or unmapped address space.
enum class Paint { Active, AwaitingFree, InactiveSplit, InactiveWhole, MappedFree, Unmapped };

struct PaintStyle {
  const char* fill;
  const char* text;  // label colour readable on `fill`
  const char* legend;
};
constexpr PaintStyle kStyles[] = {
    {"#4e79a7", "#ffffff", "active (in use)"},
    {"#f28e2b", "#ffffff", "awaiting free (stream events)"},
    {"#e15759", "#ffffff", "inactive split: free piece of a split segment (non-releasable)"},
    {"#c7c7c7", "#202020", "inactive whole segment (releasable by empty_cache)"},
    {"#9dc7a2", "#202020", "expandable: free on mapped pages with nothing live (unmapped by empty_cache)"},
    {"#f4f4f4", "#808080", "expandable: address space with no page mapped (no memory)"},
};
constexpr size_t kClassicStyles = 4;  // the legend of a snapshot without expandable segments
constexpr const char* kNonReleasableExpandable =
    "free on a mapped page that holds live bytes (non-releasable)";
const PaintStyle& style(Paint p) { return kStyles[static_cast<int>(p)]; }

/// A run of consecutive blocks drawn as one rectangle (one block unless the segment has more
/// blocks than its bar has room for).
struct Run {
  uint64_t address = 0, size = 0, requested = 0;
  size_t blocks = 0;
  Paint paint = Paint::Active;
};

/// Text made safe for XML character data and attribute values.
std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

/// "512 B", "1.5 KiB", "20.0 MiB": compact sizes for labels.
std::string size_label(uint64_t bytes) { return format_bytes(bytes, 1); }

Paint paint_of(const BlockInfo& b, size_t blocks_in_segment) {
  switch (b.state) {
    case BlockState::Active: return Paint::Active;
    case BlockState::AwaitingFree: return Paint::AwaitingFree;
    case BlockState::Inactive: break;
  }
  return blocks_in_segment > 1 ? Paint::InactiveSplit : Paint::InactiveWhole;
}

Paint paint_of(const Piece& p, const BlockInfo& b) {
  switch (p.kind) {
    case PieceKind::Live: return b.state == BlockState::Active ? Paint::Active : Paint::AwaitingFree;
    case PieceKind::FreeOnUsedPage: return Paint::InactiveSplit;
    case PieceKind::FreeMapped: return Paint::MappedFree;
    case PieceKind::Unmapped: break;
  }
  return Paint::Unmapped;
}

/// The segment's blocks as runs: one per block (per piece in an expandable segment, up to
/// `end`), or merged by equal paint when there are more than the bar has `room` for.
std::vector<Run> runs_of(const SegmentInfo& seg, size_t room, uint64_t end) {
  std::vector<Run> raw;
  if (seg.is_expandable) {
    for (const Piece& p : expandable_pieces(seg, end)) {
      const BlockInfo& b = seg.blocks[p.block];
      const bool live = p.kind == PieceKind::Live;
      raw.push_back({p.address, p.size, live ? b.requested_size : 0, 1, paint_of(p, b)});
    }
  } else {
    for (const BlockInfo& b : seg.blocks)
      raw.push_back({b.address, b.size, b.requested_size, 1, paint_of(b, seg.blocks.size())});
  }
  if (raw.size() <= room) return raw;
  std::vector<Run> runs;
  for (const Run& r : raw) {
    if (!runs.empty() && runs.back().paint == r.paint) {
      runs.back().size += r.size;
      runs.back().requested += r.requested;
      runs.back().blocks += r.blocks;
      continue;
    }
    runs.push_back(r);
  }
  return runs;
}

/// Widths in pixels, proportional to size but at least kMinBlockPx, summing to bar_px: narrow
/// runs are pinned to the minimum and the rest share what is left, until no share falls
/// below the minimum. Needs runs.size() * kMinBlockPx <= bar_px.
std::vector<double> widths_of(const std::vector<Run>& runs, double bar_px) {
  const size_t n = runs.size();
  std::vector<double> w(n, kMinBlockPx);
  std::vector<bool> pinned(n, false);
  size_t n_pinned = 0;
  for (bool changed = n > 0; changed;) {
    changed = false;
    uint64_t free_bytes = 0;
    for (size_t i = 0; i < n; ++i)
      if (!pinned[i]) free_bytes += runs[i].size;
    const double free_px = bar_px - static_cast<double>(n_pinned) * kMinBlockPx;
    for (size_t i = 0; i < n; ++i) {
      if (pinned[i]) continue;
      w[i] = free_bytes == 0 ? free_px / static_cast<double>(n - n_pinned)
                             : free_px * static_cast<double>(runs[i].size) / static_cast<double>(free_bytes);
      if (w[i] < kMinBlockPx) {
        w[i] = kMinBlockPx;
        pinned[i] = true;
        ++n_pinned;
        changed = true;
      }
    }
  }
  return w;
}

/// Draws runs side by side with a tooltip each, and the size inside those wide enough.
/// Returns the number of shapes drawn.
size_t draw_runs(std::string& svg, const std::vector<Run>& runs, double y, bool expandable) {
  const std::vector<double> widths = widths_of(runs, kBarWidth);
  double x = kBarX;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    const PaintStyle& st = style(r.paint);
    const char* legend = expandable && r.paint == Paint::InactiveSplit ? kNonReleasableExpandable : st.legend;
    std::string what = r.blocks == 1 ? fmt::format("{:#x}: {} {}", r.address, size_label(r.size), legend)
                                     : fmt::format("{:#x}: {} {}, {} {}", r.address, r.blocks,
                                                   expandable ? "pieces" : "blocks", size_label(r.size), legend);
    if (r.paint == Paint::Active) what += fmt::format(", requested {}", size_label(r.requested));
    svg += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n", x, y,
        widths[i], kBarHeight, st.fill, xml_escape(what));
    const std::string text = size_label(r.size);
    if (widths[i] >= static_cast<double>(text.size()) * kCharPx + 6) {
      svg += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" class=\"size\" fill=\"{}\">{}</text>\n", x + widths[i] / 2,
                         y + kBarHeight / 2 + 3.5, st.text, xml_escape(text));
    }
    x += widths[i];
  }
  return runs.size();
}

/// Draws runs too many for the bar as `room` equal slices of the segment's bytes, each a
/// column stacked by the share of every paint in it. Returns the number of shapes drawn.
size_t draw_slices(std::string& svg, const std::vector<Run>& runs, double y, size_t room) {
  double total = 0;
  for (const Run& r : runs) total += static_cast<double>(r.size);
  if (total == 0 || room == 0) return 0;
  const double per = total / static_cast<double>(room), slice_px = kBarWidth / static_cast<double>(room);
  std::vector<std::array<double, std::size(kStyles)>> bytes(room);
  double offset = 0;
  for (const Run& r : runs) {
    const double begin = offset, end = offset + static_cast<double>(r.size);
    for (auto k = static_cast<size_t>(begin / per); k < room && static_cast<double>(k) * per < end; ++k) {
      const double lo = std::max(begin, static_cast<double>(k) * per);
      const double hi = std::min(end, static_cast<double>(k + 1) * per);
      if (hi > lo) bytes[k][static_cast<size_t>(r.paint)] += hi - lo;
    }
    offset = end;
  }
  size_t shapes = 0;
  for (size_t k = 0; k < room; ++k) {
    double yy = y;
    for (size_t p = 0; p < std::size(kStyles); ++p) {
      if (bytes[k][p] <= 0) continue;
      const double h = kBarHeight * bytes[k][p] / per;
      svg += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" class=\"slice\"/>\n",
          kBarX + static_cast<double>(k) * slice_px, yy, slice_px, h, kStyles[p].fill);
      yy += h;
      ++shapes;
    }
  }
  return shapes;
}

std::string segment_label_pool(const SegmentInfo& seg) {
  const char* pool = seg.is_large ? "large" : "small";
  if (seg.pool_id != 0) return fmt::format("private pool {} ({})", seg.pool_id, pool);
  return fmt::format("{} pool", pool);
}

std::string stream_label(StreamId s) {
  return s == 0 ? std::string("default stream") : fmt::format("stream {:#x}", static_cast<uint64_t>(s));
}

/// One segment's row: a two-line label left of the bar, the bar with its blocks. Returns the
/// number of shapes drawn.
size_t draw_segment(std::string& svg, const SegmentInfo& seg, double y) {
  const auto room = static_cast<size_t>(kBarWidth / kMinBlockPx);
  const uint64_t end = seg.is_expandable ? expandable_shown_end(seg) : seg.address + seg.total_size;
  const std::vector<Run> runs = runs_of(seg, room, end);
  const bool sliced = runs.size() > room;
  svg += "<g class=\"segment\">\n";
  const std::string head =
      seg.is_expandable ? fmt::format("{:#x}  {} mapped, expandable", seg.address, size_label(seg.mapped_size))
                        : fmt::format("{:#x}  {}", seg.address, size_label(seg.total_size));
  svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"label\">{}</text>\n", kMargin, y + 11, xml_escape(head));
  std::string sub = fmt::format("{}, {}, {} block{}", segment_label_pool(seg), stream_label(seg.stream),
                                seg.blocks.size(), seg.blocks.size() == 1 ? "" : "s");
  if (seg.is_expandable)
    sub += fmt::format("; first {} of {} address space shown", size_label(end - seg.address),
                       size_label(seg.total_size));
  if (sliced) sub += fmt::format(" in {} slices", room);
  svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"sub\">{}</text>\n", kMargin, y + 25, xml_escape(sub));
  const size_t shapes = sliced ? draw_slices(svg, runs, y, room) : draw_runs(svg, runs, y, seg.is_expandable);
  svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" class=\"bar\"/>\n", kBarX, y,
                     kBarWidth, kBarHeight);
  svg += "</g>\n";
  return shapes + 3;
}

}  // namespace

std::string memory_map_svg(const MemorySnapshot& snapshot) {
  const MemoryStats& stats = snapshot.stats;
  std::vector<const SegmentInfo*> segs;
  segs.reserve(snapshot.segments.size());
  for (const SegmentInfo& s : snapshot.segments) segs.push_back(&s);
  std::stable_sort(segs.begin(), segs.end(),
                   [](const SegmentInfo* a, const SegmentInfo* b) { return a->address < b->address; });

  // The bars first: how many fit the budgets decides the picture's height.
  const bool expandable =
      std::any_of(segs.begin(), segs.end(), [](const SegmentInfo* s) { return s->is_expandable; });
  const double top = expandable ? kTopExpandable : kTop;
  std::string body;
  size_t drawn = 0, shapes = 0;
  while (drawn < segs.size() && drawn < kMaxSegments && shapes < kMaxShapes) {
    shapes += draw_segment(body, *segs[drawn], top + static_cast<double>(drawn) * kRowHeight);
    ++drawn;
  }
  const bool note = drawn < segs.size() || segs.empty();
  if (note) {
    const size_t left = segs.size() - drawn;
    const std::string text =
        segs.empty() ? std::string("No segments are reserved.")
                     : fmt::format("{} more segment{} not drawn (the first {} by address are shown).", left,
                                   left == 1 ? "" : "s", drawn);
    body += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"note\">{}</text>\n", kMargin,
                        top + static_cast<double>(drawn) * kRowHeight + 14, xml_escape(text));
  }
  const double height = top + static_cast<double>(drawn) * kRowHeight + (note ? 24 : 0) + kMargin;

  std::string svg;
  svg += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"monospace\" fill=\"#202020\">\n",
      kWidth, height);
  svg +=
      "<style>\n"
      "text { font-size: 11px; }\n"
      ".title { font-size: 15px; font-weight: bold; }\n"
      ".sub { font-size: 10px; fill: #606060; }\n"
      ".size { font-size: 10px; text-anchor: middle; }\n"
      "rect { stroke: #ffffff; stroke-width: 0.5; }\n"
      ".bar { fill: none; stroke: #404040; stroke-width: 1; }\n"
      ".slice, .background { stroke: none; }\n"
      "</style>\n";
  svg += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\" class=\"background\"/>\n",
                     kWidth, height);
  auto bytes = [](int64_t v) { return size_label(static_cast<uint64_t>(std::max<int64_t>(0, v))); };
  const std::string title = fmt::format(
      "Kiln memory map, {}: reserved {}, allocated {}, non-releasable {}, {} segment{}", snapshot.device,
      bytes(stats.reserved_bytes[StatPool::All].current), bytes(stats.allocated_bytes[StatPool::All].current),
      bytes(stats.inactive_split_bytes[StatPool::All].current), segs.size(), segs.size() == 1 ? "" : "s");
  svg += fmt::format("<text x=\"{}\" y=\"26\" class=\"title\">{}</text>\n", kMargin, xml_escape(title));
  svg += fmt::format("<text x=\"{}\" y=\"48\" class=\"verdict\">{}</text>\n", kMargin,
                     xml_escape(fragmentation_verdict(snapshot)));

  // Legend: a swatch and its meaning per paint, two per line.
  svg += "<g class=\"legend\">\n";
  for (size_t i = 0; i < (expandable ? std::size(kStyles) : kClassicStyles); ++i) {
    const double lx = kMargin + static_cast<double>(i % 2) * 560, ly = 62 + static_cast<double>(i / 2) * 20;
    const char* legend = expandable && static_cast<Paint>(i) == Paint::InactiveSplit
                             ? "non-releasable: free piece of a split segment, or free on a page in use"
                             : kStyles[i].legend;
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\"/>\n", lx, ly, kStyles[i].fill);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", lx + 20, ly + 11, xml_escape(legend));
  }
  svg += "</g>\n";
  svg += body;
  svg += "</svg>\n";
  return svg;
}

}  // namespace kiln
