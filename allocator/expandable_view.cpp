// Expandable segments of a snapshot cut into pieces (see expandable_view.h). Pure functions of
// the SegmentInfo: the pages a block in use touches hold live bytes, the mapped ranges say
// which pages exist.
#include "expandable_view.h"

#include <algorithm>

namespace kiln {

namespace {
bool is_live(const BlockInfo& b) { return b.state != BlockState::Inactive; }
}  // namespace

uint64_t expandable_shown_end(const SegmentInfo& seg) {
  const uint64_t page = seg.page_size > 0 ? seg.page_size : 1;
  uint64_t end = seg.address + page;
  for (const AddressRange& r : seg.mapped_ranges) end = std::max(end, r.address + r.size);
  for (const BlockInfo& b : seg.blocks)
    if (is_live(b)) end = std::max(end, b.address + b.size);
  end = seg.address + (end - seg.address + page - 1) / page * page;
  return std::min(end, seg.address + seg.total_size);
}

std::vector<Piece> expandable_pieces(const SegmentInfo& seg, uint64_t end) {
  std::vector<Piece> pieces;
  const uint64_t page = seg.page_size;
  if (page == 0 || end <= seg.address) return pieces;
  const size_t n = static_cast<size_t>((end - seg.address + page - 1) / page);
  std::vector<uint8_t> mapped(n, 0), used(n, 0);
  auto page_of = [&](uint64_t a) { return static_cast<size_t>((a - seg.address) / page); };
  for (const AddressRange& r : seg.mapped_ranges)
    for (uint64_t a = std::max(r.address, seg.address); a < std::min(r.address + r.size, end); a += page)
      mapped[page_of(a)] = 1;
  for (const BlockInfo& b : seg.blocks) {
    if (!is_live(b) || b.size == 0 || b.address >= end) continue;
    for (size_t i = page_of(b.address), last = page_of(std::min(b.address + b.size, end) - 1); i <= last; ++i)
      used[i] = 1;
  }
  for (size_t bi = 0; bi < seg.blocks.size(); ++bi) {
    const BlockInfo& b = seg.blocks[bi];
    const uint64_t lo = std::max(b.address, seg.address), hi = std::min(b.address + b.size, end);
    if (lo >= hi) continue;
    if (is_live(b)) {
      pieces.push_back({lo, hi - lo, bi, PieceKind::Live});
      continue;
    }
    for (uint64_t a = lo; a < hi;) {
      const size_t p = page_of(a);
      const uint64_t next = std::min(hi, seg.address + (p + 1) * page);
      const PieceKind kind =
          mapped[p] == 0 ? PieceKind::Unmapped : used[p] != 0 ? PieceKind::FreeOnUsedPage : PieceKind::FreeMapped;
      if (!pieces.empty() && pieces.back().block == bi && pieces.back().kind == kind) {
        pieces.back().size += next - a;
      } else {
        pieces.push_back({a, next - a, bi, kind});
      }
      a = next;
    }
  }
  return pieces;
}

}  // namespace kiln
