// The method forms declared in tensor/tensor.h ("ops as methods"): each forwards to the
// free function of the same name with the same arguments, so x.sum(1) and sum(x, {1}) are
// one op call (one scope, one kernel). Defined here because tensor/ must not include ops/.
#include "binary.h"
#include "clamp.h"
#include "comparison.h"
#include "indexing.h"
#include "masked_fill.h"
#include "matmul.h"
#include "reduce.h"
#include "softmax.h"
#include "unary.h"

namespace kiln {

Tensor Tensor::sum() const { return kiln::sum(*this); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return kiln::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return kiln::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return kiln::mean(*this, dims, keepdim); }
Tensor Tensor::max() const { return kiln::max(*this); }
Tensor Tensor::max(const Shape& dims, bool keepdim) const { return kiln::max(*this, dims, keepdim); }
Tensor Tensor::min() const { return kiln::min(*this); }
Tensor Tensor::min(const Shape& dims, bool keepdim) const { return kiln::min(*this, dims, keepdim); }
Tensor Tensor::amax(const Shape& dims, bool keepdim) const { return kiln::amax(*this, dims, keepdim); }
Tensor Tensor::amin(const Shape& dims, bool keepdim) const { return kiln::amin(*this, dims, keepdim); }
Tensor Tensor::argmax() const { return kiln::argmax(*this); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return kiln::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin() const { return kiln::argmin(*this); }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const { return kiln::argmin(*this, dim, keepdim); }

Tensor Tensor::exp() const { return kiln::exp(*this); }
Tensor Tensor::log() const { return kiln::log(*this); }
Tensor Tensor::sqrt() const { return kiln::sqrt(*this); }
Tensor Tensor::rsqrt() const { return kiln::rsqrt(*this); }
Tensor Tensor::abs() const { return kiln::abs(*this); }
Tensor Tensor::neg() const { return kiln::neg(*this); }
Tensor Tensor::tanh() const { return kiln::tanh(*this); }
Tensor Tensor::sigmoid() const { return kiln::sigmoid(*this); }
Tensor Tensor::relu() const { return kiln::relu(*this); }
Tensor Tensor::gelu(std::string_view approximate) const { return kiln::gelu(*this, approximate); }
Tensor Tensor::silu() const { return kiln::silu(*this); }

Tensor Tensor::pow(const Tensor& exponent) const { return kiln::pow(*this, exponent); }
Tensor Tensor::pow(const Scalar& exponent) const { return kiln::pow(*this, exponent); }
Tensor Tensor::add(const Tensor& other, const Scalar& alpha) const { return kiln::add(*this, other, alpha); }
Tensor Tensor::add(const Scalar& other, const Scalar& alpha) const { return kiln::add(*this, other, alpha); }
Tensor Tensor::sub(const Tensor& other, const Scalar& alpha) const { return kiln::sub(*this, other, alpha); }
Tensor Tensor::sub(const Scalar& other, const Scalar& alpha) const { return kiln::sub(*this, other, alpha); }
Tensor Tensor::mul(const Tensor& other) const { return kiln::mul(*this, other); }
Tensor Tensor::mul(const Scalar& other) const { return kiln::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return kiln::div(*this, other); }
Tensor Tensor::div(const Scalar& other) const { return kiln::div(*this, other); }

Tensor Tensor::matmul(const Tensor& other) const { return kiln::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return kiln::mm(*this, other); }
Tensor Tensor::softmax(int64_t dim) const { return kiln::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return kiln::log_softmax(*this, dim); }

Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return kiln::clamp(*this, min, max);
}
Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) { return kiln::clamp_(*this, min, max); }
Tensor Tensor::clamp_min(const Scalar& min) const { return kiln::clamp_min(*this, min); }
Tensor Tensor::clamp_max(const Scalar& max) const { return kiln::clamp_max(*this, max); }
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const {
  return kiln::masked_fill(*this, mask, value);
}
Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& value) { return kiln::masked_fill_(*this, mask, value); }

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return kiln::index_select(*this, dim, index); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return kiln::gather(*this, dim, index); }
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return kiln::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Scalar& value) const {
  return kiln::scatter(*this, dim, index, value);
}
Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) {
  return kiln::scatter_(*this, dim, index, src);
}
Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Scalar& value) {
  return kiln::scatter_(*this, dim, index, value);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return kiln::scatter_add(*this, dim, index, src);
}
Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  return kiln::scatter_add_(*this, dim, index, src);
}

Tensor Tensor::eq(const Tensor& other) const { return kiln::eq(*this, other); }
Tensor Tensor::eq(const Scalar& other) const { return kiln::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return kiln::ne(*this, other); }
Tensor Tensor::ne(const Scalar& other) const { return kiln::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return kiln::lt(*this, other); }
Tensor Tensor::lt(const Scalar& other) const { return kiln::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return kiln::le(*this, other); }
Tensor Tensor::le(const Scalar& other) const { return kiln::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return kiln::gt(*this, other); }
Tensor Tensor::gt(const Scalar& other) const { return kiln::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return kiln::ge(*this, other); }
Tensor Tensor::ge(const Scalar& other) const { return kiln::ge(*this, other); }
bool Tensor::equal(const Tensor& other) const { return kiln::equal(*this, other); }

}  // namespace kiln
