// LibTorch's half of side_by_side_train_step: torch::nn::Linear layers with GELU between,
// torch::optim::AdamW, cross_entropy; TF32 off (the default for matmul in LibTorch too).
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/torch.h>

#include "side_by_side_train_step.h"

namespace side_by_side::train {

namespace {
struct State {
  torch::nn::Sequential model;
  std::unique_ptr<torch::optim::AdamW> opt;
  torch::Tensor x, y, loss;
};
std::unique_ptr<State> g;
}  // namespace

void torch_setup(const std::vector<int64_t>& sizes, int64_t batch) {
  at::globalContext().setAllowTF32CuBLAS(false);
  torch::manual_seed(0);
  g = std::make_unique<State>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    g->model->push_back(torch::nn::Linear(sizes[i], sizes[i + 1]));
    if (i + 2 < sizes.size()) g->model->push_back(torch::nn::GELU());
  }
  g->model->to(torch::kCUDA);
  g->opt = std::make_unique<torch::optim::AdamW>(g->model->parameters(), torch::optim::AdamWOptions(1e-3));
  g->x = torch::randn({batch, sizes.front()}, torch::kCUDA);
  g->y = torch::randint(0, sizes.back(), {batch}, torch::TensorOptions(torch::kCUDA).dtype(torch::kLong));
}

void torch_step() {
  g->opt->zero_grad(/*set_to_none=*/true);
  g->loss = torch::nn::functional::cross_entropy(g->model->forward(g->x), g->y);
  g->loss.backward();
  g->opt->step();
}

double torch_loss() { return g->loss.item<double>(); }
void torch_teardown() {
  g.reset();
  c10::cuda::CUDACachingAllocator::emptyCache();
}
const char* torch_version_string() { return TORCH_VERSION; }

}  // namespace side_by_side::train
