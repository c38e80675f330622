// DType metadata and PyTorch's type-promotion lattice, checked against a table written out
// by hand from torch.promote_types (not derived from Kiln's rules), plus Scalar's kinds,
// conversions and the dtype a bare number takes.
#include <limits>

#include "testing.h"

using namespace kiln;

namespace {
const std::vector<DType> kAllTypes = {kBool, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};
}  // namespace

TEST_CASE("element_size and dtype_name for every dtype") {
  CHECK(element_size(kBool) == 1);
  CHECK(element_size(kInt32) == 4);
  CHECK(element_size(kInt64) == 8);
  CHECK(element_size(kFloat16) == 2);
  CHECK(element_size(kBFloat16) == 2);
  CHECK(element_size(kFloat32) == 4);
  CHECK(element_size(kFloat64) == 8);
  // The sizes must agree with the C++ element types the kernels use.
  CHECK(element_size(dtype_of<bool>()) == sizeof(bool));
  CHECK(element_size(dtype_of<int32_t>()) == sizeof(int32_t));
  CHECK(element_size(dtype_of<int64_t>()) == sizeof(int64_t));
  CHECK(element_size(dtype_of<Half>()) == sizeof(Half));
  CHECK(element_size(dtype_of<BFloat16>()) == sizeof(BFloat16));
  CHECK(element_size(dtype_of<float>()) == sizeof(float));
  CHECK(element_size(dtype_of<double>()) == sizeof(double));

  CHECK(dtype_name(kBool) == "bool");
  CHECK(dtype_name(kInt32) == "int32");
  CHECK(dtype_name(kInt64) == "int64");
  CHECK(dtype_name(kFloat16) == "float16");
  CHECK(dtype_name(kBFloat16) == "bfloat16");
  CHECK(dtype_name(kFloat32) == "float32");
  CHECK(dtype_name(kFloat64) == "float64");
  CHECK(fmt::format("{}", kBFloat16) == "bfloat16");
  CHECK(fmt::format("[{:>8}]", kInt32) == "[   int32]");

  CHECK(kNumDTypes == static_cast<int>(kAllTypes.size()));
}

TEST_CASE("dtype aliases and dtype_of map to the PyTorch names") {
  CHECK(kInt == DType::Int32);
  CHECK(kLong == DType::Int64);
  CHECK(kHalf == DType::Float16);
  CHECK(kFloat == DType::Float32);
  CHECK(kDouble == DType::Float64);
  CHECK(dtype_of<bool>() == kBool);
  CHECK(dtype_of<int32_t>() == kInt32);
  CHECK(dtype_of<int64_t>() == kInt64);
  CHECK(dtype_of<Half>() == kFloat16);
  CHECK(dtype_of<BFloat16>() == kBFloat16);
  CHECK(dtype_of<float>() == kFloat32);
  CHECK(dtype_of<double>() == kFloat64);
}

TEST_CASE("is_floating and is_integral partition the dtypes, bool in neither") {
  for (DType t : kAllTypes) {
    INFO("dtype " << dtype_name(t));
    const bool want_float = t == kFloat16 || t == kBFloat16 || t == kFloat32 || t == kFloat64;
    const bool want_int = t == kInt32 || t == kInt64;
    CHECK(is_floating(t) == want_float);
    CHECK(is_integral(t) == want_int);
    CHECK_FALSE((is_floating(t) && is_integral(t)));
  }
  CHECK_FALSE(is_floating(kBool));
  CHECK_FALSE(is_integral(kBool));
  // The tensor-level query agrees.
  CHECK(zeros({1}, kBFloat16).is_floating_point());
  CHECK_FALSE(zeros({1}, kInt32).is_floating_point());
  CHECK_FALSE(zeros({1}, kBool).is_floating_point());
}

TEST_CASE("promote_types matches torch.promote_types for every pair") {
  // Rows and columns in the order bool, int32, int64, float16, bfloat16, float32, float64,
  // transcribed from torch.promote_types(a, b).
  const DType B = kBool, I = kInt32, L = kInt64, H = kFloat16, BF = kBFloat16, F = kFloat32, D = kFloat64;
  const DType table[7][7] = {
      /* bool     */ {B, I, L, H, BF, F, D},
      /* int32    */ {I, I, L, H, BF, F, D},
      /* int64    */ {L, L, L, H, BF, F, D},
      /* float16  */ {H, H, H, H, F, F, D},
      /* bfloat16 */ {BF, BF, BF, F, BF, F, D},
      /* float32  */ {F, F, F, F, F, F, D},
      /* float64  */ {D, D, D, D, D, D, D},
  };
  for (size_t a = 0; a < kAllTypes.size(); ++a) {
    for (size_t b = 0; b < kAllTypes.size(); ++b) {
      INFO(dtype_name(kAllTypes[a]) << " with " << dtype_name(kAllTypes[b]));
      CHECK(promote_types(kAllTypes[a], kAllTypes[b]) == table[a][b]);
    }
  }
}

TEST_CASE("Scalar remembers how a number was written") {
  const Scalar b = true, i = 3, l = int64_t{-7}, u = uint8_t{200}, f = 2.5f, d = -0.75;
  CHECK(b.kind() == Scalar::Kind::Bool);
  CHECK(b.is_bool());
  CHECK_FALSE(b.is_integral());
  CHECK(i.kind() == Scalar::Kind::Integral);
  CHECK(l.is_integral());
  CHECK(u.is_integral());
  CHECK(f.kind() == Scalar::Kind::Floating);
  CHECK(d.is_floating());
  CHECK_FALSE(d.is_integral());
  CHECK(Scalar(Half(1.5f)).is_floating());
  CHECK(Scalar(BFloat16(1.5f)).is_floating());
  // A default-constructed Scalar is the integer 0.
  CHECK(Scalar().is_integral());
  CHECK(Scalar().to_int() == 0);

  CHECK(b.default_dtype() == kBool);
  CHECK(i.default_dtype() == kInt64);
  CHECK(l.default_dtype() == kInt64);
  CHECK(f.default_dtype() == kFloat32);
  CHECK(d.default_dtype() == kFloat32);  // PyTorch's default dtype, not float64
  CHECK(Scalar(Half(1.0f)).default_dtype() == kFloat32);
}

TEST_CASE("Scalar conversions") {
  CHECK(Scalar(-2.75).to_int() == -2);  // truncation toward zero
  CHECK(Scalar(2.75).to_int() == 2);
  CHECK(Scalar(-2.75).to_double() == -2.75);
  CHECK(Scalar(int64_t{1} << 53).to_double() == 9007199254740992.0);
  CHECK(Scalar(int64_t{-5}).to_double() == -5.0);
  CHECK(Scalar(true).to_int() == 1);
  CHECK(Scalar(true).to_double() == 1.0);
  CHECK(Scalar(false).to_double() == 0.0);
  CHECK(Scalar(0.25).to_bool());
  CHECK_FALSE(Scalar(0.0).to_bool());
  CHECK(Scalar(-3).to_bool());
  CHECK_FALSE(Scalar(0).to_bool());
  CHECK(Scalar(std::numeric_limits<double>::quiet_NaN()).to_bool());  // NaN is non-zero

  CHECK(Scalar(-1.9).to<int32_t>() == -1);
  CHECK(Scalar(int64_t{5'000'000'000}).to<int64_t>() == 5'000'000'000);
  CHECK(Scalar(3).to<double>() == 3.0);
  CHECK(Scalar(0.1).to<double>() == 0.1);
  CHECK(Scalar(0.1).to<float>() == 0.1f);
  CHECK(static_cast<float>(Scalar(0.1).to<Half>()) == static_cast<float>(Half(0.1f)));
  CHECK(static_cast<float>(Scalar(0.1).to<BFloat16>()) == static_cast<float>(BFloat16(0.1f)));
  CHECK(Scalar(2).to<bool>());
  CHECK_FALSE(Scalar(0.0).to<bool>());
  CHECK(Scalar(Half(1.5f)).to_double() == 1.5);
}

TEST_CASE("Scalar prints as written") {
  CHECK(Scalar(2).str() == "2");
  CHECK(Scalar(int64_t{-40}).str() == "-40");
  CHECK(Scalar(0.5).str() == "0.5");
  CHECK(Scalar(true).str() == "True");
  CHECK(Scalar(false).str() == "False");
  CHECK(fmt::format("{}", Scalar(1.25f)) == "1.25");
}
