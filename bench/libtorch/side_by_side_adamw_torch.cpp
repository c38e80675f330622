// LibTorch's half of side_by_side_adamw (see side_by_side_adamw.h).
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "side_by_side_adamw.h"

namespace side_by_side::adamw {

namespace {

struct TorchState {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  std::vector<at::Tensor> frontend_params;
  std::unique_ptr<torch::optim::AdamW> frontend;
};
std::unique_ptr<TorchState> state;

}  // namespace

void torch_setup() {
  torch::manual_seed(0);
  state = std::make_unique<TorchState>();
  const at::TensorOptions opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
  const int64_t sizes[] = {1024, 4096, 1024, 4096, 10};
  for (int layer = 0; layer < 4; ++layer) {
    const std::vector<std::vector<int64_t>> shapes = {{sizes[layer + 1], sizes[layer]}, {sizes[layer + 1]}};
    for (const std::vector<int64_t>& shape : shapes) {
      at::Tensor p = at::randn(shape, opts) * 0.02;
      at::Tensor g = at::randn(shape, opts) * 1e-3;
      state->params.push_back(p);
      state->grads.push_back(g);
      state->exp_avgs.push_back(at::zeros_like(p));
      state->exp_avg_sqs.push_back(at::zeros_like(p));
      state->steps.push_back(at::zeros({}, opts));  // fused=True keeps float32 step counts on the device
      at::Tensor fp = p.clone();
      fp.set_requires_grad(true);
      fp.mutable_grad() = g.clone();
      state->frontend_params.push_back(fp);
    }
  }
  state->frontend = std::make_unique<torch::optim::AdamW>(state->frontend_params,
                                                          torch::optim::AdamWOptions(1e-3).weight_decay(1e-2));
}

void torch_fused_step() {
  at::_foreach_add_(state->steps, 1);
  at::_fused_adamw_(state->params, state->grads, state->exp_avgs, state->exp_avg_sqs, /*max_exp_avg_sqs=*/{},
                    state->steps, /*lr=*/1e-3, /*beta1=*/0.9, /*beta2=*/0.999, /*weight_decay=*/1e-2, /*eps=*/1e-8,
                    /*amsgrad=*/false, /*maximize=*/false);
}

void torch_frontend_step() { state->frontend->step(); }

void torch_teardown() {
  state.reset();
  torch::cuda::synchronize();
  c10::cuda::CUDACachingAllocator::emptyCache();
}

const char* torch_version_string() { return TORCH_VERSION; }

}  // namespace side_by_side::adamw
