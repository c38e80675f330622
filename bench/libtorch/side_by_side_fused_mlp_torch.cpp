// LibTorch's half of side_by_side_fused_mlp: the block as torch::nn::functional calls on plain
// tensors (what nn::Linear and nn::GELU run), _addmm_activation with use_gelu (cuBLASLt's GELU
// epilogue, as torch.compile's and PyTorch's own fused linear+GELU use), and the eager block
// captured into an at::cuda::CUDAGraph on a side stream after a warm-up there.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "side_by_side_fused_mlp.h"

namespace side_by_side::mlp {

namespace {
struct Block {
  torch::Tensor w1, b1, w2, b2, x, graph_out;
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  torch::Tensor eager() const {
    namespace F = torch::nn::functional;
    return F::linear(F::gelu(F::linear(x, w1, b1)), w2, b2);
  }
};
std::vector<std::unique_ptr<Block>> g_blocks;
std::unique_ptr<torch::NoGradGuard> g_no_grad;
}  // namespace

void torch_setup(const std::string& dtype, int64_t batch, int sets) {
  at::globalContext().setAllowTF32CuBLAS(dtype == "tf32");
  torch::manual_seed(0);
  g_no_grad = std::make_unique<torch::NoGradGuard>();
  const auto options = torch::TensorOptions(torch::kCUDA).dtype(dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat);
  for (int s = 0; s < sets; ++s) {
    auto b = std::make_unique<Block>();
    // nn::Linear's initialisation range; the values do not change the timing.
    b->w1 = torch::empty({4096, 1024}, options).uniform_(-1.0 / 32, 1.0 / 32);
    b->b1 = torch::empty({4096}, options).uniform_(-1.0 / 32, 1.0 / 32);
    b->w2 = torch::empty({1024, 4096}, options).uniform_(-1.0 / 64, 1.0 / 64);
    b->b2 = torch::empty({1024}, options).uniform_(-1.0 / 64, 1.0 / 64);
    b->x = torch::randn({batch, 1024}, options);
    b->graph = std::make_unique<at::cuda::CUDAGraph>();
    {
      torch::cuda::synchronize();  // the side stream starts after the set's initialisation
      const at::cuda::CUDAStream side = at::cuda::getStreamFromPool();
      const c10::cuda::CUDAStreamGuard guard(side);
      for (int i = 0; i < 3; ++i) (void)b->eager();  // warm-up on the capture stream, as PyTorch advises
      b->graph->capture_begin();
      b->graph_out = b->eager();
      b->graph->capture_end();
      torch::cuda::synchronize();
    }
    g_blocks.push_back(std::move(b));
  }
}

void torch_call(TorchVariant variant, int set) {
  Block& b = *g_blocks[static_cast<size_t>(set)];
  switch (variant) {
    case TorchVariant::Eager: (void)b.eager(); break;
    case TorchVariant::AddmmActivation:
      (void)at::addmm(b.b2, at::_addmm_activation(b.b1, b.x, b.w1.t(), 1, 1, /*use_gelu=*/true), b.w2.t());
      break;
    case TorchVariant::CudaGraph: b.graph->replay(); break;
  }
}

void torch_teardown() {
  g_blocks.clear();
  g_no_grad.reset();
  at::globalContext().setAllowTF32CuBLAS(false);
  c10::cuda::CUDACachingAllocator::emptyCache();
}
const char* torch_version_string() { return TORCH_VERSION; }

}  // namespace side_by_side::mlp
