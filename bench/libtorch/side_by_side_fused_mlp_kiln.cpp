// Kiln's half of side_by_side_fused_mlp: nn::MLP blocks, each captured (graph::capture), rewritten
// by graph::fuse_linear_gelu, and compiled twice: the interpreter, and a CUDA graph.
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

// An internal header of the source tree (not installed): the sm_90a kernel's launch hook.
#include "../../ops/cuda/sm90_linear_gelu.h"
#include "side_by_side_fused_mlp.h"

namespace side_by_side::mlp {

namespace {
struct Block {
  Block(kiln::Device device, kiln::DType dtype, int64_t batch)
      : model({.sizes = {1024, 4096, 1024}, .activation = kiln::nn::Activation::GELU}) {
    model.to(device, dtype);
    model.eval();
    x = kiln::randn({batch, 1024}, kiln::TensorOptions().device(device).dtype(dtype));
  }
  kiln::nn::MLP model;
  kiln::Tensor x, graph_input;
  std::optional<kiln::graph::Executable> fused, cuda_graph;
};
std::vector<std::unique_ptr<Block>> g_blocks;
std::optional<kiln::NoGradGuard> g_no_grad;
}  // namespace

void kiln_setup(const std::string& dtype, int64_t batch, int sets) {
  using namespace kiln;
  set_allow_tf32(dtype == "tf32");
  manual_seed(0);
  g_no_grad.emplace();
  const DType dt = dtype == "bfloat16" ? kBFloat16 : kFloat32;
  for (int s = 0; s < sets; ++s) {
    auto b = std::make_unique<Block>(Device::cuda(0), dt, batch);
    graph::Graph captured = graph::capture(b->model, {b->x});
    graph::fuse_linear_gelu(captured);
    b->fused.emplace(graph::compile(captured));
    b->cuda_graph.emplace(graph::compile(captured, {.cuda_graph = true}));
    (void)(*b->cuda_graph)({b->x});  // the warm-up call (eager)
    (void)(*b->cuda_graph)({b->x});  // the capturing call
    b->graph_input = b->cuda_graph->static_inputs()->at(0);
    g_blocks.push_back(std::move(b));
  }
}

void kiln_call(KilnVariant variant, int set) {
  Block& b = *g_blocks[static_cast<size_t>(set)];
  switch (variant) {
    case KilnVariant::Eager: (void)b.model(b.x); break;
    case KilnVariant::Fused: (void)(*b.fused)({b.x}); break;
    case KilnVariant::FusedNoPdl:
      kiln::cuda_kernels::sm90_linear_gelu_programmatic_launch_for_testing(false);
      (void)(*b.fused)({b.x});
      kiln::cuda_kernels::sm90_linear_gelu_programmatic_launch_for_testing(true);
      break;
    case KilnVariant::FusedCudaGraph: (void)(*b.cuda_graph)({b.graph_input}); break;
  }
}

double kiln_check() {
  using namespace kiln;
  Block& b = *g_blocks.front();
  const Tensor eager = b.model(b.x).to(kFloat64);
  auto rel = [&](const Tensor& t) {
    const Tensor diff = t.to(kFloat64) - eager;
    return std::sqrt((diff * diff).sum().item<double>() / (eager * eager).sum().item<double>());
  };
  const double fused = rel((*b.fused)({b.x})[0]);
  b.graph_input.copy_(b.x);
  const double graphed = rel((*b.cuda_graph)({b.graph_input})[0]);
  return std::max(fused, graphed);
}

void kiln_teardown() {
  g_blocks.clear();
  g_no_grad.reset();
  kiln::set_allow_tf32(false);
  kiln::empty_cache(kiln::Device::cuda(0));
}

}  // namespace side_by_side::mlp
