// ProgressBar (examples/data): the line's format, and when it is drawn on a terminal
// (redrawn in place, throttled) and in a log (a line per N%), with a fake clock and the
// output captured in a temporary file.
#include <doctest/doctest.h>
#include <examples/data/progress.h>
#include <kiln/kiln.h>

#include <cstdio>
#include <string>

using namespace kiln;
using namespace kiln::data;

namespace {

// What was written to `f` so far.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::string out;
  std::rewind(f);
  for (int c; (c = std::fgetc(f)) != EOF;) out += static_cast<char>(c);
  return out;
}

// Splits on '\n' (a trailing empty piece dropped).
std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = s.find('\n', start)) != std::string::npos; start = nl + 1) out.push_back(s.substr(start, nl - start));
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

}  // namespace

TEST_CASE("group_thousands and format_duration") {
  CHECK(group_thousands(0) == "0");
  CHECK(group_thousands(999) == "999");
  CHECK(group_thousands(1000) == "1,000");
  CHECK(group_thousands(12345) == "12,345");
  CHECK(group_thousands(1234567) == "1,234,567");
  CHECK(group_thousands(-1234567) == "-1,234,567");
  CHECK(group_thousands(INT64_MIN) == "-9,223,372,036,854,775,808");
  CHECK(format_duration(0) == "0.0s");
  CHECK(format_duration(0.44) == "0.4s");
  CHECK(format_duration(9.94) == "9.9s");
  CHECK(format_duration(9.96) == "10s");
  CHECK(format_duration(59.4) == "59s");
  CHECK(format_duration(59.6) == "1m00s");
  CHECK(format_duration(187) == "3m07s");
  CHECK(format_duration(3599.6) == "1h00m");
  CHECK(format_duration(7500) == "2h05m");
  CHECK(format_duration(-1) == "-");
  CHECK(format_duration(std::nan("")) == "-");
}

TEST_CASE("format_progress: the bar, counts, loss, rate and ETA") {
  ProgressState s{.label = "epoch 3/15", .step = 120, .total = 235, .samples = 120 * 256, .loss = 0.41234,
                  .elapsed = 2.5};
  // 10 * 120 / 235 = 5 full cells; rate 30720 / 2.5 = 12,288/s; ETA 2.5 * 115 / 120 = 2.4s.
  CHECK(format_progress(s, 10) == "epoch 3/15 [=====>    ] 120/235 loss 0.4123 12,288 samples/s ETA 2.4s");
  s.done = true;
  s.step = 235;
  s.samples = 60000;
  s.elapsed = 4.0;
  CHECK(format_progress(s, 10) == "epoch 3/15 [==========] 235/235 loss 0.4123 15,000 samples/s in 4.0s");
  ProgressState start{.step = 0, .total = 4};
  CHECK(format_progress(start, 4) == "[>   ] 0/4 loss 0.0000 - samples/s ETA -");
  ProgressState last{.step = 4, .total = 4, .samples = 8, .elapsed = 1};
  CHECK(format_progress(last, 4) == "[====] 4/4 loss 0.0000 8 samples/s ETA 0.0s");
  ProgressState half{.step = 1, .total = 2};
  CHECK(format_progress(half, 0) == "[>] 1/2 loss 0.0000 - samples/s ETA 0.0s");  // at least one cell
  ProgressState empty{.total = 0};
  CHECK(format_progress(empty, 3) == "[===] 0/0 loss 0.0000 - samples/s ETA -");
}

TEST_CASE("ProgressBar in a log: a line per 25%, the last one with the time taken") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  double t = 100;
  {
    ProgressBar bar("e1", 8, {.out = f, .tty = false, .width = 8, .line_percent = 25, .clock = [&] { return t; }});
    for (int64_t step = 1; step <= 8; ++step) {
      t += 0.5;
      const bool due = bar.due(step);
      CHECK(due == (step % 2 == 0));  // 25%, 50%, 75%, 100% of 8 steps
      bar.update(step, step * 10, 1.0 / step);
    }
    bar.finish();
    bar.finish();  // idempotent
    CHECK_FALSE(bar.due(8));
  }
  const std::vector<std::string> lines = lines_of(contents(f));
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "e1 [==>     ] 2/8 loss 0.5000 20 samples/s ETA 3.0s");
  CHECK(lines[1] == "e1 [====>   ] 4/8 loss 0.2500 20 samples/s ETA 2.0s");
  CHECK(lines[2] == "e1 [======> ] 6/8 loss 0.1667 20 samples/s ETA 1.0s");
  CHECK(lines[3] == "e1 [========] 8/8 loss 0.1250 20 samples/s in 4.0s");
  std::fclose(f);
}

TEST_CASE("ProgressBar on a terminal: redrawn in place, at most every redraw_seconds, then a newline") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  double t = 0;
  {
    ProgressBar bar("", 4, {.out = f, .tty = true, .width = 4, .redraw_seconds = 1.0, .clock = [&] { return t; }});
    t = 0.5;
    CHECK(bar.due(1));  // the first draw
    bar.update(1, 1000, 2.0);
    t = 0.9;
    CHECK_FALSE(bar.due(2));  // 0.4 s after the last redraw
    bar.update(2, 2000, 1.5);
    t = 1.6;
    CHECK(bar.due(3));
    bar.update(3, 3000, 1.25);
    t = 1.7;
    CHECK(bar.due(4));  // the last step always draws
    bar.update(4, 12000, 1.0);
    // The destructor ends the line.
  }
  CHECK(contents(f) == "\r[=>  ] 1/4 loss 2.0000 2,000 samples/s ETA 1.5s"
                       "\r[===>] 3/4 loss 1.2500 1,875 samples/s ETA 0.5s"
                       "\r[====] 4/4 loss 1.0000 7,059 samples/s in 1.7s \n");  // 1 blank: "in" is shorter than "ETA"
  std::fclose(f);
}

TEST_CASE("ProgressBar: a shorter line blanks the rest of the longer one; finish() without the last step") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  double t = 0;
  {
    ProgressBar bar("", 100, {.out = f, .tty = true, .width = 2, .redraw_seconds = 0, .clock = [&] { return t; }});
    t = 1;
    bar.update(50, 123456, 0.5);  // "... 123,456 samples/s ..."
    t = 100;
    bar.update(60, 600, 0.5);     // "... 6 samples/s ..." is shorter
    bar.finish();                 // stopped early: drawn as done at step 60
  }
  const std::string a = "[=>] 50/100 loss 0.5000 123,456 samples/s ETA 1.0s";
  const std::string b = "[=>] 60/100 loss 0.5000 6 samples/s ETA 1m07s";
  const std::string c = "[==] 60/100 loss 0.5000 6 samples/s in 1m40s";
  CHECK(contents(f) == "\r" + a + "\r" + b + std::string(a.size() - b.size(), ' ') + "\r" + c +
                           std::string(b.size() - c.size(), ' ') + "\n");
  std::fclose(f);
}

TEST_CASE("ProgressBar: bad options") {
  CHECK_THROWS_WITH_AS(ProgressBar("", -1), doctest::Contains("ProgressBar: total must be >= 0, got -1"), Error);
  CHECK_THROWS_WITH_AS(ProgressBar("", 5, {.width = 0}), doctest::Contains("ProgressBar: width must be >= 1, got 0"),
                       Error);
  CHECK_THROWS_WITH_AS(ProgressBar("", 5, {.line_percent = 101}),
                       doctest::Contains("ProgressBar: line_percent must be in [1, 100], got 101"), Error);
  CHECK_THROWS_WITH_AS(ProgressBar("", 5, {.redraw_seconds = -1}),
                       doctest::Contains("ProgressBar: redraw_seconds must be >= 0, got -1"), Error);
  CHECK_THROWS_WITH_AS(ProgressBar("", 5, {.out = nullptr}), doctest::Contains("ProgressBar: out must be a stream"),
                       Error);
}
