// Factory ops and the in-place fills. Each is an op (it opens a scope and runs a kernel from
// the table), so the profiler and graph capture see factories as PyTorch users expect.
#include "factory.h"

#include <cmath>
#include <cstring>

#include "../tensor/make.h"
#include "../tensor/object_pool.h"
#include "../tensor/philox.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<FillKernel> fill_kernels;
KernelTable<ArangeKernel> arange_kernels;
KernelTable<RandomKernel> random_kernels;
}  // namespace dispatch

namespace {

// Factories check requires_grad up front, so the error names the factory the user called.
void check_grad_options(const char* op, const TensorOptions& options) {
  KILN_CHECK(!options.requires_grad() || is_floating(options.dtype()),
             "{}: only floating point tensors can require gradients, got dtype {}", op, options.dtype());
}

Tensor filled(const OpDesc& desc, const Shape& sizes, const Scalar& value, TensorOptions options) {
  const char* op = desc.name;
  check_grad_options(op, options);
  // full records its value; zeros and ones imply theirs.
  OpScope scope = desc.attrs.size() == 4 ? OpScope(desc, {}, sizes, value, options.dtype(), options.device())
                                         : OpScope(desc, {}, sizes, options.dtype(), options.device());
  Tensor out = new_contiguous(sizes, options.dtype(), options.device(), op);
  dispatch::fill_kernels.get(op, options.device())(out, value);
  if (options.requires_grad()) out.requires_grad_(true);
  return scope.output(out);
}

// Fills `t` from the default generator; a strided target gets a contiguous draw copied in,
// so element i of the logical order always receives the same number.
void fill_random(const char* op, Tensor& t, RandomDist dist, double a, double b) {
  KILN_CHECK(t.is_floating_point(), "{}: random values need a floating dtype, got {}", op, t.dtype());
  Tensor target = t.is_contiguous() ? t : new_contiguous(t.sizes(), t.dtype(), t.device(), op);
  const int per_block = philox::per_block(static_cast<int>(t.element_size()));
  const uint64_t blocks = (static_cast<uint64_t>(t.numel()) + per_block - 1) / per_block;
  const PhiloxState state = default_generator().reserve(blocks);
  dispatch::random_kernels.get(op, t.device())(dist, target, a, b, default_generator().for_kernel(state));
  if (!target.is_same(t)) t.copy_(target);
}

Tensor random_tensor(const OpDesc& desc, const Shape& sizes, TensorOptions options, RandomDist dist) {
  const char* op = desc.name;
  KILN_CHECK(is_floating(options.dtype()), "{}: random values need a floating dtype, got {}", op, options.dtype());
  OpScope scope(desc, {}, sizes, options.dtype(), options.device());
  Tensor out = new_contiguous(sizes, options.dtype(), options.device(), op);
  fill_random(op, out, dist, 0.0, 1.0);  // uniform [0, 1) or standard normal
  if (options.requires_grad()) out.requires_grad_(true);
  return scope.output(out);
}

}  // namespace

Tensor empty(const Shape& sizes, TensorOptions options) {
  check_grad_options("empty", options);
  OpScope scope(op::empty, {}, sizes, options.dtype(), options.device());
  Tensor out = new_contiguous(sizes, options.dtype(), options.device(), "empty");
  if (options.requires_grad()) out.requires_grad_(true);
  return scope.output(out);
}

Tensor zeros(const Shape& sizes, TensorOptions options) { return filled(op::zeros, sizes, 0, options); }
Tensor ones(const Shape& sizes, TensorOptions options) { return filled(op::ones, sizes, 1, options); }
Tensor full(const Shape& sizes, const Scalar& value, TensorOptions options) {
  if (!options.has_dtype()) options = options.dtype(value.default_dtype());
  return filled(op::full, sizes, value, options);
}

Tensor eye(int64_t n, TensorOptions options) { return eye(n, n, options); }

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  KILN_CHECK(n >= 0 && m >= 0, "eye: n and m must be non-negative, got n={} m={}", n, m);
  check_grad_options("eye", options);
  OpScope scope(op::eye, {}, n, m, options.dtype(), options.device());
  Tensor out = new_contiguous({n, m}, options.dtype(), options.device(), "eye");
  const auto fill = dispatch::fill_kernels.get("eye", options.device());
  fill(out, 0);
  // The diagonal is a strided view: stride m + 1 through the row-major matrix.
  const int64_t k = std::min(n, m);
  if (k > 0) fill(new_view(out, {k}, {m + 1}, 0), 1);
  if (options.requires_grad()) out.requires_grad_(true);
  return scope.output(out);
}

Tensor arange(const Scalar& end) { return arange(0, end, 1); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step) {
  return arange(start, end, step, TensorOptions());
}

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options) {
  if (!options.has_dtype()) {
    const bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
    options = options.dtype(integral ? DType::Int64 : DType::Float32);
  }
  const double s = start.to_double(), e = end.to_double(), d = step.to_double();
  KILN_CHECK(std::isfinite(s) && std::isfinite(e), "arange: start ({}) and end ({}) must be finite", start, end);
  KILN_CHECK(d != 0.0, "arange: step must be non-zero");
  KILN_CHECK((d > 0 && e >= s) || (d < 0 && e <= s),
             "arange: upper bound and lower bound inconsistent with step sign (start={}, end={}, step={})", start, end,
             step);
  KILN_CHECK(options.dtype() != DType::Bool, "arange: unsupported dtype bool");
  check_grad_options("arange", options);
  // The length in double first: (e - s) / d can exceed int64 (arange(0, 1e30)), and casting
  // such a double to int64 is undefined.
  const double length = std::ceil((e - s) / d);
  KILN_CHECK(length < 0x1p63, "arange: start={}, end={}, step={} give {} elements, more than int64 can count", start,
             end, step, length);
  const auto n = static_cast<int64_t>(length);
  OpScope scope(op::arange, {}, start, end, step, options.dtype(), options.device());
  Tensor out = new_contiguous({n}, options.dtype(), options.device(), "arange");
  dispatch::arange_kernels.get("arange", options.device())(out, s, d);
  if (options.requires_grad()) out.requires_grad_(true);
  return scope.output(out);
}

Tensor rand(const Shape& sizes, TensorOptions options) {
  return random_tensor(op::rand, sizes, options, RandomDist::Uniform);
}
Tensor randn(const Shape& sizes, TensorOptions options) {
  return random_tensor(op::randn, sizes, options, RandomDist::Normal);
}

Tensor empty_like(const Tensor& t) {
  check_defined("empty_like", t);
  return empty(t.sizes(), t.options());
}
Tensor zeros_like(const Tensor& t) {
  check_defined("zeros_like", t);
  return zeros(t.sizes(), t.options());
}
Tensor ones_like(const Tensor& t) {
  check_defined("ones_like", t);
  return ones(t.sizes(), t.options());
}
Tensor full_like(const Tensor& t, const Scalar& value) {
  check_defined("full_like", t);
  return full(t.sizes(), value, t.options());
}
Tensor rand_like(const Tensor& t) {
  check_defined("rand_like", t);
  return rand(t.sizes(), t.options());
}
Tensor randn_like(const Tensor& t) {
  check_defined("randn_like", t);
  return randn(t.sizes(), t.options());
}

Tensor from_buffer(const void* data, DType src_dtype, int64_t count, const Shape& sizes, TensorOptions options) {
  for (int64_t s : sizes) KILN_CHECK(s >= 0, "from_vector: negative dimension {} in shape {}", s, shape_str(sizes));
  const int64_t numel = shape_numel(sizes, "from_vector");
  KILN_CHECK(count == numel, "from_vector: {} values cannot fill a tensor of shape {} ({} elements)", count,
             shape_str(sizes), numel);
  check_grad_options("from_vector", options);
  OpScope scope(op::from_vector, {}, sizes, options.dtype(), options.device());
  Tensor src = new_contiguous(sizes, src_dtype, Device::cpu(), "from_vector");
  if (count > 0) std::memcpy(src.data_ptr(), data, static_cast<size_t>(count) * element_size(src_dtype));
  Tensor out = src.to(options.device(), options.dtype());
  if (options.requires_grad()) out.requires_grad_(true);
  return scope.output(out);
}

Tensor from_blob(void* data, const Shape& sizes, TensorOptions options, std::function<void(void*)> deleter) {
  for (int64_t s : sizes) KILN_CHECK(s >= 0, "from_blob: negative dimension {} in shape {}", s, shape_str(sizes));
  return from_blob(data, sizes, contiguous_strides(sizes, "from_blob"), options, std::move(deleter));
}

Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, TensorOptions options,
                 std::function<void(void*)> deleter) {
  KILN_CHECK(sizes.size() == strides.size(), "from_blob: {} sizes but {} strides ({} vs {})", sizes.size(),
             strides.size(), shape_str(sizes), shape_str(strides));
  for (size_t d = 0; d < sizes.size(); ++d) {
    KILN_CHECK(sizes[d] >= 0, "from_blob: negative dimension {} in shape {}", sizes[d], shape_str(sizes));
    KILN_CHECK(strides[d] >= 0, "from_blob: negative stride {} in strides {}", strides[d], shape_str(strides));
  }
  const size_t elem = element_size(options.dtype());
  // Element count, element span and byte sizes all checked: a wrapped one would describe
  // far less memory than the view walks.
  shape_numel(sizes, "from_blob");
  check_byte_strides(sizes, strides, elem, "from_blob");
  const int64_t span = storage_extent(sizes, strides, 0, "from_blob");  // elements the view reaches
  const int64_t nbytes = checked_nbytes(sizes, span, elem, "from_blob");
  KILN_CHECK(data != nullptr || span == 0, "from_blob: data is null but shape {} has elements", shape_str(sizes));
  check_grad_options("from_blob", options);
  auto storage = wrap_storage(data, static_cast<size_t>(nbytes), options.device(), std::move(deleter));
  Tensor out(std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>(), std::move(storage), options.dtype(), sizes,
                                              strides, 0, "from_blob"));
  if (options.requires_grad()) out.requires_grad_(true);
  return out;
}

Tensor& Tensor::fill_(const Scalar& value) {
  OpScope scope(op::fill_, {this}, value);
  dispatch::fill_kernels.get("fill_", device())(*this, value);
  return scope.output_in_place(*this);
}

Tensor& Tensor::zero_() {
  OpScope scope(op::zero_, {this});
  dispatch::fill_kernels.get("zero_", device())(*this, 0);
  return scope.output_in_place(*this);
}

Tensor& Tensor::uniform_(double from, double to) {
  KILN_CHECK(from <= to, "uniform_: expects from <= to, but got from={} to={}", from, to);
  OpScope scope(op::uniform_, {this}, from, to);
  fill_random("uniform_", *this, RandomDist::Uniform, from, to);
  return scope.output_in_place(*this);
}

Tensor& Tensor::normal_(double mean, double std) {
  KILN_CHECK(std >= 0.0, "normal_: expects std >= 0.0, but got std={}", std);
  OpScope scope(op::normal_, {this}, mean, std);
  fill_random("normal_", *this, RandomDist::Normal, mean, std);
  return scope.output_in_place(*this);
}

}  // namespace kiln
