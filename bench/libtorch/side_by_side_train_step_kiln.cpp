// Kiln's half of side_by_side_train_step: nn::MLP with GELU, optim::AdamW (PyTorch's defaults,
// one multi-tensor step on CUDA), cross_entropy; TF32 off. After kiln_compile(), a step is the
// compiled one: the forward captured with linear+GELU fused, the whole step one CUDA graph.
#include <kiln/kiln.h>

#include "side_by_side_train_step.h"

namespace side_by_side::train {

namespace {
struct State {
  explicit State(const std::vector<int64_t>& sizes) : model(sizes, kiln::nn::Activation::GELU) {}
  kiln::nn::MLP model;
  std::unique_ptr<kiln::optim::AdamW> opt;
  kiln::Tensor x, y, loss;
  std::unique_ptr<kiln::graph::Executable> forward, step;  // after kiln_compile()
};
std::unique_ptr<State> g;
}  // namespace

void kiln_setup(const std::vector<int64_t>& sizes, int64_t batch) {
  using namespace kiln;
  set_allow_tf32(false);
  manual_seed(0);
  const Device gpu = Device::cuda(0);
  g = std::make_unique<State>(sizes);
  g->model.to(gpu);
  g->opt = std::make_unique<optim::AdamW>(g->model.parameters(), optim::AdamWOptions{.lr = 1e-3});
  g->x = randn({batch, sizes.front()}, TensorOptions().device(gpu));
  g->y = argmax(randn({batch, sizes.back()}, TensorOptions().device(gpu)), 1);
}

void kiln_compile() {
  using namespace kiln;
  graph::Graph forward = graph::capture(g->model, {g->x});
  graph::fuse_linear_gelu(forward);
  g->forward = std::make_unique<graph::Executable>(graph::compile(forward));
  g->step = std::make_unique<graph::Executable>(graph::compile(
      [](const std::vector<Tensor>& in) {
        g->opt->zero_grad();
        Tensor loss = cross_entropy((*g->forward)({in[0]})[0], in[1]);
        loss.backward();
        g->opt->step();
        return std::vector<Tensor>{loss};
      },
      {g->x, g->y}, {.cuda_graph = true}));
}

void kiln_step() {
  if (g->step) {
    g->loss = (*g->step)({g->x, g->y})[0];
    return;
  }
  g->opt->zero_grad();
  g->loss = kiln::cross_entropy(g->model(g->x), g->y);
  g->loss.backward();
  g->opt->step();
}

double kiln_loss() { return g->loss.item<double>(); }
void kiln_teardown() {
  g.reset();
  kiln::empty_cache(kiln::Device::cuda(0));
}

}  // namespace side_by_side::train
