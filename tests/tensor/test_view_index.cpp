// Indexing views: narrow, slice (Python start:end:step semantics with negative and clamped
// bounds), select and operator[]. Each view is checked element by element against the base
// through hand-written index arithmetic, with PyTorch's sizes, strides and storage offsets.
#include "view_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {
// Python's len(range(start, stop, step)) after slice.indices(n): the reference for sizes.
int64_t python_slice_len(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t* first) {
  if (start < 0) start = std::max<int64_t>(start + n, 0);
  if (start > n) start = n;
  if (stop < 0) stop = std::max<int64_t>(stop + n, 0);
  if (stop > n) stop = n;
  *first = start;
  int64_t count = 0;
  for (int64_t k = start; k < stop; k += step) ++count;
  return count;
}
}  // namespace

TEST_CASE("narrow takes a window along one dim") {
  manual_seed(201);
  for (DType dt : {kFloat32, kBFloat16, kInt32}) {
    INFO("dtype " << dtype_name(dt));
    Tensor x = random_input({3, 5}, dt);
    Tensor n = x.narrow(1, 1, 3);
    CHECK(n.strides() == Shape{5, 1});
    CHECK(n.storage_offset() == 1);
    check_view_of(x, n, {3, 3}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], i[1] + 1}; });
  }
  Tensor x = random({3, 5});
  Tensor rows = x.narrow(0, 2, 1);
  CHECK(rows.storage_offset() == 10);
  check_view_of(x, rows, {1, 5}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0] + 2, i[1]}; });
  // Negative start counts from the end: start -2 of 5 is 3.
  Tensor tail = x.narrow(-1, -2, 2);
  CHECK(tail.storage_offset() == 3);
  check_view_of(x, tail, {3, 2}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], i[1] + 3}; });
  // Length 0, also at the very end.
  CHECK(x.narrow(1, 5, 0).sizes() == Shape{3, 0});
  CHECK(x.narrow(0, 1, 0).numel() == 0);
  // Narrowing a transposed tensor moves the offset by the dim's stride.
  Tensor y = random({4, 6});
  Tensor nt = y.t().narrow(1, 1, 2);  // columns of y.t() are rows of y
  CHECK(nt.storage_offset() == 6);
  CHECK(nt.strides() == Shape{1, 6});
  check_view_of(y, nt, {6, 2}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[1] + 1, i[0]}; });

  CHECK_THROWS_WITH_AS(x.narrow(1, 6, 0), doctest::Contains("narrow: start 6 is out of range for dim 1 of size 5"), Error);
  CHECK_THROWS_WITH_AS(x.narrow(1, -6, 1),
                       doctest::Contains("narrow: start -6 is out of range for dim 1 of size 5 (expected a start in [-5, 5])"),
                       Error);
  CHECK_THROWS_WITH_AS(x.narrow(1, 3, 3),
                       doctest::Contains("narrow: start (3) + length (3) exceeds dimension size (5) of dim 1"), Error);
  CHECK_THROWS_WITH_AS(x.narrow(0, 0, -1), doctest::Contains("narrow: length must be non-negative, got -1"), Error);
  CHECK_THROWS_WITH_AS(x.narrow(2, 0, 1), doctest::Contains("narrow: dim 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(random({}).narrow(0, 0, 1), doctest::Contains("narrow: cannot be applied to a 0-dim tensor"), Error);
}

TEST_CASE("slice with step 1 and step > 1") {
  manual_seed(202);
  Tensor x = random({3, 6});
  Tensor s = x.slice(1, 1, 5, 2);  // columns 1, 3
  CHECK(s.strides() == Shape{6, 2});
  CHECK(s.storage_offset() == 1);
  check_view_of(x, s, {3, 2}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], 1 + 2 * i[1]}; });

  Tensor r = x.slice(0, 0, 3, 2);  // rows 0, 2
  CHECK(r.strides() == Shape{12, 1});
  check_view_of(x, r, {2, 6}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{2 * i[0], i[1]}; });

  // A step larger than the dim keeps only the first element.
  Tensor big = x.slice(1, 2, 6, 10);
  CHECK(big.sizes() == Shape{3, 1});
  CHECK(big.storage_offset() == 2);
  check_view_of(x, big, {3, 1}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], 2}; });

  // Slicing a slice composes the steps.
  Tensor v = random({20});
  Tensor twice = v.slice(0, 1, 20, 3).slice(0, 1, 7, 2);  // v[1::3] = 1,4,7,10,13,16,19 -> [1::2] = 4,10,16
  CHECK(twice.strides() == Shape{6});
  CHECK(twice.storage_offset() == 4);
  check_view_of(v, twice, {3}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{4 + 6 * i[0]}; });

  // Default step is 1.
  Tensor d = v.slice(0, 5, 8);
  CHECK(d.strides() == Shape{1});
  check_view_of(v, d, {3}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{5 + i[0]}; });
}

TEST_CASE("slice bounds follow Python: negative counts from the end, out of range clamps") {
  manual_seed(203);
  const int64_t n = 7;
  const std::vector<int64_t> bounds = {-100, -8, -7, -3, -1, 0, 2, 6, 7, 8, 100};
  for (int64_t step : {1, 2, 3}) {
    for (int64_t start : bounds) {
      for (int64_t stop : bounds) {
        CAPTURE(start);
        CAPTURE(stop);
        CAPTURE(step);
        Tensor x = random({2, n});
        int64_t first = 0;
        const int64_t len = python_slice_len(n, start, stop, step, &first);
        Tensor s = x.slice(-1, start, stop, step);
        REQUIRE(s.sizes() == Shape{2, len});
        if (len > 0) {
          CHECK(s.storage_offset() == first);
          CHECK(s.stride(1) == step);
        }
        check_view_of(x, s, {2, len},
                      [&](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], first + step * i[1]}; });
      }
    }
  }
  // Python's x[5:2] is empty; PyTorch keeps offset start * stride.
  Tensor x = random({3, 6});
  Tensor e = x.slice(1, 5, 2);
  CHECK(e.sizes() == Shape{3, 0});
  CHECK(e.storage_offset() == 5);
  Tensor z = zeros({0, 4}).slice(0, 0, 3);
  CHECK(z.sizes() == Shape{0, 4});
  Tensor z2 = zeros({4, 0}).slice(1, -2, 2);
  CHECK(z2.sizes() == Shape{4, 0});
}

TEST_CASE("slice errors") {
  Tensor x = zeros({3, 6});
  CHECK_THROWS_WITH_AS(x.slice(1, 0, 6, 0), doctest::Contains("slice: step must be positive, got 0"), Error);
  CHECK_THROWS_WITH_AS(x.slice(1, 0, 6, -1), doctest::Contains("slice: step must be positive, got -1"), Error);
  CHECK_THROWS_WITH_AS(x.slice(2, 0, 1), doctest::Contains("slice: dim 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(zeros({}).slice(0, 0, 1), doctest::Contains("slice: cannot be applied to a 0-dim tensor"), Error);
}

TEST_CASE("select removes a dim at an index") {
  manual_seed(204);
  for (DType dt : {kFloat64, kFloat16, kInt64, kBool}) {
    INFO("dtype " << dtype_name(dt));
    Tensor x = random_input({3, 4, 5}, dt);
    Tensor s = x.select(1, 2);
    CHECK(s.strides() == Shape{20, 1});
    CHECK(s.storage_offset() == 10);
    check_view_of(x, s, {3, 5}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], 2, i[1]}; });
  }
  Tensor x = random({3, 4, 5});
  Tensor last = x.select(-1, -1);  // last index of the last dim
  CHECK(last.storage_offset() == 4);
  CHECK(last.strides() == Shape{20, 5});
  check_view_of(x, last, {3, 4}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], i[1], 4}; });
  Tensor first = x.select(0, -3);
  CHECK(first.storage_offset() == 0);
  check_view_of(x, first, {4, 5}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{0, i[0], i[1]}; });

  // Selecting down to a 0-dim tensor.
  Tensor v = random({6});
  Tensor e = v.select(0, 4);
  CHECK(e.dim() == 0);
  CHECK(e.storage_offset() == 4);
  check_view_of(v, e, {}, [](const std::vector<int64_t>&) { return std::vector<int64_t>{4}; });

  // Select on a strided view.
  Tensor m = random({4, 6});
  Tensor col = m.t().select(0, 5);  // column 5 of m
  CHECK(col.strides() == Shape{6});
  CHECK(col.storage_offset() == 5);
  check_view_of(m, col, {4}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{i[0], 5}; });

  // A zero-size dim elsewhere is fine.
  CHECK(zeros({2, 0}).select(0, 1).sizes() == Shape{0});

  CHECK_THROWS_WITH_AS(x.select(1, 4), doctest::Contains("select: index 4 is out of bounds for dimension 1 with size 4"),
                       Error);
  CHECK_THROWS_WITH_AS(x.select(1, -5), doctest::Contains("select: index -5 is out of bounds for dimension 1 with size 4"),
                       Error);
  CHECK_THROWS_WITH_AS(zeros({0, 3}).select(0, 0), doctest::Contains("select: index 0 is out of bounds"), Error);
  CHECK_THROWS_WITH_AS(x.select(3, 0), doctest::Contains("select: dim 3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(zeros({}).select(0, 0), doctest::Contains("select: cannot be applied to a 0-dim tensor"), Error);
}

TEST_CASE("operator[] selects along dim 0 and chains") {
  manual_seed(205);
  Tensor x = random({3, 4, 5});
  Tensor r = x[1];
  CHECK(r.storage_offset() == 20);
  CHECK(r.strides() == Shape{5, 1});
  check_view_of(x, r, {4, 5}, [](const std::vector<int64_t>& i) { return std::vector<int64_t>{1, i[0], i[1]}; });
  Tensor e = x[-1][2][-2];
  CHECK(e.dim() == 0);
  CHECK(e.storage_offset() == 2 * 20 + 2 * 5 + 3);
  check_view_of(x, e, {}, [](const std::vector<int64_t>&) { return std::vector<int64_t>{2, 2, 3}; });
  CHECK_THROWS_WITH_AS(x[3], doctest::Contains("select: index 3 is out of bounds for dimension 0 with size 3"), Error);
}
