// layer_norm validation: the input is made contiguous and viewed as [rows, n] rows to
// normalise; the per-row mean and 1/std are kept in float32 for the backward pass.
#include "layer_norm.h"

#include "../tensor/make.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<LayerNormKernel> layer_norm_kernels;
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  check_defined("layer_norm", x);
  KILN_CHECK(is_floating(x.dtype()), "layer_norm: unsupported dtype {} (supported: float16, bfloat16, float32, float64)",
             x.dtype());
  KILN_CHECK(!normalized_shape.empty(), "layer_norm: normalized_shape must have at least one dimension");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool match = x.dim() >= k;
  for (int64_t i = 0; match && i < k; ++i) match = x.sizes()[x.dim() - k + i] == normalized_shape[i];
  KILN_CHECK(match, "layer_norm: input of shape {} does not end with normalized_shape {}", shape_str(x.sizes()),
             shape_str(normalized_shape));
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    const char* what = p == &weight ? "weight" : "bias";
    KILN_CHECK(p->sizes() == normalized_shape, "layer_norm: expected {} of shape {}, got {}", what,
               shape_str(normalized_shape), shape_str(p->sizes()));
    KILN_CHECK(p->dtype() == x.dtype(), "layer_norm: expected {} of dtype {}, got {}", what, x.dtype(), p->dtype());
  }
  KILN_CHECK(eps >= 0, "layer_norm: eps must be non-negative, got {}", eps);
  const Device device = common_device("layer_norm", {&x, &weight, &bias});
  const int64_t n = shape_numel(normalized_shape, "layer_norm");
  const int64_t rows = n == 0 ? 0 : x.numel() / n;

  OpScope scope(op::layer_norm, {&x, &weight, &bias}, normalized_shape, eps);
  const Tensor in = x.contiguous();
  Tensor out = new_contiguous(x.sizes(), x.dtype(), device, "layer_norm");
  const Tensor mean = new_contiguous({rows}, DType::Float32, device, "layer_norm");
  const Tensor rstd = new_contiguous({rows}, DType::Float32, device, "layer_norm");
  const auto flat = [&](const Tensor& t) { return new_view(t, {rows, n}, {n, 1}, t.storage_offset()); };
  const auto vec = [&](const Tensor& t) { return t.defined() ? t.contiguous().view({n}) : Tensor(); };
  dispatch::layer_norm_kernels.get("layer_norm", device)(flat(out), mean, rstd, flat(in), vec(weight), vec(bias), eps);
  return scope.output(out);
}

}  // namespace kiln
