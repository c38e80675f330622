// masked_fill and masked_fill_ against a float64 reference: every dtype and layout, masks
// that broadcast (and, out of place, a tensor that broadcasts to the mask), the value's
// conversion to the dtype, a mask aliasing the target, zero-size and 0-dim inputs, and the
// error paths.
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const std::vector<DType> kAllTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};

// mask ? value : x over the broadcast shape of x and mask.
std::vector<double> reference_masked_fill(const Tensor& x, const Tensor& mask, double value) {
  return reference_binary(x, mask, [value](double v, double m) { return m != 0 ? value : v; });
}

Tolerance exact() { return {0, 0}; }

}  // namespace

TEST_CASE("masked_fill matches the reference for every dtype, layout and mask shape") {
  manual_seed(501);
  const Shape shape{3, 5, 7};
  for (DType dtype : kAllTypes) {
    for (Layout layout : kLayouts) {
      for (const Shape& mask_shape : {Shape{3, 5, 7}, Shape{5, 1}, Shape{7}, Shape{}}) {
        CAPTURE(dtype_name(dtype));
        INFO("layout: " << std::string(layout_name(layout)));
        CAPTURE(shape_str(mask_shape));
        const Tensor x = random_with_layout(shape, layout, dtype, -4, 4);
        const Tensor mask = mask_shape.size() >= 2 ? random_with_layout(mask_shape, Layout::Transposed, kBool)
                                                   : random(mask_shape, kBool);
        // 2.75 stored in the dtype: 2 in integers, true in bool.
        const double value = round_to(2.75, dtype);
        const std::vector<double> before = values(x);
        const Tensor y = masked_fill(x, mask, 2.75);
        CHECK(y.dtype() == dtype);
        check_close(y, reference_masked_fill(x, mask, value), shape, exact());
        CHECK(values(x) == before);
        if (layout != Layout::Expanded) {
          Tensor z = layout == Layout::Transposed ? x.transpose(-1, -2).contiguous().transpose(-1, -2) : x.clone();
          Tensor& same = masked_fill_(z, mask, 2.75);
          CHECK(same.is_same(z));
          check_close(z, reference_masked_fill(x, mask, value), shape, exact());
        }
      }
    }
  }
}

TEST_CASE("masked_fill out of place broadcasts the tensor to the mask, as torch.masked_fill") {
  const Tensor x = tensor({1.0, 2.0, 3.0});
  const Tensor mask = tensor({{true, false, false}, {false, false, true}});
  const Tensor y = masked_fill(x, mask, -1);
  CHECK(y.sizes() == Shape{2, 3});
  check_close(y, {-1, 2, 3, 1, 2, -1}, {2, 3}, exact());
  Tensor z = x.clone();
  CHECK_THROWS_WITH_AS(masked_fill_(z, mask, 0),
                       "masked_fill_: mask of shape [2, 3] cannot be broadcast to the tensor's shape [3]", Error);
  CHECK(equal(z, x));
}

TEST_CASE("masked_fill_ with a mask that is a view of the target reads the mask first") {
  // x is bool and the mask is the element before each of x's: filled in place one by one,
  // each write would turn the next mask element on and the fill would cascade to the end.
  Tensor base = tensor({true, false, false, false, false, false});
  Tensor x = base.narrow(0, 1, 5);
  const Tensor mask = base.narrow(0, 0, 5);  // [true, false, false, false, false]
  masked_fill_(x, mask, true);
  CHECK(base.to_vector<bool>() == std::vector<bool>{true, true, false, false, false, false});
}

TEST_CASE("masked_fill of zero-size and 0-dim tensors") {
  CHECK(masked_fill(zeros({0, 3}), zeros({3}, kBool), 1).sizes() == Shape{0, 3});
  CHECK(masked_fill(tensor(2.0), tensor(true), 5).item<double>() == 5.0);
  CHECK(masked_fill(tensor(2.0), tensor(false), 5).item<double>() == 2.0);
}

TEST_CASE("masked_fill errors: mask dtype and shape, expanded target, undefined") {
  const Tensor x = ones({2, 3});
  CHECK_THROWS_WITH_AS(masked_fill(x, ones({2, 3}), 0), "masked_fill: expected a bool mask, got dtype float32", Error);
  CHECK_THROWS_WITH_AS(masked_fill(x, zeros({4}, kBool), 0),
                       doctest::Contains("masked_fill: shapes [2, 3] and [4] cannot be broadcast"), Error);
  Tensor e = ones({1, 3}).expand({2, 3});
  CHECK_THROWS_WITH_AS(masked_fill_(e, zeros({2, 3}, kBool), 0),
                       doctest::Contains("masked_fill_: the tensor (shape [2, 3], strides [0, 1]) has elements that "
                                         "share memory"),
                       Error);
  CHECK_THROWS_WITH_AS(masked_fill(x, Tensor(), 0), "masked_fill: argument 'mask' is an undefined tensor", Error);
}

TEST_CASE("masked_fill method forms equal the free functions") {
  manual_seed(502);
  const Tensor x = random({4, 5});
  const Tensor mask = random({4, 5}, kBool);
  CHECK(equal(x.masked_fill(mask, 7), masked_fill(x, mask, 7)));
  Tensor a = x.clone();
  CHECK(&a.masked_fill_(mask, 7) == &a);
  CHECK(equal(a, masked_fill(x, mask, 7)));
}
