// LibTorch's half of side_by_side_cpu: torch::nn::functional::linear and gelu on CPU tensors
// holding copies of the driver's data, under NoGradGuard (what torch.nn.Linear runs in
// inference; PyTorch's CPU linear goes to its BLAS, MKL in the official wheels).
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <memory>
#include <string>

#include "side_by_side_cpu.h"

namespace side_by_side::cpu {

namespace {
struct Row {
  torch::Tensor x, w, b, w2, b2, y;
  bool mlp = false;
};
std::unique_ptr<Row> g_row;
std::unique_ptr<torch::NoGradGuard> g_no_grad;

torch::Tensor tensor(const std::vector<float>& data, std::vector<int64_t> sizes) {
  return torch::from_blob(const_cast<float*>(data.data()), sizes, torch::kFloat32).clone();
}
}  // namespace

void torch_setup(const Operands& ops) {
  if (!g_no_grad) g_no_grad = std::make_unique<torch::NoGradGuard>();
  auto row = std::make_unique<Row>();
  row->mlp = ops.hidden > 0;
  const int64_t mid = row->mlp ? ops.hidden : ops.n;
  row->x = tensor(ops.x, {ops.m, ops.k});
  row->w = tensor(ops.w, {mid, ops.k});
  row->b = tensor(ops.b, {mid});
  if (row->mlp) {
    row->w2 = tensor(ops.w2, {ops.n, mid});
    row->b2 = tensor(ops.b2, {ops.n});
  }
  g_row = std::move(row);
}

void torch_call() {
  namespace F = torch::nn::functional;
  Row& r = *g_row;
  r.y = r.mlp ? F::linear(F::gelu(F::linear(r.x, r.w, r.b)), r.w2, r.b2) : F::linear(r.x, r.w, r.b);
}

std::vector<float> torch_output() {
  torch_call();
  const torch::Tensor y = g_row->y.contiguous();
  return std::vector<float>(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
}

int torch_set_threads(int threads) {
  at::set_num_threads(threads);
  return at::get_num_threads();
}

const char* torch_description() {
  static std::string text;
  text = std::string("LibTorch ") + TORCH_VERSION + ", MKL " + (at::hasMKL() ? "yes" : "no") + ", mkldnn " +
         (at::hasMKLDNN() ? "yes" : "no") + "; " + at::get_parallel_info();
  for (char& c : text)
    if (c == '\n') c = ';';
  return text.c_str();
}

}  // namespace side_by_side::cpu
