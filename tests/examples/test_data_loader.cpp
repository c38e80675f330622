// DataLoader and epoch_permutation (examples/data): every sample exactly once per epoch,
// x and y rows kept together, batch sizes with and without drop_last, the order a function
// of (seed, epoch) alone, the shuffle unbiased, both placements, and the errors. On a CUDA
// machine the device batches must equal the CPU ones bit for bit.
#include <doctest/doctest.h>
#include <examples/data/data_loader.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace kiln;
using namespace kiln::data;

namespace {

// x[i] = [i, -i / 2, i * 0.25] (float32), y[i] = 1000 + i (int64): each row names its sample.
std::pair<Tensor, Tensor> numbered(int64_t n) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i) {
    x.insert(x.end(), {static_cast<float>(i), -static_cast<float>(i) / 2, static_cast<float>(i) * 0.25f});
    y.push_back(1000 + i);
  }
  return {from_vector(x, {n, 3}), from_vector(y, {n})};
}

// The samples of one epoch, checking each batch's shape, rows and pairing on the way.
std::vector<int64_t> walk(const DataLoader& loader, int64_t e) {
  const DataLoaderOptions& o = loader.options();
  DataLoader::Epoch epoch = loader.epoch(e);
  CHECK(epoch.size() == loader.num_batches());
  std::vector<int64_t> seen;
  int64_t expect_index = 0;
  for (const Batch& b : epoch) {
    CHECK(b.index == expect_index++);
    CHECK(b.x.device() == o.device);
    CHECK(b.y.device() == o.device);
    CHECK(b.x.sizes() == Shape{b.size, 3});
    CHECK(b.y.sizes() == Shape{b.size});
    if (o.drop_last) CHECK(b.size == o.batch_size);
    const std::vector<float> x = b.x.to_vector<float>();
    const std::vector<int64_t> y = b.y.to_vector<int64_t>();
    for (int64_t r = 0; r < b.size; ++r) {
      const int64_t i = y[r] - 1000;
      REQUIRE(x[3 * r] == static_cast<float>(i));
      REQUIRE(x[3 * r + 1] == -static_cast<float>(i) / 2);
      REQUIRE(x[3 * r + 2] == static_cast<float>(i) * 0.25f);
      seen.push_back(i);
    }
  }
  CHECK(expect_index == epoch.size());
  // The batches follow the epoch's order.
  CHECK(std::equal(seen.begin(), seen.end(), epoch.order().begin()));
  return seen;
}

}  // namespace

TEST_CASE("epoch_permutation is a permutation, fixed by (seed, epoch), different across both") {
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<int64_t> p = epoch_permutation(n, 5, 3);
    std::vector<int64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> iota(static_cast<size_t>(n));
    std::iota(iota.begin(), iota.end(), 0);
    CHECK(sorted == iota);
    CHECK(epoch_permutation(n, 5, 3) == p);
  }
  const std::vector<int64_t> a = epoch_permutation(1000, 5, 3);
  CHECK(epoch_permutation(1000, 5, 4) != a);
  CHECK(epoch_permutation(1000, 6, 3) != a);
  CHECK(epoch_permutation(1000, 5 + (uint64_t{1} << 32), 3) != a);  // the seed's high half counts
  CHECK(epoch_permutation(1000, 5, 3 + (int64_t{1} << 32)) != a);   // and the epoch's
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  CHECK(a != iota);
  // The standard fixes std::mt19937_64 and std::seed_seq bit for bit, so an order is the
  // same with every compiler and library. These come from tests/examples/epoch_permutation_ref.py,
  // a Python transcription of the standard's algorithms and of the documented shuffle.
  CHECK(epoch_permutation(8, 42, 1) == std::vector<int64_t>{3, 4, 1, 2, 5, 0, 7, 6});
  CHECK(epoch_permutation(10, 0, 0) == std::vector<int64_t>{8, 2, 3, 5, 1, 6, 9, 7, 0, 4});
  CHECK(epoch_permutation(12, (uint64_t{1} << 40) + 5, (int64_t{1} << 33) + 2) ==
        std::vector<int64_t>{0, 5, 7, 1, 4, 3, 10, 11, 6, 9, 8, 2});
}

TEST_CASE("epoch_permutation is unbiased: each element lands in each position equally often") {
  // 6,000 shuffles of 5 elements: each (element, position) count is Binomial(6000, 1/5),
  // mean 1200 and standard deviation 31; all 25 counts within 5 standard deviations. The
  // seeds are fixed, so the test is deterministic; a biased draw (e.g. r % bound without
  // rejection on a small engine) or an off-by-one Fisher-Yates fails it by far.
  const int n = 5, trials = 6000;
  std::vector<std::vector<int>> count(n, std::vector<int>(n, 0));
  for (int t = 0; t < trials; ++t) {
    std::vector<int64_t> p = epoch_permutation(n, 77, t);
    for (int pos = 0; pos < n; ++pos) ++count[p[pos]][pos];
  }
  const double mean = trials / 5.0, sd = std::sqrt(trials * 0.2 * 0.8);
  for (int e = 0; e < n; ++e)
    for (int pos = 0; pos < n; ++pos) {
      CAPTURE(e);
      CAPTURE(pos);
      CHECK(std::abs(count[e][pos] - mean) < 5 * sd);
    }
}

TEST_CASE("DataLoader visits every sample exactly once per epoch") {
  for (Placement placement : {Placement::Device, Placement::Host})
    for (bool shuffle : {true, false})
      for (int64_t batch : {1, 7, 10, 64, 70, 100}) {
        CAPTURE(static_cast<int>(placement));
        CAPTURE(shuffle);
        CAPTURE(batch);
        auto [x, y] = numbered(70);
        DataLoader loader(x, y, {.batch_size = batch, .shuffle = shuffle, .seed = 9, .placement = placement});
        CHECK(loader.num_samples() == 70);
        CHECK(loader.num_batches() == (70 + batch - 1) / batch);
        for (int64_t e : {0, 1}) {
          std::vector<int64_t> seen = walk(loader, e);
          if (!shuffle) {
            std::vector<int64_t> iota(70);
            std::iota(iota.begin(), iota.end(), 0);
            CHECK(seen == iota);
          }
          std::sort(seen.begin(), seen.end());
          for (int64_t i = 0; i < 70; ++i) REQUIRE(seen[i] == i);
        }
        if (shuffle && batch < 70) CHECK(loader.epoch(0).order() != loader.epoch(1).order());
      }
}

TEST_CASE("DataLoader with drop_last: full batches only, the rest of the order left out") {
  for (Placement placement : {Placement::Device, Placement::Host}) {
    auto [x, y] = numbered(70);
    DataLoader loader(x, y, {.batch_size = 16, .drop_last = true, .seed = 3, .placement = placement});
    CHECK(loader.num_batches() == 4);
    std::vector<int64_t> seen = walk(loader, 2);
    CHECK(seen.size() == 64);
    const std::vector<int64_t> order = loader.epoch(2).order();
    CHECK(order.size() == 70);
    CHECK(std::equal(seen.begin(), seen.end(), order.begin()));
    // Fewer samples than a batch: no batch at all.
    auto [x2, y2] = numbered(5);
    DataLoader small(x2, y2, {.batch_size = 16, .drop_last = true, .placement = placement});
    CHECK(small.num_batches() == 0);
    CHECK(walk(small, 0).empty());
  }
  // A divisible size drops nothing.
  auto [x, y] = numbered(64);
  CHECK(DataLoader(x, y, {.batch_size = 16, .drop_last = true}).num_batches() == 4);
  CHECK(DataLoader(x, y, {.batch_size = 16, .drop_last = false}).num_batches() == 4);
}

TEST_CASE("DataLoader: the order depends on the seed and the epoch only") {
  auto [x, y] = numbered(50);
  DataLoader a(x, y, {.batch_size = 8, .seed = 123});
  DataLoader b(x, y, {.batch_size = 8, .seed = 123, .placement = Placement::Host});
  DataLoader c(x, y, {.batch_size = 8, .seed = 124});
  // Epochs can be drawn in any order (a resumed run starts at epoch k).
  std::vector<int64_t> a3 = walk(a, 3);
  walk(a, 0);
  CHECK(walk(a, 3) == a3);
  CHECK(walk(b, 3) == a3);
  CHECK(walk(c, 3) != a3);
  CHECK(a.epoch(3).order() == epoch_permutation(50, 123, 3));
  // An epoch's batches can be asked for in any order, and again.
  DataLoader::Epoch e = a.epoch(5);
  CHECK(e.batch(6).y.to_vector<int64_t>() == e.batch(6).y.to_vector<int64_t>());
  CHECK(e.batch(6).size == 2);
}

TEST_CASE("DataLoader: empty data sets, other dtypes and shapes") {
  auto [x, y] = numbered(0);
  DataLoader empty_loader(x, y, {.batch_size = 4});
  CHECK(empty_loader.num_batches() == 0);
  CHECK(empty_loader.epoch(0).begin() == empty_loader.epoch(0).end());
  // 3-D float64 inputs and 2-D int32 targets keep their trailing dims.
  Tensor x3 = arange(0, 24, 1, kFloat64).reshape({4, 3, 2});
  Tensor y2 = arange(0, 8, 1, kInt32).reshape({4, 2});
  DataLoader loader(x3, y2, {.batch_size = 3, .seed = 1});
  DataLoader::Epoch e = loader.epoch(0);
  Batch b = e.batch(0);
  CHECK(b.x.sizes() == Shape{3, 3, 2});
  CHECK(b.y.sizes() == Shape{3, 2});
  CHECK(b.x.dtype() == kFloat64);
  CHECK(b.y.dtype() == kInt32);
  const std::vector<double> xv = b.x.to_vector<double>();
  const std::vector<int32_t> yv = b.y.to_vector<int32_t>();
  for (int r = 0; r < 3; ++r) {
    const int64_t i = e.order()[r];
    for (int k = 0; k < 6; ++k) CHECK(xv[6 * r + k] == static_cast<double>(6 * i + k));
    for (int k = 0; k < 2; ++k) CHECK(yv[2 * r + k] == 2 * i + k);
  }
}

TEST_CASE("DataLoader: bad arguments") {
  auto [x, y] = numbered(10);
  CHECK_THROWS_WITH_AS(DataLoader(x, y, {.batch_size = 0}),
                       doctest::Contains("DataLoader: batch_size must be positive, got 0"), Error);
  CHECK_THROWS_WITH_AS(DataLoader(x, y.narrow(0, 0, 9), {}),
                       doctest::Contains("DataLoader: x has 10 samples (shape [10, 3]) but y has 9 (shape [9])"),
                       Error);
  CHECK_THROWS_WITH_AS(DataLoader(Tensor(), y, {}), doctest::Contains("DataLoader: x and y must be defined"), Error);
  CHECK_THROWS_WITH_AS(DataLoader(full({}, 1.0), y, {}),
                       doctest::Contains("DataLoader: x and y need a sample dim, got shapes [] and [10]"), Error);
  DataLoader loader(x, y, {.batch_size = 4});
  CHECK_THROWS_WITH_AS(loader.epoch(-1), doctest::Contains("DataLoader::epoch: epoch must be >= 0, got -1"), Error);
  CHECK_THROWS_WITH_AS(loader.epoch(0).batch(3),
                       doctest::Contains("DataLoader::Epoch::batch: batch 3 out of range [0, 3)"), Error);
  CHECK_THROWS_WITH_AS(epoch_permutation(-1, 0, 0), doctest::Contains("epoch_permutation: n must be >= 0, got -1"),
                       Error);
}

TEST_CASE("DataLoader on CUDA: batches equal the CPU's, for both placements") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: no CUDA device (the GPU check runs this)");
    return;
  }
  auto [x, y] = numbered(1000);
  const Device gpu = Device::cuda(0);
  for (Placement placement : {Placement::Device, Placement::Host})
    for (bool shuffle : {true, false}) {
      CAPTURE(static_cast<int>(placement));
      CAPTURE(shuffle);
      DataLoader dev(x, y, {.batch_size = 256, .shuffle = shuffle, .seed = 11, .device = gpu, .placement = placement});
      DataLoader ref(x, y, {.batch_size = 256, .shuffle = shuffle, .seed = 11});
      CHECK(walk(dev, 2) == walk(ref, 2));
      DataLoader::Epoch de = dev.epoch(1), re = ref.epoch(1);
      for (int64_t i = 0; i < de.size(); ++i) {
        Batch d = de.batch(i), r = re.batch(i);
        CHECK(d.x.is_cuda());
        CHECK(d.x.to_vector<float>() == r.x.to_vector<float>());
        CHECK(d.y.to_vector<int64_t>() == r.y.to_vector<int64_t>());
      }
    }
}
