// The names under which block states and history actions appear in reports (JSON export,
// SVG tooltips). They are part of the JSON format, so they are spelled in one place.
#include "memory_snapshot.h"

namespace kiln {

const char* block_state_name(BlockState s) {
  switch (s) {
    case BlockState::Active: return "active";
    case BlockState::AwaitingFree: return "awaiting_free";
    case BlockState::Inactive: return "inactive";
  }
  return "unknown";
}

const char* trace_action_name(TraceAction a) {
  switch (a) {
    case TraceAction::Alloc: return "alloc";
    case TraceAction::FreeRequested: return "free_requested";
    case TraceAction::FreeCompleted: return "free_completed";
    case TraceAction::SegmentAlloc: return "segment_alloc";
    case TraceAction::SegmentFree: return "segment_free";
    case TraceAction::Oom: return "oom";
    case TraceAction::SegmentMap: return "segment_map";
    case TraceAction::SegmentUnmap: return "segment_unmap";
  }
  return "unknown";
}

}  // namespace kiln
