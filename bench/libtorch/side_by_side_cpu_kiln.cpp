// Kiln's half of side_by_side_cpu: kiln::linear and kiln::gelu on CPU tensors made from the
// driver's data, under NoGradGuard (what nn::Linear / nn::MLP run in inference).
#include <kiln/kiln.h>
#include <omp.h>

#include <cstring>
#include <optional>

// An internal header of the source tree (not installed): the tile kernel hook.
#include "../../ops/cpu/onednn_matmul.h"
#include "side_by_side_cpu.h"

namespace side_by_side::cpu {

namespace {
struct Row {
  kiln::Tensor x, w, b, w2, b2, y;
  bool mlp = false;
};
std::optional<Row> g_row;
std::optional<kiln::NoGradGuard> g_no_grad;

kiln::Tensor tensor(const std::vector<float>& data, std::vector<int64_t> sizes) {
  return kiln::from_vector(data, kiln::Shape(sizes.begin(), sizes.end()));
}
}  // namespace

void kiln_setup(const Operands& ops) {
  if (!g_no_grad) g_no_grad.emplace();
  Row row;
  row.mlp = ops.hidden > 0;
  const int64_t mid = row.mlp ? ops.hidden : ops.n;
  row.x = tensor(ops.x, {ops.m, ops.k});
  row.w = tensor(ops.w, {mid, ops.k});
  row.b = tensor(ops.b, {mid});
  if (row.mlp) {
    row.w2 = tensor(ops.w2, {ops.n, mid});
    row.b2 = tensor(ops.b2, {ops.n});
  }
  g_row = std::move(row);
}

void kiln_call() {
  Row& r = *g_row;
  r.y = r.mlp ? kiln::linear(kiln::gelu(kiln::linear(r.x, r.w, r.b)), r.w2, r.b2) : kiln::linear(r.x, r.w, r.b);
}

std::vector<float> kiln_output() {
  kiln_call();
  return g_row->y.contiguous().to_vector<float>();
}

bool kiln_set_tile_kernel(const char* name) {
  using kiln::cpu::OnednnTileKernel;
  if (!std::strcmp(name, "auto")) {
    kiln::cpu::onednn_matmul_force_kernel_for_testing(std::nullopt);
    return true;
  }
  for (OnednnTileKernel kernel : kiln::cpu::kOnednnTileKernels)
    if (!std::strcmp(name, kiln::cpu::onednn_tile_kernel_name(kernel))) {
      kiln::cpu::onednn_matmul_force_kernel_for_testing(kernel);
      return true;
    }
  return false;
}

int kiln_set_threads(int threads) {
  omp_set_num_threads(threads);
  return omp_get_max_threads();
}

}  // namespace side_by_side::cpu
