// Helpers of the graph suite (and its CUDA twin): the op names of a graph's nodes, an
// independent float64 reference of nn::MLP's forward, and an observer that lists the ops the
// user's level (depth 0) called.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "testing.h"

namespace kiln::testing {

/// The op of each node of `g`, in program order.
inline std::vector<std::string> node_ops(const graph::Graph& g) {
  std::vector<std::string> ops;
  for (const graph::Node* n : g.nodes()) ops.push_back(n->op().name);
  return ops;
}

/// GELU in float64: exact (erf) or the tanh approximation.
inline double gelu_ref(double x, bool tanh_approx) {
  if (!tanh_approx) return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

/// nn::MLP's forward on `x` [rows, in] in float64 from the parameters' values (Linear, GELU,
/// ..., Linear, no dropout): the flat [rows, out] result.
inline std::vector<double> reference_mlp(const nn::Module& mlp, const Tensor& x, bool tanh_approx) {
  const auto params = mlp.named_parameters();
  REQUIRE(params.size() % 2 == 0);
  Tensor h = x.to(Device::cpu(), kFloat64);
  std::vector<double> out;
  for (size_t i = 0; i < params.size(); i += 2) {
    const Tensor& w = params[i].second;
    const Tensor& b = params[i + 1].second;
    out = reference_linear(h, w.to(Device::cpu()), b.to(Device::cpu()));
    const bool last = i + 2 == params.size();
    if (!last)
      for (double& v : out) v = gelu_ref(v, tanh_approx);
    h = from_vector(out, {x.sizes()[0], w.sizes()[0]});
  }
  return out;
}

/// Records the ops called at depth 0 while installed on this thread.
struct TopLevelOps : OpObserver {
  std::vector<std::string> names;
  void on_op_begin(const OpCall& call) override {
    if (call.depth == 0) names.push_back(call.name);
  }
  void on_op_end(const OpCall&) override {}
};

}  // namespace kiln::testing
