// Kiln's half of side_by_side_adamw (see side_by_side_adamw.h).
#include <kiln/kiln.h>

#include <memory>
#include <vector>

#include "side_by_side_adamw.h"

namespace side_by_side::adamw {

namespace {

struct KilnState {
  std::unique_ptr<kiln::nn::MLP> mlp;
  std::unique_ptr<kiln::optim::AdamW> opt;
  std::vector<kiln::Tensor> params, grads, exp_avgs, exp_avg_sqs;  // the per-parameter copy
  double step = 0;
  int64_t numel = 0;
};
std::unique_ptr<KilnState> state;

}  // namespace

void kiln_setup() {
  using namespace kiln;
  const Device gpu = Device::cuda(0);
  manual_seed(0);
  state = std::make_unique<KilnState>();
  state->mlp = std::make_unique<nn::MLP>(std::vector<int64_t>{1024, 4096, 1024, 4096, 10}, nn::Activation::GELU);
  state->mlp->to(gpu);
  std::vector<Tensor> params = state->mlp->parameters();
  for (Tensor& p : params) {
    p.mutable_grad() = randn(p.sizes(), p.options()) * 1e-3;
    state->numel += p.numel();
    state->params.push_back(p.clone());
    state->grads.push_back(p.grad());
    state->exp_avgs.push_back(zeros_like(p));
    state->exp_avg_sqs.push_back(zeros_like(p));
  }
  state->opt = std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 1e-3, .weight_decay = 1e-2});
}

void kiln_multi_tensor_step() { state->opt->step(); }

void kiln_per_parameter_step() {
  state->step += 1;
  kiln::NoGradGuard no_grad;  // the op updates leaves that require grad, as optim::AdamW::step does
  const kiln::AdamConfig config{.lr = 1e-3, .weight_decay = 1e-2};
  for (size_t i = 0; i < state->params.size(); ++i)
    kiln::_fused_adamw_(state->params[i], state->grads[i], state->exp_avgs[i], state->exp_avg_sqs[i], kiln::Tensor(),
                        state->step, config);
}

int64_t kiln_numel() { return state->numel; }

void kiln_teardown() {
  state.reset();
  kiln::cuda::synchronize();
  kiln::empty_cache(kiln::Device::cuda(0));
}

}  // namespace side_by_side::adamw
