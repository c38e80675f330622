// One sample call per op in the op table (ops/op_list.h), shared by the replay test, the
// gradcheck test and their CUDA twins: the op's inputs (random values, never zeros; float
// inputs of `dtype`, some of them strided views) and a function calling the op on them.
// `differentiable` lists the input slots whose gradient the op's formula computes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "testing.h"

namespace kiln::testing {

struct OpSample {
  std::string op;                                             ///< the op's record name
  std::vector<Tensor> inputs;                                 ///< fn's arguments
  std::function<Tensor(const std::vector<Tensor>&)> fn;       ///< calls the op (once, at depth 0)
  std::vector<size_t> differentiable;                         ///< inputs gradcheck differentiates
};

/// Samples for every op, on `device`, floating inputs in `dtype`.
inline std::vector<OpSample> op_samples(Device device, DType dtype) {
  const TensorOptions fo = TensorOptions(dtype).device(device);
  auto r = [&](const Shape& s, double lo = -2.0, double hi = 2.0) { return random(s, dtype, lo, hi).to(device); };
  auto pos = [&](const Shape& s) { return r(s, 0.5, 2.0); };
  auto idx = [&](std::vector<int64_t> v, const Shape& s) { return from_vector(v, s).to(device); };
  using V = const std::vector<Tensor>&;
  std::vector<OpSample> s;
  auto sample = [&](std::string op, std::vector<Tensor> in, std::function<Tensor(V)> fn, std::vector<size_t> d = {}) {
    s.push_back({std::move(op), std::move(in), std::move(fn), std::move(d)});
  };
  // A transposed (strided) operand, so formulas and kernels see a non-contiguous input.
  const Tensor at = r({4, 3}).t();
  sample("add", {r({3, 4}), r({4})}, [](V x) { return kiln::add(x[0], x[1], 2); }, {0, 1});
  sample("sub", {at, r({3, 1})}, [](V x) { return sub(x[0], x[1]); }, {0, 1});
  sample("mul", {r({3, 4}), r({3, 4})}, [](V x) { return mul(x[0], x[1]); }, {0, 1});
  sample("div", {r({2, 3}), pos({3})}, [](V x) { return div(x[0], x[1]); }, {0, 1});
  sample("pow", {pos({2, 3}), r({2, 3}, 0.5, 1.5)}, [](V x) { return pow(x[0], x[1]); }, {0, 1});
  for (const char* c : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    const std::string name = c;
    sample(name, {r({5}), r({5})}, [name](V x) {
      if (name == "eq") return eq(x[0], x[1]);
      if (name == "ne") return ne(x[0], x[1]);
      if (name == "lt") return lt(x[0], x[1]);
      if (name == "le") return le(x[0], x[1]);
      if (name == "gt") return gt(x[0], x[1]);
      return ge(x[0], x[1]);
    });
  }
  sample("where", {gt(r({3, 4}), 0), r({3, 4}), r({4})}, [](V x) { return where(x[0], x[1], x[2]); }, {1, 2});
  sample("equal", {r({3}), r({3})}, [](V x) { return full({}, equal(x[0], x[1])); });
  sample("allclose", {r({3}), r({3})}, [](V x) { return full({}, allclose(x[0], x[1], 1e-3, 1e-4)); });
  sample("neg", {at}, [](V x) { return neg(x[0]); }, {0});
  sample("exp", {r({3, 2})}, [](V x) { return exp(x[0]); }, {0});
  sample("log", {pos({3, 2})}, [](V x) { return log(x[0]); }, {0});
  sample("sqrt", {pos({3, 2})}, [](V x) { return sqrt(x[0]); }, {0});
  sample("rsqrt", {pos({3, 2})}, [](V x) { return rsqrt(x[0]); }, {0});
  sample("abs", {r({3, 2})}, [](V x) { return abs(x[0]); }, {0});
  sample("tanh", {at}, [](V x) { return tanh(x[0]); }, {0});
  sample("sigmoid", {r({3, 2})}, [](V x) { return sigmoid(x[0]); }, {0});
  sample("relu", {r({3, 2})}, [](V x) { return relu(x[0]); }, {0});
  sample("gelu", {at}, [](V x) { return gelu(x[0]); }, {0});
  sample("gelu", {r({3, 2})}, [](V x) { return gelu(x[0], "tanh"); }, {0});
  sample("silu", {r({3, 2})}, [](V x) { return silu(x[0]); }, {0});
  sample("gelu_backward", {r({3, 2}), r({3, 2})}, [](V x) { return gelu_backward(x[0], x[1], "tanh"); });
  sample("clamp", {r({3, 4})}, [](V x) { return clamp(x[0], -0.5, 0.7); }, {0});
  sample("clamp_", {r({3, 4})}, [](V x) { Tensor t = x[0].clone(); return clamp_(t, -0.5, std::nullopt); });
  sample("clamp_min", {at}, [](V x) { return clamp_min(x[0], 0.1); }, {0});
  sample("clamp_max", {r({3, 4})}, [](V x) { return clamp_max(x[0], 0.1); }, {0});
  sample("dropout", {r({4, 5})}, [](V x) { return dropout(x[0], 0.3, true); }, {0});
  sample("masked_fill", {r({3, 4}), gt(r({4}), 0)}, [](V x) { return masked_fill(x[0], x[1], 1.5); }, {0});
  sample("masked_fill_", {r({3, 4}), gt(r({3, 4}), 0)},
      [](V x) { Tensor t = mul(x[0], 1); return masked_fill_(t, x[1], -1.0); }, {0});
  sample("sum", {r({3, 4, 2})}, [](V x) { return sum(x[0], {0, 2}); }, {0});
  sample("sum", {at}, [](V x) { return sum(x[0]); }, {0});
  sample("mean", {r({3, 4})}, [](V x) { return mean(x[0], {1}, true); }, {0});
  sample("max", {r({3, 4})}, [](V x) { return max(x[0], {1}); }, {0});
  sample("min", {r({3, 4})}, [](V x) { return min(x[0]); }, {0});
  sample("amax", {r({3, 4})}, [](V x) { return amax(x[0], {0}, true); }, {0});
  sample("amin", {at}, [](V x) { return amin(x[0], {1}); }, {0});
  sample("argmax", {r({3, 4})}, [](V x) { return argmax(x[0], 1); });
  sample("argmin", {r({3, 4})}, [](V x) { return argmin(x[0]); });
  sample("softmax", {r({3, 5})}, [](V x) { return softmax(x[0], 1); }, {0});
  sample("log_softmax", {at}, [](V x) { return log_softmax(x[0], 0); }, {0});
  sample("layer_norm", {r({3, 5}), r({5}), r({5})},
      [](V x) { return layer_norm(x[0], {5}, x[1], x[2], 1e-5); }, {0, 1, 2});
  const Tensor target = idx({2, 0, 4, 1}, {4});
  sample("nll_loss", {log_softmax(r({4, 5}), 1), target}, [](V x) { return nll_loss(x[0], x[1]); }, {0});
  sample("cross_entropy", {r({4, 5}), target}, [](V x) { return cross_entropy(x[0], x[1]); }, {0});
  sample("_nll_loss_forward", {log_softmax(r({4, 5}), 1), target},
         [](V x) { return _nll_loss_forward(x[0], x[1], 4).loss; }, {0});
  sample("_cross_entropy_forward", {r({4, 5}), target}, [](V x) { return _cross_entropy_forward(x[0], x[1]).loss; },
         {0});
  sample("_nll_loss_backward", {r({}), log_softmax(r({4, 5}), 1), target}, [](V x) {
    return _nll_loss_backward(x[0], x[1], x[2], _nll_loss_forward(x[1], x[2], 1).count, 1);
  });
  sample("_cross_entropy_backward", {r({}), r({4, 5}), target}, [](V x) {
    const CrossEntropyForward f = _cross_entropy_forward(x[1], x[2]);
    return _cross_entropy_backward(x[0], x[1], x[2], f.logsumexp, f.count);
  });
  sample("mse_loss", {r({3, 4}), r({3, 4})}, [](V x) { return mse_loss(x[0], x[1]); }, {0, 1});
  sample("matmul", {r({2, 3, 4}), r({4, 5})}, [](V x) { return matmul(x[0], x[1]); }, {0, 1});
  sample("matmul", {r({4}), r({2, 4, 3})}, [](V x) { return matmul(x[0], x[1]); }, {0, 1});
  sample("mm", {at, r({4, 2})}, [](V x) { return mm(x[0], x[1]); }, {0, 1});
  sample("addmm", {r({2}), r({3, 4}), r({4, 2})}, [](V x) { return addmm(x[0], x[1], x[2], 0.5, 2); }, {0, 1, 2});
  sample("linear", {r({2, 3, 4}), r({5, 4}), r({5})}, [](V x) { return linear(x[0], x[1], x[2]); }, {0, 1, 2});
  sample("fused_linear_gelu", {r({2, 3, 4}), r({5, 4}), r({5})},
      [](V x) { return fused_linear_gelu(x[0], x[1], x[2]); }, {0, 1, 2});
  sample("fused_linear_gelu", {at, r({4, 5}).t()}, [](V x) { return fused_linear_gelu(x[0], x[1], {}, "tanh"); },
      {0, 1});
  sample("fused_linear_gelu_backward", {r({2, 3, 5}), r({2, 3, 4}), r({5, 4}), r({2, 3, 5})}, [](V x) {
    return fused_linear_gelu_backward(x[0], x[1], x[2], x[3], "tanh").weight;
  });
  sample("view", {r({3, 4})}, [](V x) { return x[0].view({2, 6}); }, {0});
  sample("reshape", {at}, [](V x) { return x[0].reshape({-1}); }, {0});
  sample("transpose", {r({2, 3, 4})}, [](V x) { return x[0].transpose(0, 2); }, {0});
  sample("t", {r({3, 4})}, [](V x) { return x[0].t(); }, {0});
  sample("permute", {r({2, 3, 4})}, [](V x) { return x[0].permute({1, 2, 0}); }, {0});
  sample("narrow", {r({5, 3})}, [](V x) { return x[0].narrow(0, 1, 3); }, {0});
  sample("slice", {r({7, 3})}, [](V x) { return x[0].slice(0, 1, 7, 2); }, {0});
  sample("select", {r({4, 3})}, [](V x) { return x[0].select(1, -1); }, {0});
  sample("unsqueeze", {r({4, 3})}, [](V x) { return x[0].unsqueeze(1); }, {0});
  sample("squeeze", {r({4, 1, 3})}, [](V x) { return x[0].squeeze(); }, {0});
  sample("expand", {r({3, 1})}, [](V x) { return x[0].expand({2, 3, 4}); }, {0});
  sample("as_strided", {r({12})}, [](V x) { return x[0].as_strided({3, 3}, {3, 1}, 1); }, {0});
  sample("detach", {r({3})}, [](V x) { return x[0].detach(); });
  sample("cat", {r({2, 3}), r({3, 2}).t(), r({1, 3})}, [](V x) { return cat({x[0], x[1], x[2]}, 0); }, {0, 1, 2});
  sample("stack", {r({2, 3}), r({2, 3})}, [](V x) { return stack({x[0], x[1]}, 1); }, {0, 1});
  sample("index_select", {r({4, 3}), idx({3, 0, 3}, {3})}, [](V x) { return index_select(x[0], 0, x[1]); }, {0});
  sample("gather", {r({3, 4}), idx({0, 3, 1, 1, 2, 2}, {3, 2})}, [](V x) { return gather(x[0], 1, x[1]); }, {0});
  sample("scatter", {r({3, 4}), idx({0, 3, 1, 2}, {2, 2}), r({2, 2})},
      [](V x) { return scatter(x[0], 1, x[1], x[2]); }, {0, 2});
  sample("scatter_", {r({3, 4}), idx({0, 3, 1, 2}, {2, 2}), r({2, 2})},
      [](V x) { Tensor t = mul(x[0], 1); return scatter_(t, 1, x[1], x[2]); }, {0, 2});
  sample("scatter_add", {r({3, 4}), idx({0, 0, 1, 1}, {2, 2}), r({2, 2})},
      [](V x) { return scatter_add(x[0], 1, x[1], x[2]); }, {0, 2});
  sample("scatter_add_", {r({3, 4}), idx({0, 0, 1, 1}, {2, 2}), r({2, 2})},
      [](V x) { Tensor t = mul(x[0], 1); return scatter_add_(t, 1, x[1], x[2]); }, {0, 2});
  sample("embedding", {r({5, 3}), idx({4, 0, 4, 2}, {2, 2})}, [](V x) { return embedding(x[0], x[1]); }, {0});
  sample("copy_", {r({3, 4}), r({4})}, [](V x) { Tensor t = mul(x[0], 1); return t.copy_(x[1]); }, {0, 1});
  sample("clone", {at}, [](V x) { return x[0].clone(); }, {0});
  sample("contiguous", {at}, [](V x) { return x[0].contiguous(); }, {0});
  // to's gradient (a conversion back) is checked in tests/autograd/test_engine.cpp: a float32
  // round trip has no float64 central difference to compare with.
  sample("to", {r({3})}, [](V x) { return x[0].to(x[0].dtype() == kFloat64 ? kFloat32 : kFloat64).to(x[0].dtype()); });
  sample("_to_copy", {r({3})}, [](V x) { return x[0].to(kFloat16); });
  sample("item", {r({1})}, [](V x) { return full({}, x[0].item()); });
  sample("_local_scalar_dense", {r({1})}, [](V x) { return full({}, x[0].item()); });
  sample("to_vector", {r({3})}, [](V x) {
    (void)x[0].to_vector<double>();
    return x[0].to(Device::cpu()).clone();
  });
  sample("empty", {}, [fo](V) { return empty({2, 3}, fo).fill_(1); });
  sample("zeros", {}, [fo](V) { return zeros({2, 3}, fo); });
  sample("ones", {}, [fo](V) { return ones({2, 3}, fo); });
  sample("full", {}, [fo](V) { return full({2, 3}, 2.5, fo); });
  sample("eye", {}, [fo](V) { return eye(3, 4, fo); });
  sample("arange", {}, [device](V) { return arange(1, 10, 3, TensorOptions(kInt64).device(device)); });
  sample("rand", {}, [fo](V) { return rand({4}, fo); });
  sample("randn", {}, [fo](V) { return randn({4}, fo); });
  sample("from_vector", {}, [](V) { return from_vector(std::vector<double>{1, 2}); });
  sample("tensor", {}, [](V) { return tensor({1.0, 2.0}); });
  sample("fill_", {r({3})}, [](V x) { Tensor t = x[0].clone(); return t.fill_(4); });
  sample("zero_", {r({3})}, [](V x) { Tensor t = x[0].clone(); return t.zero_(); });
  sample("uniform_", {r({3})}, [](V x) { Tensor t = x[0].clone(); return t.uniform_(-1, 1); });
  sample("normal_", {r({3})}, [](V x) { Tensor t = x[0].clone(); return t.normal_(0, 2); });
  // Optimizer steps (the list forms; state tensors positive where a square root reads them).
  sample("_fused_sgd_", {r({3, 2}), r({3, 2}), r({3, 2}), r({4}), r({4}), r({4})}, [](V x) {
    const std::vector<Tensor> c = {x[0].clone(), x[3].clone()};
    const std::vector<Tensor> g = {x[1], x[4]}, m = {x[2].clone(), x[5].clone()};
    const bool first[] = {false, true};
    _fused_sgd_(c, g, m, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01, .nesterov = true},
                first);
    return cat({c[0].reshape({-1}), c[1]}, 0);
  });
  for (const char* name : {"_fused_adam_", "_fused_adamw_"}) {
    const std::string op = name;
    sample(op, {r({3, 2}), r({3, 2}), r({3, 2}), pos({3, 2})}, [op](V x) {
      const std::vector<Tensor> p = {x[0].clone()}, g = {x[1]}, m = {x[2].clone()}, v = {x[3].clone()};
      const double steps[] = {3};
      const AdamConfig config{.lr = 0.01, .weight_decay = 0.1};
      if (op == "_fused_adam_") _fused_adam_(p, g, m, v, {}, steps, config);
      else _fused_adamw_(p, g, m, v, {}, steps, config);
      return p[0];
    });
  }
  return s;
}

/// Ops without a sample here, by design: each needs something a table row cannot give.
inline const std::vector<std::string> kOpsWithoutSample = {
    "pin_memory", "_pin_memory",  // a CUDA build with a visible GPU (tests/cuda covers them)
    "record_stream",              // takes a stream, not a tensor argument; not replayable
};

}  // namespace kiln::testing
