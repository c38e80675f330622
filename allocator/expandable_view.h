// How the reports read an expandable segment of a snapshot: its blocks cut into pieces by what
// the pages under them hold. A free byte is one of three things there: on a mapped page that
// also holds live bytes (non-releasable: empty_cache cannot unmap that page), on a mapped
// page with nothing live (cached, releasable), or on no page at all (address space only).
// memory_summary's verdict and the SVG map both draw on this. Not part of the public API.
#pragma once

#include <cstdint>
#include <vector>

#include "memory_snapshot.h"

namespace kiln {

/// What a piece of an expandable segment is.
enum class PieceKind : uint8_t {
  Live,            ///< a block in use (active or awaiting free)
  FreeOnUsedPage,  ///< free, on a mapped page that holds live bytes (non-releasable)
  FreeMapped,      ///< free, on a mapped page that holds nothing live (releasable)
  Unmapped,        ///< free address space with no page behind it
};

/// A run of bytes of one block with one kind.
struct Piece {
  uint64_t address = 0;
  uint64_t size = 0;
  size_t block = 0;  ///< index of its block in SegmentInfo::blocks
  PieceKind kind = PieceKind::Unmapped;
};

/// The end of the part of an expandable segment worth showing: past its last mapped page and
/// its last block in use, rounded up to a page (at least one page past the start).
uint64_t expandable_shown_end(const SegmentInfo& seg);

/// The pieces of an expandable segment's blocks from its start to `end`, in address order;
/// consecutive bytes of one block and one kind form one piece.
std::vector<Piece> expandable_pieces(const SegmentInfo& seg, uint64_t end);

}  // namespace kiln
