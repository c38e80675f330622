// nn::Embedding: its weight parameter, PyTorch's N(0, 1) initialisation (checked by the
// empirical mean and variance of a large table), forward against the rows picked here, and
// its repr.
#include <cmath>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("Embedding registers weight [num_embeddings, embedding_dim] and picks its rows") {
  manual_seed(71);
  nn::Embedding table(10, 3);
  CHECK(table.num_embeddings == 10);
  CHECK(table.embedding_dim == 3);
  CHECK(table.weight.sizes() == Shape{10, 3});
  CHECK(table.weight.requires_grad());
  const auto named = table.named_parameters();
  REQUIRE(named.size() == 1);
  CHECK(named[0].first == "weight");
  CHECK(named[0].second.is_same(table.weight));
  const Tensor indices = tensor({{9, 0}, {3, 3}});
  const Tensor y = table.forward(indices);
  CHECK(y.sizes() == Shape{2, 2, 3});
  const std::vector<double> w = values(table.weight);
  std::vector<double> want;
  for (int64_t i : {9, 0, 3, 3})
    for (int64_t c = 0; c < 3; ++c) want.push_back(w[static_cast<size_t>(i * 3 + c)]);
  check_close(y, want, {2, 2, 3}, Tolerance{0, 0});
  CHECK_THROWS_WITH_AS(table.forward(tensor({10})), doctest::Contains("embedding: index 10 is out of bounds"), Error);
}

TEST_CASE("Embedding's weight is drawn from N(0, 1)") {
  manual_seed(72);
  nn::Embedding table(1000, 100);
  const std::vector<double> w = values(table.weight);
  double mean = 0, var = 0;
  for (double v : w) mean += v;
  mean /= static_cast<double>(w.size());
  for (double v : w) var += (v - mean) * (v - mean);
  var /= static_cast<double>(w.size() - 1);
  // 10^5 draws: the mean's standard error is 0.003, the variance's about 0.0045.
  CHECK(std::abs(mean) < 0.015);
  CHECK(std::abs(var - 1.0) < 0.025);
}

TEST_CASE("Embedding's repr and bad sizes") {
  CHECK(nn::Embedding(7, 2).extra_repr() == "7, 2");
  CHECK_THROWS_WITH_AS(nn::Embedding(-1, 2), doctest::Contains("Embedding: num_embeddings and embedding_dim must be "
                                                               "non-negative, got -1 and 2"),
                       Error);
}
