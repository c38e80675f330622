// tensor({...}) literals: torch.tensor's dtype inference (float32 for floating numbers,
// int64 for integers, bool), nesting to any depth, options, exact large integers, empty
// lists, and ragged lists named by their offending row.
#include <cstdint>
#include <limits>
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("tensor literals infer torch.tensor's dtypes") {
  const Tensor f = tensor({1.0, 2.0, 3.0});
  CHECK(f.dtype() == kFloat32);
  CHECK(f.sizes() == Shape{3});
  CHECK(f.to_vector<float>() == std::vector<float>{1, 2, 3});
  const Tensor i = tensor({1, 2, 3});
  CHECK(i.dtype() == kInt64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
  const Tensor b = tensor({true, false});
  CHECK(b.dtype() == kBool);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, false});
  const Tensor mixed = tensor({1, 2.5, true});  // one floating number makes all floating
  CHECK(mixed.dtype() == kFloat32);
  CHECK(mixed.to_vector<float>() == std::vector<float>{1, 2.5f, 1});
  CHECK(tensor({1, true}).dtype() == kInt64);
  CHECK(tensor({1.5f, 2.5f}).dtype() == kFloat32);
  CHECK(tensor({Half(1.5f)}).dtype() == kFloat32);  // torch.tensor of any float: the default dtype
}

TEST_CASE("nested tensor literals give row-major tensors of any depth") {
  const Tensor m = tensor({{1, 2}, {3, 4}});
  CHECK(m.sizes() == Shape{2, 2});
  CHECK(m.dtype() == kInt64);
  CHECK(m.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4});
  const Tensor col = tensor({{1.5}, {2.5}});  // a column: [2, 1], not a list of two numbers
  CHECK(col.sizes() == Shape{2, 1});
  const Tensor cube = tensor({{{1, 2, 3}, {4, 5, 6}}, {{7, 8, 9}, {10, 11, 12}}});
  CHECK(cube.sizes() == Shape{2, 2, 3});
  CHECK(equal(cube, arange(1, 13).view({2, 2, 3})));
  CHECK(tensor({{{0.5}}}).sizes() == Shape{1, 1, 1});
}

TEST_CASE("tensor literals: numbers, one-element and empty lists") {
  const Tensor s = tensor(3.5);
  CHECK(s.dim() == 0);
  CHECK(s.dtype() == kFloat32);
  CHECK(s.item<double>() == 3.5);
  CHECK(tensor(7).dtype() == kInt64);
  CHECK(tensor(false).dtype() == kBool);
  CHECK(tensor({5}).sizes() == Shape{1});
  const Tensor e = tensor({});
  CHECK(e.sizes() == Shape{0});
  CHECK(e.dtype() == kFloat32);  // torch.tensor([]) is float32
  CHECK(tensor({{}, {}}).sizes() == Shape{2, 0});
}

TEST_CASE("tensor literals with options: dtype, requires_grad") {
  const Tensor h = tensor({1, 2}, kFloat16);
  CHECK(h.dtype() == kFloat16);
  CHECK(h.to_vector<float>() == std::vector<float>{1, 2});
  CHECK(tensor({1.7, -1.7}, kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, -1});  // truncates, as torch
  CHECK(tensor({0.1}, kFloat64).item<double>() == 0.1);  // float64 keeps every bit of the literal
  const Tensor g = tensor({1.0, 2.0}, TensorOptions(kFloat32).requires_grad(true));
  CHECK(g.requires_grad());
  CHECK_THROWS_WITH_AS(tensor({1, 2}, TensorOptions(kInt64).requires_grad(true)),
                       doctest::Contains("only floating point tensors can require gradients"), Error);
}

TEST_CASE("tensor literals keep large int64 values exact") {
  const int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(tensor({big, big - 1, std::numeric_limits<int64_t>::min()}).to_vector<int64_t>() ==
        std::vector<int64_t>{big, big - 1, std::numeric_limits<int64_t>::min()});
}

TEST_CASE("ragged tensor literals are errors naming the offending row") {
  CHECK_THROWS_WITH_AS(tensor({{1, 2}, {3}}),
                       "tensor: ragged nested list: row [1] has 1 elements, expected 2 (as row [0])", Error);
  CHECK_THROWS_WITH_AS(tensor({{1, 2}, {3, 4}, {5, 6, 7}}),
                       "tensor: ragged nested list: row [2] has 3 elements, expected 2 (as row [0])", Error);
  CHECK_THROWS_WITH_AS(tensor({{{1}, {2}}, {{3}, {4, 5}}}),
                       "tensor: ragged nested list: row [1, 1] has 2 elements, expected 1 (as row [0, 0])", Error);
  CHECK_THROWS_WITH_AS(tensor({{1, 2}, 3}),
                       "tensor: ragged nested list: element [1] is the number 3, expected a list of 2 (as row [0])",
                       Error);
  CHECK_THROWS_WITH_AS(tensor({1, {2, 3}}),
                       "tensor: ragged nested list: row [1] is a list, expected a number (as at [0])", Error);
}
