// ProgressBar: the line's format (a pure function, tested on its own) and when to draw it.
#include "progress.h"

#include <kiln/kiln.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace kiln::data {

std::string group_thousands(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -static_cast<uint64_t>(value) : static_cast<uint64_t>(value));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  if (seconds < 9.95) return fmt::format("{:.1f}s", seconds);
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
}

std::string format_progress(const ProgressState& state, int width) {
  width = std::max(width, 1);
  const int64_t total = std::max<int64_t>(state.total, 0);
  const int64_t step = std::clamp<int64_t>(state.step, 0, total);
  const int64_t filled = total > 0 ? width * step / total : width;
  std::string bar;
  if (state.done || filled >= width) {
    bar.assign(static_cast<size_t>(width), '=');
  } else {
    bar.assign(static_cast<size_t>(filled), '=');
    bar += '>';
    bar.append(static_cast<size_t>(width - filled - 1), ' ');
  }
  const std::string rate = state.elapsed > 0
                               ? group_thousands(std::llround(static_cast<double>(state.samples) / state.elapsed))
                               : "-";
  std::string time;
  if (state.done)
    time = "in " + format_duration(state.elapsed);
  else
    time = "ETA " + (step > 0 ? format_duration(state.elapsed * static_cast<double>(total - step) / step) : "-");
  return fmt::format("{}{}[{}] {}/{} loss {:.4f} {} samples/s {}", state.label, state.label.empty() ? "" : " ", bar,
                     state.step, state.total, state.loss, rate, time);
}

ProgressBar::ProgressBar(std::string label, int64_t total, ProgressOptions options) : options_(std::move(options)) {
  KILN_CHECK(total >= 0, "ProgressBar: total must be >= 0, got {}", total);
  KILN_CHECK(options_.width >= 1, "ProgressBar: width must be >= 1, got {}", options_.width);
  KILN_CHECK(options_.line_percent >= 1 && options_.line_percent <= 100,
             "ProgressBar: line_percent must be in [1, 100], got {}", options_.line_percent);
  KILN_CHECK(options_.redraw_seconds >= 0, "ProgressBar: redraw_seconds must be >= 0, got {}",
             options_.redraw_seconds);
  KILN_CHECK(options_.out != nullptr, "ProgressBar: out must be a stream");
  if (!options_.clock)
    options_.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
  tty_ = options_.tty.value_or(isatty(fileno(options_.out)) == 1);
  state_.label = std::move(label);
  state_.total = total;
  start_ = now();
}

ProgressBar::~ProgressBar() {
  try {
    finish();
  } catch (...) {  // a destructor never throws; a failed last line is not worth a crash
  }
}

double ProgressBar::now() const { return options_.clock(); }

bool ProgressBar::due(int64_t step) const {
  if (finished_) return false;
  if (step >= state_.total) return true;
  if (tty_) return now() - last_draw_ >= options_.redraw_seconds;
  const int64_t percent = std::max<int64_t>(step, 0) * 100 / state_.total;
  return percent / options_.line_percent > last_bucket_;
}

void ProgressBar::update(int64_t step, int64_t samples, double loss) {
  if (finished_) return;
  const bool draw_now = due(step);
  state_.step = step;
  state_.samples = samples;
  state_.loss = loss;
  if (draw_now) draw(step >= state_.total);
}

void ProgressBar::finish() {
  if (finished_) return;
  if (!(drawn_step_ == state_.step && state_.done)) draw(true);
  if (tty_) std::fputc('\n', options_.out);
  std::fflush(options_.out);
  finished_ = true;
}

void ProgressBar::draw(bool done) {
  const double t = now();
  state_.elapsed = t - start_;
  state_.done = done;
  const std::string line = format_progress(state_, options_.width);
  if (tty_) {
    const size_t pad = last_length_ > line.size() ? last_length_ - line.size() : 0;
    std::fprintf(options_.out, "\r%s%*s", line.c_str(), static_cast<int>(pad), "");
    last_length_ = line.size();
  } else {
    std::fprintf(options_.out, "%s\n", line.c_str());
    if (state_.total > 0)
      last_bucket_ = std::max<int64_t>(state_.step, 0) * 100 / state_.total / options_.line_percent;
  }
  std::fflush(options_.out);
  last_draw_ = t;
  drawn_step_ = state_.step;
}

}  // namespace kiln::data
