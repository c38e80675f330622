// The optimizers on the GPU: the multi-tensor launch (one launch for many parameters) gives
// the same bits as the per-parameter kernel, and the same bits as the CPU (one functor, no
// multiply-add contraction on either side), in every floating dtype, over many tensor sizes
// (empty, odd, several chunks, misaligned views, more tensors than one launch carries); both
// follow the float64 reference over several steps; the optimizers over a module on the GPU
// match the same optimizers on the CPU bit for bit; errors, state dicts across devices and
// clip_grad_norm_ on the GPU.
#ifdef KILN_WITH_CUDA

#include <vector>

#include "optim/optim_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const Device kGpu = Device::cuda(0);

// Parameter sizes that exercise the multi-tensor kernel: empty, tiny, odd tails, exactly one
// chunk (16384), several chunks with a tail.
const std::vector<int64_t> kSizes = {0, 1, 3, 4, 5, 129, 1000, 16384, 16385, 2 * 16384 + 7, 70001};

// `count` contiguous GPU tensors of the sizes above (cycled) in `dtype`, from values in [lo, hi).
std::vector<Tensor> gpu_tensors(size_t count, DType dtype, double lo, double hi) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < count; ++i) out.push_back(random({kSizes[i % kSizes.size()]}, dtype, lo, hi).to(kGpu));
  return out;
}

std::vector<Tensor> clones(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.clone());
  return out;
}

std::vector<Tensor> to_cpu(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.cpu());
  return out;
}

void check_bitwise(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const char* what) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(what << " " << i << " (" << a[i].numel() << " elements)");
    CHECK(bitwise_equal(a[i], b[i]));
  }
}

const AdamConfig kAdamW{
    .lr = 0.01, .beta1 = 0.85, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.05, .amsgrad = false, .maximize = false};

}  // namespace

TEST_CASE("Multi-tensor Adam/AdamW: the same bits as the per-parameter kernel and as the CPU") {
  manual_seed(1501);
  for (DType dtype : kFloatTypes)
    for (bool decoupled : {false, true})
      for (bool amsgrad : {false, true}) {
        INFO(dtype_name(dtype) << (decoupled ? " AdamW" : " Adam") << (amsgrad ? " amsgrad" : ""));
        AdamConfig c = kAdamW;
        c.amsgrad = amsgrad;
        c.maximize = dtype == kFloat16;  // maximize on in one dtype
        const size_t n = 60;             // more than one launch carries (48)
        std::vector<Tensor> p = gpu_tensors(n, dtype, -1, 1), g = gpu_tensors(n, dtype, -2, 2);
        std::vector<Tensor> m = gpu_tensors(n, dtype, -1, 1), v = gpu_tensors(n, dtype, 0, 2);
        std::vector<Tensor> vmax = amsgrad ? gpu_tensors(n, dtype, 0, 2) : std::vector<Tensor>();
        std::vector<double> steps;
        for (size_t i = 0; i < n; ++i) steps.push_back(static_cast<double>(1 + i % 7));
        REQUIRE(fused_step_uses_multi_tensor({p, g, m, v, vmax}));
        std::vector<Tensor> p1 = clones(p), m1 = clones(m), v1 = clones(v), vmax1 = clones(vmax);
        std::vector<Tensor> pc = to_cpu(p), gc = to_cpu(g), mc = to_cpu(m), vc = to_cpu(v), vmaxc = to_cpu(vmax);
        if (decoupled)
          _fused_adamw_(p, g, m, v, vmax, steps, c);
        else
          _fused_adam_(p, g, m, v, vmax, steps, c);
        for (size_t i = 0; i < n; ++i) {
          const Tensor none;
          if (decoupled) {
            _fused_adamw_(p1[i], g[i], m1[i], v1[i], amsgrad ? vmax1[i] : none, steps[i], c);
            _fused_adamw_(pc[i], gc[i], mc[i], vc[i], amsgrad ? vmaxc[i] : none, steps[i], c);
          } else {
            _fused_adam_(p1[i], g[i], m1[i], v1[i], amsgrad ? vmax1[i] : none, steps[i], c);
            _fused_adam_(pc[i], gc[i], mc[i], vc[i], amsgrad ? vmaxc[i] : none, steps[i], c);
          }
        }
        check_bitwise(p, p1, "param, multi vs per-parameter");
        check_bitwise(m, m1, "exp_avg, multi vs per-parameter");
        check_bitwise(v, v1, "exp_avg_sq, multi vs per-parameter");
        check_bitwise(vmax, vmax1, "max_exp_avg_sq, multi vs per-parameter");
        check_bitwise(p, pc, "param, GPU vs CPU");
        check_bitwise(m, mc, "exp_avg, GPU vs CPU");
        check_bitwise(v, vc, "exp_avg_sq, GPU vs CPU");
      }
}

TEST_CASE("Multi-tensor SGD: the same bits as the per-parameter kernel and as the CPU") {
  manual_seed(1502);
  const std::vector<SgdConfig> configs = {
      {.lr = 0.1, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01, .maximize = true},
      {.lr = 0.05, .momentum = 0.9, .nesterov = true},
  };
  for (DType dtype : kFloatTypes)
    for (size_t k = 0; k < configs.size(); ++k) {
      INFO(dtype_name(dtype) << " config " << k);
      const SgdConfig& c = configs[k];
      const size_t n = 50;
      std::vector<Tensor> p = gpu_tensors(n, dtype, -1, 1), g = gpu_tensors(n, dtype, -2, 2);
      std::vector<Tensor> buf = c.momentum != 0 ? gpu_tensors(n, dtype, -1, 1) : std::vector<Tensor>();
      std::unique_ptr<bool[]> first(new bool[n]);
      for (size_t i = 0; i < n; ++i) first[i] = i % 3 == 0;
      REQUIRE(fused_step_uses_multi_tensor({p, g, buf}));
      std::vector<Tensor> p1 = clones(p), buf1 = clones(buf), pc = to_cpu(p), gc = to_cpu(g), bufc = to_cpu(buf);
      _fused_sgd_(p, g, buf, c, std::span<const bool>(first.get(), n));
      for (size_t i = 0; i < n; ++i) {
        const Tensor none;
        _fused_sgd_(p1[i], g[i], buf.empty() ? none : buf1[i], c, first[i]);
        _fused_sgd_(pc[i], gc[i], buf.empty() ? none : bufc[i], c, first[i]);
      }
      check_bitwise(p, p1, "param, multi vs per-parameter");
      check_bitwise(buf, buf1, "momentum_buffer, multi vs per-parameter");
      check_bitwise(p, pc, "param, GPU vs CPU");
      check_bitwise(buf, bufc, "momentum_buffer, GPU vs CPU");
    }
}

TEST_CASE("Multi-tensor steps take the scalar path for misaligned views and still agree") {
  manual_seed(1503);
  // Contiguous 1-D views starting one element into their storage: not 16-byte aligned.
  std::vector<Tensor> p, g, m, v;
  for (int64_t n : {5, 16390, 40000}) {
    p.push_back(random({n + 1}).to(kGpu).slice(0, 1, n + 1));
    g.push_back(random({n + 1}).to(kGpu).slice(0, 1, n + 1));
    m.push_back(random({n + 1}).to(kGpu).slice(0, 1, n + 1));
    v.push_back(random({n + 1}, kFloat32, 0, 1).to(kGpu).slice(0, 1, n + 1));
  }
  p.push_back(random({9}).to(kGpu));  // an aligned one in the same launch
  g.push_back(random({9}).to(kGpu));
  m.push_back(random({9}).to(kGpu));
  v.push_back(random({9}, kFloat32, 0, 1).to(kGpu));
  REQUIRE(fused_step_uses_multi_tensor({p, g, m, v}));
  std::vector<Tensor> pc = to_cpu(p), gc = to_cpu(g), mc = to_cpu(m), vc = to_cpu(v);
  const std::vector<double> steps = {1, 2, 3, 4};
  _fused_adamw_(p, g, m, v, {}, steps, kAdamW);
  _fused_adamw_(pc, gc, mc, vc, {}, steps, kAdamW);
  check_bitwise(p, pc, "param");
  check_bitwise(m, mc, "exp_avg");
  check_bitwise(v, vc, "exp_avg_sq");
}

TEST_CASE("The per-parameter CUDA kernel on strided operands matches the CPU bit for bit") {
  manual_seed(1504);
  for (DType dtype : kFloatTypes) {
    INFO(dtype_name(dtype));
    Tensor p = random({40, 30}, dtype).to(kGpu).t(), g = random({30, 40}, dtype).to(kGpu);
    Tensor m = zeros({30, 40}, TensorOptions(dtype).device(kGpu)),
           v = zeros({30, 40}, TensorOptions(dtype).device(kGpu));
    Tensor pc = p.cpu(), gc = g.cpu(), mc = m.cpu(), vc = v.cpu();
    REQUIRE_FALSE(fused_step_uses_multi_tensor({std::span<const Tensor>(&p, 1)}));
    _fused_adam_(p, g, m, v, Tensor(), 1, kAdamW);
    _fused_adam_(pc, gc, mc, vc, Tensor(), 1, kAdamW);
    CHECK(bitwise_equal(p, pc));
    CHECK(bitwise_equal(v, vc));
  }
}

TEST_CASE("AdamW's multi-tensor path follows the float64 reference over several steps") {
  manual_seed(1505);
  const RefAdam r{
      .lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.05, .amsgrad = true, .decoupled = true};
  std::vector<Tensor> params;
  for (int64_t n : {7, 16385, 3000}) params.push_back(random_param({n}).to(kGpu));
  std::vector<RefAdamParam> ref(params.size());
  for (size_t i = 0; i < params.size(); ++i) ref[i].p = values(params[i]);
  optim::AdamW opt(
      params, {.lr = r.lr, .betas = {r.beta1, r.beta2}, .eps = r.eps, .weight_decay = r.weight_decay, .amsgrad = true});
  for (int s = 0; s < 5; ++s) {
    for (size_t i = 0; i < params.size(); ++i) ref[i].step(set_random_grad(params[i]), r);
    opt.step();
  }
  for (size_t i = 0; i < params.size(); ++i) {
    check_close(params[i], ref[i].p, params[i].sizes(), "param");
    check_close(opt.state(i).exp_avg, ref[i].m, params[i].sizes(), "exp_avg");
    CHECK(opt.state(i).exp_avg.device() == kGpu);
  }
}

TEST_CASE("SGD, Adam and AdamW over an MLP on the GPU match the same optimizers on the CPU bit for bit") {
  manual_seed(1506);
  nn::MLP gpu_mlp({64, 256, 10}, nn::Activation::GELU);
  nn::MLP cpu_mlp({64, 256, 10}, nn::Activation::GELU);
  const auto gp = gpu_mlp.parameters(), cp = cpu_mlp.parameters();
  {
    NoGradGuard no_grad;  // parameters are leaves that require grad
    for (size_t i = 0; i < gp.size(); ++i) Tensor(cp[i]).copy_(gp[i]);
  }
  gpu_mlp.to(kGpu);
  optim::AdamW gpu_adamw(gpu_mlp.parameters(), {.lr = 1e-2});
  optim::AdamW cpu_adamw(cpu_mlp.parameters(), {.lr = 1e-2});
  optim::SGD gpu_sgd(gpu_mlp.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  optim::SGD cpu_sgd(cpu_mlp.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  optim::Adam gpu_adam(gpu_mlp.parameters(), {.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true});
  optim::Adam cpu_adam(cpu_mlp.parameters(), {.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true});
  for (int s = 0; s < 3; ++s)
    for (int which = 0; which < 3; ++which) {
      auto g = gpu_mlp.parameters(), c = cpu_mlp.parameters();
      for (size_t i = 0; i < g.size(); ++i) {
        c[i].mutable_grad() = random(c[i].sizes());
        g[i].mutable_grad() = c[i].grad().to(kGpu);
      }
      optim::Optimizer& og = which == 0   ? static_cast<optim::Optimizer&>(gpu_adamw)
                             : which == 1 ? static_cast<optim::Optimizer&>(gpu_sgd)
                                          : static_cast<optim::Optimizer&>(gpu_adam);
      optim::Optimizer& oc = which == 0   ? static_cast<optim::Optimizer&>(cpu_adamw)
                             : which == 1 ? static_cast<optim::Optimizer&>(cpu_sgd)
                                          : static_cast<optim::Optimizer&>(cpu_adam);
      og.step();
      oc.step();
      check_bitwise(gpu_mlp.parameters(), cpu_mlp.parameters(), og.name().c_str());
    }
}

TEST_CASE("Optimizers on the GPU: a gradient on another device is refused, naming the parameter") {
  Tensor p = random_param({3}).to(kGpu);
  optim::AdamW opt({p});
  p.mutable_grad() = random({3});
  CHECK_THROWS_WITH_AS(opt.step(),
                       doctest::Contains("AdamW: the gradient of parameter 0 is on cpu but the parameter is "
                                         "on cuda:0"),
                       Error);
}

TEST_CASE("An optimizer's state dict moves between devices") {
  manual_seed(1507);
  Tensor p = random_param({4, 4}).to(kGpu);
  optim::Adam opt({p}, {.lr = 0.01});
  set_random_grad(p);
  opt.step();
  const StateDict sd = opt.state_dict();
  CHECK(sd.at("state.0.exp_avg").device() == kGpu);  // copies on the parameter's device
  CHECK(sd.at("state.0.step").device() == Device::cpu());
  Tensor q = p.cpu();
  optim::Adam cpu_opt({q}, {.lr = 0.01});
  cpu_opt.load_state_dict(sd);
  CHECK(cpu_opt.state(0).exp_avg.device() == Device::cpu());
  CHECK(bitwise_equal(cpu_opt.state(0).exp_avg, opt.state(0).exp_avg));
  q.mutable_grad() = random({4, 4});
  p.mutable_grad() = q.grad().to(kGpu);
  opt.step();
  cpu_opt.step();
  CHECK(bitwise_equal(p, q));
}

TEST_CASE("clip_grad_norm_ on the GPU agrees with the CPU") {
  manual_seed(1508);
  for (double norm_type : {2.0, kInf}) {
    std::vector<Tensor> gpu = {random_param({100, 30}).to(kGpu), random_param({77}).to(kGpu)};
    std::vector<Tensor> cpu = {gpu[0].cpu(), gpu[1].cpu()};
    for (size_t i = 0; i < 2; ++i) {
      set_random_grad(gpu[i]);
      cpu[i].mutable_grad() = gpu[i].grad().cpu();
    }
    const Tensor tg = nn::utils::clip_grad_norm_(gpu, 1.0, norm_type);
    const Tensor tc = nn::utils::clip_grad_norm_(cpu, 1.0, norm_type);
    CHECK(tg.device() == kGpu);
    CHECK(tg.item<double>() == doctest::Approx(tc.item<double>()).epsilon(1e-5));
    for (size_t i = 0; i < 2; ++i) check_close(gpu[i].grad(), values(cpu[i].grad()), cpu[i].sizes());
  }
}

#endif  // KILN_WITH_CUDA
