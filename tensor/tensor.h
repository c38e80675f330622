// Tensor: a cheap, reference-counted handle to a TensorImpl. Copying a Tensor copies the
// handle, not the data (as in PyTorch); views share storage with their base.
//
// The metadata accessors live in tensor/. Methods that compute (views are recorded as ops,
// copies and conversions run kernels) are declared here and defined in ops/, which sits on
// top of tensor/: the include arrows still point one way.
#pragma once

#include <concepts>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../core/error.h"
#include "../core/stream.h"
#include "scalar.h"
#include "tensor_impl.h"
#include "tensor_options.h"

namespace kiln {

namespace autograd {
class Node;
}

/// A handle to an n-dimensional array on a device. Default-constructed handles are undefined.
class Tensor {
 public:
  Tensor() = default;
  /// Wraps an impl (used by factories and views).
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  /// True when this handle refers to a tensor.
  bool defined() const { return impl_ != nullptr; }

  // ---- metadata -------------------------------------------------------------------------
  /// Number of dimensions.
  int64_t dim() const { return static_cast<int64_t>(impl().sizes().size()); }
  /// Number of dimensions (NumPy's name).
  int64_t ndim() const { return dim(); }
  /// Sizes, outermost first.
  const Shape& sizes() const { return impl().sizes(); }
  /// Sizes, outermost first (PyTorch's other name).
  const Shape& shape() const { return impl().sizes(); }
  /// Size of dim `d` (negative counts from the end).
  int64_t size(int64_t d) const;
  /// Strides in elements, outermost first.
  const Shape& strides() const { return impl().strides(); }
  /// Stride of dim `d` in elements (negative counts from the end).
  int64_t stride(int64_t d) const;
  /// Offset of the first element into the storage, in elements.
  int64_t storage_offset() const { return impl().offset(); }
  /// Number of elements.
  int64_t numel() const { return impl().numel(); }
  /// Element type.
  DType dtype() const { return impl().dtype(); }
  /// Device the data lives on.
  Device device() const { return impl().device(); }
  /// dtype, device and requires_grad, for making tensors like this one.
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  /// Bytes per element.
  size_t element_size() const { return kiln::element_size(dtype()); }
  /// Bytes spanned by the elements (numel * element_size).
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  /// True when the elements are laid out densely in row-major order.
  bool is_contiguous() const { return impl().is_contiguous(); }
  /// True for float16, bfloat16, float32 and float64 tensors.
  bool is_floating_point() const { return is_floating(dtype()); }
  /// True for tensors on a CUDA device.
  bool is_cuda() const { return device().is_cuda(); }
  /// Address of the first element.
  void* data_ptr() const { return impl().data(); }
  /// Typed address of the first element; throws when T does not match the dtype.
  template <typename T>
  T* data_ptr() const {
    KILN_CHECK(dtype_of<T>() == dtype(), "data_ptr: asked for {} elements but the tensor holds {}",
               dtype_of<T>(), dtype());
    return static_cast<T*>(data_ptr());
  }
  /// True when both handles refer to the same TensorImpl.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  /// True when both tensors share storage (one is a view of the other, or both of a third).
  bool is_alias_of(const Tensor& other) const {
    return defined() && other.defined() && impl_->storage() == other.impl_->storage();
  }

  // ---- autograd (state in tensor/autograd_meta.h; the engine and hooks in autograd/) ----
  /// Whether gradients flow to or through this tensor.
  bool requires_grad() const { return impl().requires_grad(); }
  /// Marks the tensor as a leaf that tracks gradients; only floating tensors may.
  Tensor& requires_grad_(bool on = true);
  /// The accumulated gradient (undefined until a backward pass reaches this tensor).
  const Tensor& grad() const;
  /// The gradient slot itself, for optimizers and for assigning or clearing it.
  Tensor& mutable_grad();
  /// Replaces the gradient (an undefined tensor clears it).
  void set_grad(const Tensor& grad);
  /// True for tensors no op made while recording (user-created, or not requiring grad).
  bool is_leaf() const;
  /// The backward node that made this tensor, or null for a leaf.
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  /// How many in-place writes the memory under this tensor has seen (shared by views).
  uint32_t _version() const { return impl().storage()->version(); }
  /// A tensor sharing this one's data with no autograd history (defined in ops/views.cpp).
  Tensor detach() const;
  /// Detaches this handle in place: it becomes a leaf that does not require grad.
  Tensor& detach_();
  /// Keeps .grad() of this non-leaf after backward (defined in autograd/).
  void retain_grad() const;
  /// True when retain_grad() was called (or for a leaf that requires grad).
  bool retains_grad() const;
  /// Runs `hook` on this tensor's gradient during backward; a defined result replaces the
  /// gradient (defined in autograd/).
  void register_hook(std::function<Tensor(const Tensor&)> hook) const;
  /// Runs `hook(*this)` right after a backward pass accumulated into this leaf's .grad(), in
  /// the order gradients become ready (PyTorch's register_post_accumulate_grad_hook); returns
  /// a key for remove_post_accumulate_grad_hook (defined in autograd/).
  uint64_t register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  /// Removes the post-accumulate-grad hook registered under `key`; false when there is none.
  bool remove_post_accumulate_grad_hook(uint64_t key) const;
  /// Backpropagates from this tensor: a scalar, or any shape with `gradient` of that shape
  /// (defined in autograd/engine.cpp).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false, bool create_graph = false) const;

  // ---- views: share storage, recorded as ops (defined in ops/views.cpp) ------------------
  /// A view with a new shape (one -1 is inferred); throws when the strides do not allow it.
  Tensor view(const Shape& shape) const;
  /// Like view(), but copies when the layout does not allow a view.
  Tensor reshape(const Shape& shape) const;
  /// Swaps two dims.
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  /// Transpose of a tensor with at most 2 dims.
  Tensor t() const;
  /// Reorders all dims: result dim i is input dim dims[i].
  Tensor permute(const Shape& dims) const;
  /// Moves dim `source` to position `destination`, keeping the others in order.
  Tensor movedim(int64_t source, int64_t destination) const;
  /// Elements [start, start + length) along `dim`.
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// Python-style slice start:end:step along `dim` (negative and out-of-range bounds clamp).
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  /// Index `index` along `dim`, removing that dim.
  Tensor select(int64_t dim, int64_t index) const;
  /// select(0, index).
  Tensor operator[](int64_t index) const { return select(0, index); }
  /// Inserts a size-1 dim at `dim`.
  Tensor unsqueeze(int64_t dim) const;
  /// Removes every size-1 dim.
  Tensor squeeze() const;
  /// Removes `dim` if its size is 1 (otherwise returns an unchanged view).
  Tensor squeeze(int64_t dim) const;
  /// Broadcasts size-1 dims (and new leading dims) to `sizes` without copying; -1 keeps a size.
  Tensor expand(const Shape& sizes) const;
  /// expand(other.sizes()).
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  /// Merges dims start..end into one.
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// A view with explicit sizes, strides and storage offset (no bounds beyond storage allowed).
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t storage_offset) const;

  // ---- copies and conversions (defined in ops/copy.cpp) ----------------------------------
  /// This tensor if already contiguous, else a contiguous copy.
  Tensor contiguous() const;
  /// A contiguous copy with its own storage.
  Tensor clone() const;
  /// This tensor converted to `dtype` (this tensor itself if the dtype already matches).
  Tensor to(DType dtype) const;
  /// This tensor moved to `device` (this tensor itself if already there).
  Tensor to(Device device) const;
  /// to(device) then to(dtype).
  Tensor to(Device device, DType dtype) const;
  /// to(Device::cpu()).
  Tensor cpu() const { return to(Device::cpu()); }
  /// A contiguous copy of this CPU tensor in page-locked (pinned) host memory, which the GPU
  /// reads and writes by DMA at full speed; this tensor itself if already pinned. Needs a
  /// CUDA build with a visible GPU (defined in ops/transfer.cpp).
  Tensor pin_memory() const;
  /// True when this tensor's memory is page-locked host memory (see pin_memory()).
  bool is_pinned() const;
  /// Copies `src` (broadcast to this shape, converted to this dtype) into this tensor's memory.
  Tensor& copy_(const Tensor& src);

  // ---- transfers across devices and streams (defined in ops/transfer.cpp) ----------------
  /// to(device), with PyTorch's non_blocking: true lets the host return before the copy ends.
  /// CPU to GPU from pageable memory stages the data through the pinned host cache (one host
  /// pass, then an async DMA on the current stream); from memory pin_memory() gave, the DMA
  /// reads it directly. GPU to CPU returns a pinned tensor whose values arrive later: call
  /// cuda::synchronize() (or synchronize the current stream, or wait for an Event recorded
  /// after the copy) before reading it. Blocking (false) copies are those of to(device).
  Tensor to(Device device, bool non_blocking) const;
  /// to(device, non_blocking) converted to `dtype` (the conversion runs on the GPU).
  Tensor to(Device device, DType dtype, bool non_blocking) const;
  /// copy_(src), non_blocking across devices as to(device, true) is: a host destination must
  /// be pinned for the copy to run asynchronously (a pageable one is written before return).
  Tensor& copy_(const Tensor& src, bool non_blocking);
  /// Marks this tensor's memory (its whole storage, for a view) as used by `stream`, as
  /// PyTorch's record_stream: once the last tensor using it dies, the block is reused only
  /// after the work queued on `stream` by then has completed. For CUDA tensors (the stream
  /// must be on their device) and CPU tensors from pin_memory() (any GPU's stream); memory
  /// Kiln does not own (from_blob) is left alone, as PyTorch does.
  void record_stream(const Stream& stream) const;
  /// Sets every element to `value` (defined in ops/factory.cpp).
  Tensor& fill_(const Scalar& value);
  /// Sets every element to zero.
  Tensor& zero_();
  /// Fills with uniform random values in [from, to) from the default generator.
  Tensor& uniform_(double from = 0.0, double to = 1.0);
  /// Fills with normal random values of the given mean and standard deviation.
  Tensor& normal_(double mean = 0.0, double std = 1.0);
  /// Replaces this tensor's storage, dtype and layout with `other`'s, keeping the handle's
  /// identity, so every holder of this Tensor sees the new data (what Module::to() uses).
  void set_data(const Tensor& other);

  /// The single element as a Scalar; throws unless numel() == 1.
  Scalar item() const;
  /// The single element converted to T; throws unless numel() == 1.
  template <typename T>
  T item() const {
    return item().to<T>();
  }
  /// All elements in row-major order, converted to T (float, double, int64_t, int32_t, bool,
  /// Half, BFloat16).
  template <typename T>
  std::vector<T> to_vector() const {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> bytes(static_cast<size_t>(numel()));  // std::vector<bool> packs bits
      copy_to_host(bytes.data(), dtype_of<T>());
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      std::vector<T> out(static_cast<size_t>(numel()));
      copy_to_host(out.data(), dtype_of<T>());
      return out;
    }
  }

  // ---- ops as methods (thin wrappers over the free functions; ops/tensor_methods.cpp) ----
  // Each has the signature and defaults of the free function it calls (ops/*.h). Dims given
  // as a plain integer (x.sum(1)) mean the one-dim list; an empty list reduces every dim.
  // PyTorch's x.max(dim) returns (values, indices): here use x.amax(dim) and x.argmax(dim).
  // x.float(), x.double(), x.long(), x.int() and x.bool() cannot exist in C++ (keywords):
  // write x.to(kFloat), x.to(kDouble), x.to(kLong), x.to(kInt), x.to(kBool).
  /// sum(*this).
  Tensor sum() const;
  /// sum(*this, dims, keepdim).
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  /// sum(*this, {dim}, keepdim).
  template <std::integral I>
  Tensor sum(I dim, bool keepdim = false) const {
    return sum(Shape{static_cast<int64_t>(dim)}, keepdim);
  }
  /// mean(*this).
  Tensor mean() const;
  /// mean(*this, dims, keepdim).
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  /// mean(*this, {dim}, keepdim).
  template <std::integral I>
  Tensor mean(I dim, bool keepdim = false) const {
    return mean(Shape{static_cast<int64_t>(dim)}, keepdim);
  }
  /// max(*this): the largest element (0-dim).
  Tensor max() const;
  /// max(*this, dims, keepdim): the largest values (amax).
  Tensor max(const Shape& dims, bool keepdim = false) const;
  /// min(*this): the smallest element (0-dim).
  Tensor min() const;
  /// min(*this, dims, keepdim): the smallest values (amin).
  Tensor min(const Shape& dims, bool keepdim = false) const;
  /// amax(*this, dims, keepdim).
  Tensor amax(const Shape& dims, bool keepdim = false) const;
  /// amax(*this, {dim}, keepdim).
  template <std::integral I>
  Tensor amax(I dim, bool keepdim = false) const {
    return amax(Shape{static_cast<int64_t>(dim)}, keepdim);
  }
  /// amin(*this, dims, keepdim).
  Tensor amin(const Shape& dims, bool keepdim = false) const;
  /// amin(*this, {dim}, keepdim).
  template <std::integral I>
  Tensor amin(I dim, bool keepdim = false) const {
    return amin(Shape{static_cast<int64_t>(dim)}, keepdim);
  }
  /// argmax(*this): flat index of the largest element.
  Tensor argmax() const;
  /// argmax(*this, dim, keepdim).
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  /// argmin(*this): flat index of the smallest element.
  Tensor argmin() const;
  /// argmin(*this, dim, keepdim).
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  /// exp(*this).
  Tensor exp() const;
  /// log(*this).
  Tensor log() const;
  /// sqrt(*this).
  Tensor sqrt() const;
  /// rsqrt(*this).
  Tensor rsqrt() const;
  /// abs(*this).
  Tensor abs() const;
  /// neg(*this).
  Tensor neg() const;
  /// tanh(*this).
  Tensor tanh() const;
  /// sigmoid(*this).
  Tensor sigmoid() const;
  /// relu(*this).
  Tensor relu() const;
  /// gelu(*this, approximate): "none" (exact erf) or "tanh".
  Tensor gelu(std::string_view approximate = "none") const;
  /// silu(*this).
  Tensor silu() const;
  /// pow(*this, exponent).
  Tensor pow(const Tensor& exponent) const;
  /// pow(*this, exponent) for a number exponent.
  Tensor pow(const Scalar& exponent) const;
  /// add(*this, other, alpha): this + alpha * other.
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  /// add(*this, other, alpha) for a number other.
  Tensor add(const Scalar& other, const Scalar& alpha = 1) const;
  /// sub(*this, other, alpha): this - alpha * other.
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  /// sub(*this, other, alpha) for a number other.
  Tensor sub(const Scalar& other, const Scalar& alpha = 1) const;
  /// mul(*this, other).
  Tensor mul(const Tensor& other) const;
  /// mul(*this, other) for a number other.
  Tensor mul(const Scalar& other) const;
  /// div(*this, other): true division.
  Tensor div(const Tensor& other) const;
  /// div(*this, other) for a number other.
  Tensor div(const Scalar& other) const;
  /// matmul(*this, other).
  Tensor matmul(const Tensor& other) const;
  /// mm(*this, other) (2-D operands).
  Tensor mm(const Tensor& other) const;
  /// softmax(*this, dim).
  Tensor softmax(int64_t dim) const;
  /// log_softmax(*this, dim).
  Tensor log_softmax(int64_t dim) const;
  /// clamp(*this, min, max): at least one bound.
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  /// clamp_(*this, min, max): in place.
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  /// clamp_min(*this, min).
  Tensor clamp_min(const Scalar& min) const;
  /// clamp_max(*this, max).
  Tensor clamp_max(const Scalar& max) const;
  /// masked_fill(*this, mask, value).
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  /// masked_fill_(*this, mask, value): in place.
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value);
  /// index_select(*this, dim, index).
  Tensor index_select(int64_t dim, const Tensor& index) const;
  /// gather(*this, dim, index).
  Tensor gather(int64_t dim, const Tensor& index) const;
  /// scatter(*this, dim, index, src): a scattered copy.
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  /// scatter(*this, dim, index, value): a scattered copy.
  Tensor scatter(int64_t dim, const Tensor& index, const Scalar& value) const;
  /// scatter_(*this, dim, index, src): in place.
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src);
  /// scatter_(*this, dim, index, value): in place.
  Tensor& scatter_(int64_t dim, const Tensor& index, const Scalar& value);
  /// scatter_add(*this, dim, index, src): a copy with src added at index.
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  /// scatter_add_(*this, dim, index, src): in place.
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  /// eq(*this, other).
  Tensor eq(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  /// ne(*this, other).
  Tensor ne(const Tensor& other) const;
  Tensor ne(const Scalar& other) const;
  /// lt(*this, other).
  Tensor lt(const Tensor& other) const;
  Tensor lt(const Scalar& other) const;
  /// le(*this, other).
  Tensor le(const Tensor& other) const;
  Tensor le(const Scalar& other) const;
  /// gt(*this, other).
  Tensor gt(const Tensor& other) const;
  Tensor gt(const Scalar& other) const;
  /// ge(*this, other).
  Tensor ge(const Tensor& other) const;
  Tensor ge(const Scalar& other) const;
  /// equal(*this, other): same shape and values.
  bool equal(const Tensor& other) const;
  /// to(kFloat16).
  Tensor half() const { return to(DType::Float16); }
  /// to(kBFloat16).
  Tensor bfloat16() const { return to(DType::BFloat16); }

  // ---- printing (tensor/print.cpp) -------------------------------------------------------
  /// PyTorch's repr: "tensor([[1., 2.]], dtype=float64)", summarised with "..." when large.
  std::string str() const;

  /// The impl, for Kiln's internals.
  TensorImpl* unsafe_impl() const { return impl_.get(); }
  /// The owning impl pointer, for Kiln's internals (autograd keeps weak references).
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  /// Writes every element, converted to `dtype`, densely into `out` (the op "to_vector").
  void copy_to_host(void* out, DType dtype) const;
  TensorImpl& impl() const {
    if (!impl_) [[unlikely]] throw_undefined();
    return *impl_;
  }
  [[noreturn]] static void throw_undefined();

  std::shared_ptr<TensorImpl> impl_;
};

/// Writes t.str().
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace kiln

template <>
struct fmt::formatter<kiln::Tensor> : fmt::formatter<std::string> {
  auto format(const kiln::Tensor& t, fmt::format_context& ctx) const {
    return fmt::formatter<std::string>::format(t.str(), ctx);
  }
};
