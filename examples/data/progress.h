// A per-epoch progress bar for training loops:
//
//   epoch 3/15 [=====>    ] 120/235 loss 0.4123 12,345 samples/s ETA 3s
//
// On a terminal the line is redrawn in place with '\r' (at most every `redraw_seconds`, and
// always at the last step); written to a file or a pipe (CI logs) it prints one line each time
// the progress passes a multiple of `line_percent` percent, and the last step. The last line
// shows the epoch's time ("in 4.2s") where the others show the ETA.
//
// Reading a loss off a GPU synchronises the device, so a training loop should not do it on
// every step: ask due(step) first, and compute the loss only when a line will be drawn.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

namespace kiln::data {

/// How and where a ProgressBar draws.
struct ProgressOptions {
  std::FILE* out = stdout;
  std::optional<bool> tty{};       // redraw in place; default: whether `out` is a terminal
  int width = 30;                  // cells between the brackets, >= 1
  int line_percent = 10;           // not a terminal: a line per this many percent, in [1, 100]
  double redraw_seconds = 0.1;     // a terminal: at most one redraw per this many seconds
  std::function<double()> clock{}; // seconds since any fixed point; default std::chrono::steady_clock
};

/// What one progress line shows.
struct ProgressState {
  std::string label{};     // "epoch 3/15" (may be empty)
  int64_t step = 0;        // steps done
  int64_t total = 0;       // steps in the epoch
  int64_t samples = 0;     // samples done
  double loss = 0;
  double elapsed = 0;      // seconds since the epoch started
  bool done = false;       // the last line: elapsed time instead of ETA
};

/// The line for `state` with a bar of `width` cells (at least 1; no '\r' or newline).
std::string format_progress(const ProgressState& state, int width);
/// 12345 -> "12,345".
std::string group_thousands(int64_t value);
/// A duration as "0.4s", "42s", "3m07s" or "2h05m".
std::string format_duration(double seconds);

/// A progress bar over one epoch of `total` steps.
class ProgressBar {
 public:
  /// Starts the clock; `label` prefixes every line.
  ProgressBar(std::string label, int64_t total, ProgressOptions options = {});
  /// Ends the line if finish() was not called; never throws.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// Whether update(step, ...) would draw a line now.
  bool due(int64_t step) const;
  /// Records `step` of total steps done, `samples` samples in all and the loss to show; draws
  /// when due(step).
  void update(int64_t step, int64_t samples, double loss);
  /// Draws the last state as done (time taken instead of ETA) unless it was drawn already,
  /// and ends a terminal's line. Idempotent.
  void finish();

 private:
  double now() const;
  void draw(bool done);

  ProgressOptions options_;
  bool tty_ = false;
  ProgressState state_;
  double start_ = 0;
  double last_draw_ = -1e300;      // clock time of the last terminal redraw
  int64_t last_bucket_ = 0;        // not a terminal: the last line_percent bucket printed
  int64_t drawn_step_ = -1;        // the step of the last line drawn
  size_t last_length_ = 0;         // terminal: characters of the last line, to blank leftovers
  bool finished_ = false;
};

}  // namespace kiln::data
