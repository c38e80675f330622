// optim::Adam and optim::AdamW against the float64 reference of PyTorch's rules
// (optim_testing.h): defaults, every option over several steps with fresh random gradients,
// per-parameter step counts (a parameter that skipped steps has its own bias correction),
// param groups, the state dict (keys, a resume with a scheduler that continues bit for bit,
// refusals that leave the optimizer unchanged) and each error.
#include "optim_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

template <typename Options>
Options to_options(const RefAdam& r) {
  return {.lr = r.lr,
          .betas = {r.beta1, r.beta2},
          .eps = r.eps,
          .weight_decay = r.weight_decay,
          .amsgrad = r.amsgrad,
          .maximize = r.maximize};
}

// `steps` steps of Adam (or AdamW when r.decoupled) on two parameters in `dtype`, checked
// against the reference after each: parameters, moments and step counts.
template <typename Opt, typename Options>
void check_adam_steps(const RefAdam& r, DType dtype, int steps) {
  std::vector<Tensor> params = {random_param({4, 3}, dtype), random_param({6}, dtype)};
  std::vector<RefAdamParam> ref(params.size());
  for (size_t i = 0; i < params.size(); ++i) ref[i].p = values(params[i]);
  Opt opt(params, to_options<Options>(r));
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < params.size(); ++i) ref[i].step(set_random_grad(params[i]), r);
    opt.step();
    for (size_t i = 0; i < params.size(); ++i) {
      INFO("param " << i << " after step " << s + 1);
      check_close(params[i], ref[i].p, params[i].sizes(), "param");
      const optim::AdamState& st = opt.state(i);
      CHECK(st.step == s + 1);
      check_close(st.exp_avg, ref[i].m, params[i].sizes(), "exp_avg");
      check_close(st.exp_avg_sq, ref[i].v, params[i].sizes(), "exp_avg_sq");
      if (r.amsgrad)
        check_close(st.max_exp_avg_sq, ref[i].vmax, params[i].sizes(), "max_exp_avg_sq");
      else
        CHECK_FALSE(st.max_exp_avg_sq.defined());
      CHECK(st.exp_avg.dtype() == dtype);
    }
  }
}

const std::vector<std::pair<std::string, RefAdam>>& adam_cases() {
  static const std::vector<std::pair<std::string, RefAdam>> cases = {
      {"defaults", {}},
      {"lr and betas", {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95}},
      {"eps", {.lr = 0.01, .eps = 1e-3}},
      {"weight_decay", {.lr = 0.01, .weight_decay = 0.1}},
      {"amsgrad", {.lr = 0.01, .amsgrad = true}},
      {"maximize", {.lr = 0.01, .maximize = true}},
      {"everything",
       {.lr = 0.02, .beta1 = 0.5, .beta2 = 0.9, .eps = 1e-4, .weight_decay = 0.2, .amsgrad = true, .maximize = true}},
  };
  return cases;
}

}  // namespace

TEST_CASE("Adam and AdamW defaults are PyTorch's") {
  const optim::AdamOptions a;
  CHECK(a.lr == 1e-3);
  CHECK(a.betas.first == 0.9);
  CHECK(a.betas.second == 0.999);
  CHECK(a.eps == 1e-8);
  CHECK(a.weight_decay == 0.0);
  CHECK_FALSE(a.amsgrad);
  CHECK_FALSE(a.maximize);
  const optim::AdamWOptions w;
  CHECK(w.lr == 1e-3);
  CHECK(w.betas.first == 0.9);
  CHECK(w.betas.second == 0.999);
  CHECK(w.eps == 1e-8);
  CHECK(w.weight_decay == 1e-2);
  CHECK_FALSE(w.amsgrad);
  // Designated initialisers keep the other defaults.
  optim::AdamW opt({random_param({2})}, {.lr = 3e-4, .amsgrad = true});
  CHECK(opt.name() == "AdamW");
  CHECK(opt.options(0).weight_decay == 1e-2);
  CHECK(opt.options(0).amsgrad);
  CHECK(opt.lr(0) == 3e-4);
  optim::Adam adam({random_param({2})});
  CHECK(adam.name() == "Adam");
}

TEST_CASE("Adam steps match the float64 reference for every option") {
  manual_seed(1421);
  for (const auto& [name, r] : adam_cases())
    for (DType dtype : {kFloat32, kFloat64}) {
      INFO(name << " " << dtype_name(dtype));
      check_adam_steps<optim::Adam, optim::AdamOptions>(r, dtype, 6);
    }
}

TEST_CASE("AdamW steps match the float64 reference for every option") {
  manual_seed(1422);
  for (auto [name, r] : adam_cases()) {
    r.decoupled = true;
    if (name == "defaults") r.weight_decay = 1e-2;  // AdamW's default
    for (DType dtype : {kFloat32, kFloat64}) {
      INFO(name << " " << dtype_name(dtype));
      check_adam_steps<optim::AdamW, optim::AdamWOptions>(r, dtype, 6);
    }
  }
}

TEST_CASE("Adam and AdamW in float16 and bfloat16 match the reference over one step") {
  manual_seed(1423);
  for (DType dtype : {kFloat16, kBFloat16}) {
    INFO(dtype_name(dtype));
    check_adam_steps<optim::Adam, optim::AdamOptions>({.lr = 0.01, .weight_decay = 0.1, .amsgrad = true}, dtype, 1);
    check_adam_steps<optim::AdamW, optim::AdamWOptions>({.lr = 0.01, .weight_decay = 0.1, .decoupled = true}, dtype, 1);
  }
}

TEST_CASE("Adam's L2 weight decay and AdamW's decoupled decay give different updates") {
  manual_seed(1424);
  Tensor p = random_param({8});
  Tensor q = p.clone();
  optim::Adam adam({p}, {.lr = 0.1, .weight_decay = 0.5});
  optim::AdamW adamw({q}, {.lr = 0.1, .weight_decay = 0.5});
  const Tensor g = random({8});
  p.mutable_grad() = g;
  q.mutable_grad() = g.clone();
  adam.step();
  adamw.step();
  // First step: Adam's update is lr * sign(g + wd * p) (bias-corrected), AdamW's is
  // p * (1 - lr * wd) - lr * sign(g).
  CHECK_FALSE(bitwise_equal(p, q));
  CHECK(values(adam.state(0).exp_avg) != values(adamw.state(0).exp_avg));
}

TEST_CASE("Each parameter keeps its own step count and bias correction") {
  manual_seed(1425);
  Tensor a = random_param({5}), b = random_param({5});
  const RefAdam r{.lr = 0.05, .weight_decay = 0.01, .decoupled = true};
  optim::AdamW opt({a, b}, to_options<optim::AdamWOptions>(r));
  RefAdamParam ref_a{values(a)}, ref_b{values(b)};
  for (int s = 0; s < 4; ++s) {
    ref_a.step(set_random_grad(a), r);
    if (s >= 2) ref_b.step(set_random_grad(b), r);  // b gets gradients from the third step on
    opt.step();
  }
  CHECK(opt.state(0).step == 4);
  CHECK(opt.state(1).step == 2);
  check_close(a, ref_a.p, {5});
  check_close(b, ref_b.p, {5});
}

TEST_CASE("Adam's param groups have their own options and skip parameters without gradients") {
  manual_seed(1426);
  Tensor a = random_param({3}), b = random_param({2}), c = random_param({4});
  const RefAdam ra{.lr = 0.01}, rc{.lr = 0.1, .beta1 = 0.7, .amsgrad = true};
  optim::Adam opt({a, b}, to_options<optim::AdamOptions>(ra));
  opt.add_param_group({c}, to_options<optim::AdamOptions>(rc));
  RefAdamParam ref_a{values(a)}, ref_c{values(c)};
  const std::vector<double> b_before = values(b);
  for (int s = 0; s < 3; ++s) {
    ref_a.step(set_random_grad(a), ra);
    ref_c.step(set_random_grad(c), rc);
    opt.step();
  }
  check_close(a, ref_a.p, {3});
  check_close(c, ref_c.p, {4});
  CHECK(values(b) == b_before);
  CHECK(opt.state(1).step == 0);
  CHECK_FALSE(opt.state(1).exp_avg.defined());
  // Changing a group's lr between steps (what schedulers do) takes effect.
  opt.set_lr(0, 0.2);
  RefAdam ra2 = ra;
  ra2.lr = 0.2;
  ref_a.step(set_random_grad(a), ra2);
  opt.step();
  check_close(a, ref_a.p, {3});
}

TEST_CASE("Adam updates non-contiguous parameters through their views") {
  manual_seed(1427);
  Tensor base = random_param({5, 9});
  Tensor p = base.slice(1, 1, 9, 2);  // every other column
  RefAdamParam ref{values(p)};
  const RefAdam r{.lr = 0.01, .amsgrad = true};
  optim::Adam opt({p}, to_options<optim::AdamOptions>(r));
  for (int s = 0; s < 3; ++s) {
    Tensor g = random({4, 5}).t();
    p.mutable_grad() = g;
    ref.step(values(g), r);
    opt.step();
  }
  check_close(p, ref.p, p.sizes());
}

TEST_CASE("Adam refuses invalid options with PyTorch's messages") {
  const std::vector<Tensor> ps = {random_param({2})};
  CHECK_THROWS_WITH_AS(optim::Adam(ps, {.lr = -1e-3}), doctest::Contains("Adam: invalid learning rate: -0.001"), Error);
  CHECK_THROWS_WITH_AS(optim::Adam(ps, {.eps = -1}), doctest::Contains("Adam: invalid epsilon value: -1"), Error);
  CHECK_THROWS_WITH_AS(optim::Adam(ps, {.betas = {1.0, 0.999}}),
                       doctest::Contains("Adam: invalid beta parameter at index 0: 1"), Error);
  CHECK_THROWS_WITH_AS(optim::AdamW(ps, {.betas = {0.9, -0.1}}),
                       doctest::Contains("AdamW: invalid beta parameter at index 1: -0.1"), Error);
  CHECK_THROWS_WITH_AS(optim::AdamW(ps, {.weight_decay = -0.01}),
                       doctest::Contains("AdamW: invalid weight_decay value: -0.01"), Error);
  CHECK_THROWS_WITH_AS(optim::AdamW({}), doctest::Contains("AdamW: got an empty parameter list"), Error);
}

TEST_CASE("AdamW refuses a gradient of the wrong shape or dtype, naming the parameter, before changing anything") {
  manual_seed(1428);
  Tensor a = random_param({3}), b = random_param({2});
  optim::AdamW opt({a, b});
  set_random_grad(a);
  b.mutable_grad() = random({3});
  const std::vector<double> a_before = values(a);
  CHECK_THROWS_WITH_AS(opt.step(),
                       doctest::Contains("AdamW: the gradient of parameter 1 has shape [3] but the "
                                         "parameter has shape [2]"),
                       Error);
  b.mutable_grad() = random({2}, kFloat16);
  CHECK_THROWS_WITH_AS(opt.step(),
                       doctest::Contains("AdamW: the gradient of parameter 1 has dtype float16 but the "
                                         "parameter has dtype float32"),
                       Error);
  CHECK(values(a) == a_before);
  CHECK(opt.state(0).step == 0);
}

TEST_CASE("AdamW's state dict: the key scheme") {
  manual_seed(1429);
  Tensor a = random_param({2, 2}), b = random_param({3});
  optim::AdamW opt({a, b}, {.lr = 0.01, .amsgrad = true});
  set_random_grad(a);
  opt.step();
  optim::StepLR sched(opt, 10);  // records initial_lr
  const StateDict sd = opt.state_dict();
  const std::vector<std::string> expected = {
      "state.0.step",           "state.0.exp_avg",           "state.0.exp_avg_sq",          "state.0.max_exp_avg_sq",
      "param_groups.0.params",  "param_groups.0.initial_lr", "param_groups.0.lr",           "param_groups.0.betas.0",
      "param_groups.0.betas.1", "param_groups.0.eps",        "param_groups.0.weight_decay", "param_groups.0.amsgrad",
      "param_groups.0.maximize"};
  CHECK(sd.keys() == expected);
  CHECK(sd.at("state.0.step").item<double>() == 1.0);
  CHECK(sd.at("state.0.step").dtype() == kFloat64);
  CHECK(sd.at("state.0.step").dim() == 0);
  CHECK(sd.at("param_groups.0.betas.1").item<double>() == 0.999);
  CHECK(sd.at("param_groups.0.weight_decay").item<double>() == 0.01);
  CHECK(sd.at("param_groups.0.amsgrad").item<double>() == 1.0);
  CHECK(sd.at("param_groups.0.initial_lr").item<double>() == 0.01);
  CHECK(sd.at("param_groups.0.params").to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK(bitwise_equal(sd.at("state.0.exp_avg"), opt.state(0).exp_avg));
  CHECK_FALSE(sd.at("state.0.exp_avg").is_alias_of(opt.state(0).exp_avg));
}

TEST_CASE("AdamW with a scheduler resumes from state dicts bit for bit") {
  manual_seed(1430);
  for (bool amsgrad : {false, true}) {
    INFO("amsgrad " << amsgrad);
    Tensor a = random_param({6, 5}), b = random_param({5});
    optim::AdamW opt({a, b}, {.lr = 0.01, .weight_decay = 0.05, .amsgrad = amsgrad});
    optim::CosineAnnealingLR sched(opt, 20, 1e-4);
    for (int s = 0; s < 4; ++s) {
      set_random_grad(a);
      if (s % 2 == 0)
        set_random_grad(b);  // b's step count lags
      else
        b.mutable_grad() = Tensor();
      opt.step();
      sched.step();
    }
    const StateDict opt_sd = opt.state_dict(), sched_sd = sched.state_dict();
    Tensor a2 = a.clone(), b2 = b.clone();
    optim::AdamW opt2({a2, b2}, {.amsgrad = amsgrad});
    optim::CosineAnnealingLR sched2(opt2, 20, 1e-4);
    opt2.load_state_dict(opt_sd);
    sched2.load_state_dict(sched_sd);
    CHECK(opt2.lr(0) == opt.lr(0));
    CHECK(opt2.state(1).step == opt.state(1).step);
    for (int s = 0; s < 4; ++s) {
      set_random_grad(a);
      set_random_grad(b);
      a2.mutable_grad() = a.grad().clone();
      b2.mutable_grad() = b.grad().clone();
      opt.step();
      opt2.step();
      sched.step();
      sched2.step();
      CHECK(bitwise_equal(a, a2));
      CHECK(bitwise_equal(b, b2));
      CHECK(bitwise_equal(opt.state(0).exp_avg_sq, opt2.state(0).exp_avg_sq));
      CHECK(opt.lr(0) == opt2.lr(0));
    }
  }
}

TEST_CASE("Adam refuses bad state dicts and stays as it was") {
  manual_seed(1431);
  Tensor a = random_param({3});
  optim::Adam opt({a}, {.lr = 0.01, .amsgrad = true});
  set_random_grad(a);
  opt.step();
  const StateDict good = opt.state_dict();
  const std::vector<double> m_before = values(opt.state(0).exp_avg);
  auto without = [&](const std::string& key) {
    StateDict out;
    for (const auto& [k, v] : good)
      if (k != key) out.insert(k, v);
    return out;
  };
  auto replaced = [&](const std::string& key, const Tensor& value) {
    StateDict out;
    for (const auto& [k, v] : good) out.insert(k, k == key ? value : v);
    return out;
  };
  struct Bad {
    std::string what;
    StateDict dict;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {"missing exp_avg_sq", without("state.0.exp_avg_sq"), "Adam.load_state_dict: missing key 'state.0.exp_avg_sq'"},
      {"missing max_exp_avg_sq with amsgrad", without("state.0.max_exp_avg_sq"),
       "Adam.load_state_dict: missing key 'state.0.max_exp_avg_sq'"},
      {"moments without step", without("state.0.step"),
       "Adam.load_state_dict: state.0.exp_avg is present without state.0.step"},
      {"fractional step", replaced("state.0.step", optim::scalar_state(1.5)),
       "Adam.load_state_dict: state.0.step must be a whole number of steps >= 1, got 1.5"},
      {"zero step", replaced("state.0.step", optim::scalar_state(0)),
       "Adam.load_state_dict: state.0.step must be a whole number of steps >= 1, got 0"},
      {"wrong shape", replaced("state.0.exp_avg", zeros({1, 3})),
       "Adam.load_state_dict: state.0.exp_avg has shape [1, 3] but parameter 0 has shape [3]"},
      {"beta out of range", replaced("param_groups.0.betas.0", optim::scalar_state(1.0)),
       "Adam: invalid beta parameter at index 0: 1"},
      {"negative lr", replaced("param_groups.0.lr", optim::scalar_state(-0.5)), "Adam: invalid learning rate: -0.5"},
  };
  for (const Bad& b : bad) {
    INFO(b.what);
    CHECK_THROWS_WITH_AS(opt.load_state_dict(b.dict), doctest::Contains(b.message.c_str()), Error);
    CHECK(opt.lr(0) == 0.01);
    CHECK(opt.state(0).step == 1);
    CHECK(values(opt.state(0).exp_avg) == m_before);
  }
  // With amsgrad off in the dict, a max_exp_avg_sq entry is not read: refused as unexpected.
  CHECK_THROWS_WITH_AS(opt.load_state_dict(replaced("param_groups.0.amsgrad", optim::scalar_state(0))),
                       doctest::Contains("Adam.load_state_dict: unexpected key 'state.0.max_exp_avg_sq'"), Error);
  CHECK(opt.options(0).amsgrad);
}
