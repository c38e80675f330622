// DistributedSampler (examples/data): against a literal transcription of PyTorch's algorithm
// (shuffle, pad by repeating the order or cut it, take every num_replicas-th index from the
// rank): the shards cover the data set, are disjoint apart from the padding, have equal
// lengths, change with the epoch and not with the rank's view of it; and the errors.
#include <doctest/doctest.h>
#include <examples/data/data_loader.h>
#include <examples/data/distributed_sampler.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

using namespace kiln;
using namespace kiln::data;

namespace {

// PyTorch's DistributedSampler.__iter__, step by step, on the same shuffled order.
std::vector<int64_t> reference(int64_t n, int64_t world, int64_t rank, bool shuffle, uint64_t seed, int64_t epoch,
                               bool drop_last) {
  std::vector<int64_t> indices(static_cast<size_t>(n));
  std::iota(indices.begin(), indices.end(), int64_t{0});
  if (shuffle) indices = epoch_permutation(n, seed, epoch);
  int64_t num_samples = 0;
  if (drop_last && n % world != 0) num_samples = static_cast<int64_t>(std::ceil(double(n - world) / double(world)));
  else num_samples = static_cast<int64_t>(std::ceil(double(n) / double(world)));
  const int64_t total = num_samples * world;
  if (!drop_last) {
    const int64_t padding = total - n;
    std::vector<int64_t> extra;
    while (static_cast<int64_t>(extra.size()) < padding) extra.insert(extra.end(), indices.begin(), indices.end());
    extra.resize(static_cast<size_t>(std::max<int64_t>(padding, 0)));
    indices.insert(indices.end(), extra.begin(), extra.end());
  } else {
    indices.resize(static_cast<size_t>(total));
  }
  std::vector<int64_t> out;
  for (int64_t k = rank; k < total; k += world) out.push_back(indices[static_cast<size_t>(k)]);
  return out;
}

}  // namespace

TEST_CASE("DistributedSampler matches PyTorch's algorithm for every rank, padding and drop_last") {
  for (int64_t n : {0, 1, 2, 3, 7, 10, 64, 101})
    for (int64_t world : {1, 2, 3, 4, 8, 13})
      for (bool drop_last : {false, true})
        for (bool shuffle : {false, true}) {
          CAPTURE(n);
          CAPTURE(world);
          CAPTURE(drop_last);
          CAPTURE(shuffle);
          std::map<int64_t, int64_t> count;
          for (int64_t rank = 0; rank < world; ++rank) {
            DistributedSampler s(n, world, rank, {.shuffle = shuffle, .seed = 42, .drop_last = drop_last});
            for (int64_t epoch : {0, 3}) {
              s.set_epoch(epoch);
              CHECK(s.epoch() == epoch);
              const std::vector<int64_t> got = s.indices();
              CHECK(got == reference(n, world, rank, shuffle, 42, epoch, drop_last));
              CHECK(static_cast<int64_t>(got.size()) == s.num_samples());
              if (epoch == 0)
                for (int64_t i : got) ++count[i];
            }
          }
          // Epoch 0's shards: with drop_last, disjoint; without, they cover every sample and
          // the total is n plus the padding.
          int64_t total = 0;
          for (const auto& [i, c] : count) {
            CHECK(i >= 0);
            CHECK(i < n);
            total += c;
            if (drop_last) CHECK(c == 1);
          }
          if (!drop_last && n > 0) CHECK(static_cast<int64_t>(count.size()) == n);
          CHECK(total == (n == 0 && !drop_last ? 0 : DistributedSampler(n, world, 0, {.drop_last = drop_last}).total_size()));
          CHECK(DistributedSampler(n, world, 0, {.drop_last = drop_last}).total_size() % world == 0);
        }
}

TEST_CASE("DistributedSampler: the order depends on seed and epoch; the same on every rank's view") {
  DistributedSampler a(1000, 4, 1, {.seed = 7}), b(1000, 4, 1, {.seed = 7}), c(1000, 4, 1, {.seed = 8});
  CHECK(a.indices() == b.indices());
  CHECK(a.indices() != c.indices());
  const std::vector<int64_t> epoch0 = a.indices();
  a.set_epoch(1);
  CHECK(a.indices() != epoch0);
  CHECK(a.num_samples() == 250);
  CHECK(a.rank() == 1);
  CHECK(a.num_replicas() == 4);
  // Without shuffle, rank r gets r, r + W, r + 2W, ... and wraps around to the start.
  DistributedSampler plain(10, 4, 3, {.shuffle = false});
  CHECK(plain.indices() == std::vector<int64_t>{3, 7, 1});
  // Padding longer than the data set wraps more than once (PyTorch repeats the order).
  DistributedSampler tiny(2, 5, 4, {.shuffle = false});
  CHECK(tiny.indices() == std::vector<int64_t>{0});
  CHECK(DistributedSampler(2, 5, 0, {.drop_last = true}).indices().empty());
}

TEST_CASE("DistributedSampler rejects bad sizes, ranks and epochs, naming the values") {
  CHECK_THROWS_WITH_AS(DistributedSampler(-1, 2, 0), doctest::Contains("DistributedSampler: dataset_size must be >= 0, got -1"),
                       Error);
  CHECK_THROWS_WITH_AS(DistributedSampler(10, 0, 0), doctest::Contains("DistributedSampler: num_replicas must be >= 1, got 0"),
                       Error);
  CHECK_THROWS_WITH_AS(DistributedSampler(10, 2, 2),
                       doctest::Contains("DistributedSampler: invalid rank 2, rank should be in the interval [0, 1]"), Error);
  CHECK_THROWS_WITH_AS(DistributedSampler(10, 2, -1), doctest::Contains("invalid rank -1"), Error);
  CHECK_THROWS_WITH_AS(DistributedSampler(std::numeric_limits<int64_t>::max(), 3, 0),
                       doctest::Contains("padded to a multiple of num_replicas 3 overflows int64"), Error);
  DistributedSampler s(10, 2, 0);
  CHECK_THROWS_WITH_AS(s.set_epoch(-2), doctest::Contains("DistributedSampler::set_epoch: epoch must be >= 0, got -2"),
                       Error);
}
