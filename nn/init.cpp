// Initialisers. kaiming_uniform_ with a = sqrt(5) reproduces nn.Linear's default weight
// distribution, U(-1/sqrt(fan_in), 1/sqrt(fan_in)). Each runs without recording autograd
// history (PyTorch's torch.no_grad() in nn.init): parameters are leaves that require grad.
#include "init.h"

#include <cmath>

#include "../ops/grad_mode.h"
#include "../tensor/shape.h"

namespace kiln::nn::init {

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& weight) {
  KILN_CHECK(weight.dim() >= 2,
             "fan_in_and_fan_out: fan in and fan out cannot be computed for a tensor with fewer than 2 dimensions "
             "(shape {})",
             shape_str(weight.sizes()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < weight.dim(); ++d) receptive *= weight.sizes()[d];
  return {weight.sizes()[1] * receptive, weight.sizes()[0] * receptive};
}

Tensor& uniform_(Tensor& t, double low, double high) {
  NoGradGuard no_grad;
  return t.uniform_(low, high);
}

Tensor& kaiming_uniform_(Tensor& t, double a) {
  const int64_t fan_in = fan_in_and_fan_out(t).first;
  if (fan_in == 0) return t;  // nothing to scale by; PyTorch warns and leaves the tensor alone
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = std::sqrt(3.0) * gain / std::sqrt(static_cast<double>(fan_in));
  NoGradGuard no_grad;
  return t.uniform_(-bound, bound);
}

Tensor& zeros_(Tensor& t) {
  NoGradGuard no_grad;
  return t.zero_();
}
Tensor& ones_(Tensor& t) {
  NoGradGuard no_grad;
  return t.fill_(1);
}

}  // namespace kiln::nn::init
