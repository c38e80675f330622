// optim::SGD against the float64 reference of PyTorch's rule (optim_testing.h): every option
// alone and together over several steps with fresh random gradients, param groups, skipped
// parameters, zero_grad, its state dict (keys, a resume that continues bit for bit, every
// refusal leaving the optimizer as it was) and each error.
#include <map>

#include "optim_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

optim::SGDOptions to_options(const RefSgd& r) {
  return {.lr = r.lr,
          .momentum = r.momentum,
          .dampening = r.dampening,
          .weight_decay = r.weight_decay,
          .nesterov = r.nesterov,
          .maximize = r.maximize};
}

// Runs `steps` SGD steps on two parameters in `dtype` and checks parameters and momentum
// buffers against the reference after each.
void check_sgd_steps(const RefSgd& r, DType dtype, int steps) {
  std::vector<Tensor> params = {random_param({3, 5}, dtype), random_param({7}, dtype)};
  std::vector<RefSgdParam> ref(params.size());
  for (size_t i = 0; i < params.size(); ++i) ref[i].p = values(params[i]);
  optim::SGD opt(params, to_options(r));
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < params.size(); ++i) ref[i].step(set_random_grad(params[i]), r);
    opt.step();
    for (size_t i = 0; i < params.size(); ++i) {
      check_close(params[i], ref[i].p, params[i].sizes(), "param " + std::to_string(i) + " step " + std::to_string(s));
      if (r.momentum != 0)
        check_close(opt.state(i).momentum_buffer, ref[i].buf, params[i].sizes(), "momentum buffer");
      else
        CHECK_FALSE(opt.state(i).momentum_buffer.defined());
    }
  }
}

}  // namespace

TEST_CASE("SGD defaults are torch.optim.SGD's") {
  const optim::SGDOptions o;
  CHECK(o.lr == 1e-3);
  CHECK(o.momentum == 0.0);
  CHECK(o.dampening == 0.0);
  CHECK(o.weight_decay == 0.0);
  CHECK_FALSE(o.nesterov);
  CHECK_FALSE(o.maximize);
  optim::SGD opt({random_param({2})});
  CHECK(opt.name() == "SGD");
  CHECK(opt.num_param_groups() == 1);
  CHECK(opt.lr(0) == 1e-3);
}

TEST_CASE("SGD steps match the float64 reference for every option") {
  manual_seed(1401);
  const std::vector<std::pair<std::string, RefSgd>> cases = {
      {"plain", {.lr = 0.1}},
      {"momentum", {.lr = 0.05, .momentum = 0.9}},
      {"momentum+dampening", {.lr = 0.05, .momentum = 0.8, .dampening = 0.3}},
      {"nesterov", {.lr = 0.05, .momentum = 0.9, .nesterov = true}},
      {"weight_decay", {.lr = 0.1, .weight_decay = 0.05}},
      {"maximize", {.lr = 0.1, .maximize = true}},
      {"everything", {.lr = 0.02, .momentum = 0.7, .weight_decay = 0.1, .nesterov = true, .maximize = true}},
      {"momentum+dampening+decay+maximize",
       {.lr = 0.03, .momentum = 0.6, .dampening = 0.5, .weight_decay = 0.01, .maximize = true}},
  };
  for (const auto& [name, r] : cases)
    for (DType dtype : {kFloat32, kFloat64}) {
      INFO(name << " " << dtype_name(dtype));
      check_sgd_steps(r, dtype, 5);
    }
}

TEST_CASE("SGD in float16 and bfloat16 matches the reference over one step") {
  manual_seed(1402);
  for (DType dtype : {kFloat16, kBFloat16}) {
    INFO(dtype_name(dtype));
    check_sgd_steps({.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05}, dtype, 1);
  }
}

TEST_CASE("SGD updates non-contiguous parameters and gradients") {
  manual_seed(1403);
  Tensor base = random_param({4, 6});
  Tensor p = base.t();  // transposed view: the optimizer writes through it
  RefSgdParam ref{values(p)};
  const RefSgd r{.lr = 0.1, .momentum = 0.9};
  optim::SGD opt({p}, to_options(r));
  for (int s = 0; s < 3; ++s) {
    Tensor g = random({4, 6}, kFloat32).t();
    p.mutable_grad() = g;
    ref.step(values(g), r);
    opt.step();
    check_close(p, ref.p, p.sizes());
  }
}

TEST_CASE("SGD skips parameters without a gradient and param groups keep their own options") {
  manual_seed(1404);
  Tensor a = random_param({4}), b = random_param({3}), c = random_param({2, 2});
  const RefSgd ra{.lr = 0.1, .momentum = 0.9}, rc{.lr = 0.5, .momentum = 0.5, .weight_decay = 0.1};
  optim::SGD opt({a, b}, to_options(ra));
  opt.add_param_group({c}, to_options(rc));
  CHECK(opt.num_param_groups() == 2);
  CHECK(opt.lr(1) == 0.5);
  CHECK(opt.parameters().size() == 3);
  RefSgdParam ref_a{values(a)}, ref_c{values(c)};
  const std::vector<double> b_before = values(b);
  for (int s = 0; s < 3; ++s) {
    ref_a.step(set_random_grad(a), ra);
    ref_c.step(set_random_grad(c), rc);
    opt.step();
  }
  check_close(a, ref_a.p, a.sizes());
  check_close(c, ref_c.p, c.sizes());
  CHECK(values(b) == b_before);
  CHECK_FALSE(opt.state(1).momentum_buffer.defined());
  // A group added without options takes the constructor's.
  Tensor d = random_param({2});
  opt.add_param_group({d});
  CHECK(opt.options(2).momentum == 0.9);
  CHECK(opt.options(2).lr == 0.1);
}

TEST_CASE("SGD: a parameter's first momentum step sets the buffer even after steps without a gradient") {
  manual_seed(1405);
  Tensor a = random_param({5}), b = random_param({5});
  const RefSgd r{.lr = 0.1, .momentum = 0.9, .dampening = 0.5};
  optim::SGD opt({a, b}, to_options(r));
  RefSgdParam ref_a{values(a)}, ref_b{values(b)};
  ref_a.step(set_random_grad(a), r);
  opt.step();  // b has no gradient yet
  ref_a.step(set_random_grad(a), r);
  ref_b.step(set_random_grad(b), r);  // b's first step: buffer = gradient, no dampening
  opt.step();
  check_close(a, ref_a.p, a.sizes());
  check_close(b, ref_b.p, b.sizes());
  check_close(opt.state(1).momentum_buffer, ref_b.buf, b.sizes());
}

TEST_CASE("zero_grad drops or zeroes the gradients") {
  manual_seed(1406);
  Tensor a = random_param({3}), b = random_param({2});
  optim::SGD opt({a, b});
  set_random_grad(a);
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
  set_random_grad(a);
  const Tensor g = a.grad();
  opt.zero_grad(false);
  REQUIRE(a.grad().defined());
  CHECK(a.grad().is_same(g));  // zeroed in place
  CHECK(values(a.grad()) == std::vector<double>(3, 0.0));
  CHECK_FALSE(b.grad().defined());
  // Zeroed gradients still step (a zero gradient with weight decay moves the parameter).
  optim::SGD decay({a}, {.lr = 0.5, .weight_decay = 0.1});
  const std::vector<double> before = values(a);
  decay.step();
  std::vector<double> expected = before;
  for (double& x : expected) x -= 0.5 * 0.1 * x;
  check_close(a, expected, a.sizes());
}

TEST_CASE("SGD refuses invalid options with PyTorch's messages") {
  const std::vector<Tensor> ps = {random_param({2})};
  CHECK_THROWS_WITH_AS(optim::SGD(ps, {.lr = -0.1}), doctest::Contains("SGD: invalid learning rate: -0.1"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD(ps, {.lr = std::nan("")}), doctest::Contains("SGD: invalid learning rate: nan"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::SGD(ps, {.momentum = -0.5}), doctest::Contains("SGD: invalid momentum value: -0.5"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::SGD(ps, {.weight_decay = -1}), doctest::Contains("SGD: invalid weight_decay value: -1"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::SGD(ps, {.dampening = kInf}), doctest::Contains("SGD: invalid dampening value: inf"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::SGD(ps, {.nesterov = true}),
                       doctest::Contains("SGD: Nesterov momentum requires a momentum and zero dampening"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD(ps, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                       doctest::Contains("SGD: Nesterov momentum requires a momentum and zero dampening (momentum 0.9, "
                                         "dampening 0.1)"),
                       Error);
  optim::SGD opt(ps);
  CHECK_THROWS_WITH_AS(opt.set_lr(0, -1), doctest::Contains("SGD: invalid learning rate: -1"), Error);
  CHECK_THROWS_WITH_AS(opt.set_lr(3, 0.1), doctest::Contains("SGD: param group 3 does not exist (the optimizer has 1)"),
                       Error);
  CHECK_THROWS_WITH_AS(opt.add_param_group({random_param({2})}, {.lr = -2}),
                       doctest::Contains("SGD: invalid learning rate: -2"), Error);
  CHECK(opt.num_param_groups() == 1);  // the refused group was not added
  CHECK_THROWS_WITH_AS(opt.state(5), doctest::Contains("SGD: parameter 5 does not exist"), Error);
}

TEST_CASE("Optimizers refuse bad parameter lists") {
  Tensor p = random_param({2});
  CHECK_THROWS_WITH_AS(optim::SGD({}), doctest::Contains("SGD: got an empty parameter list (param group 0)"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD({p, Tensor()}), doctest::Contains("SGD: parameter 1 is an undefined tensor"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD({p, arange(3)}),
                       doctest::Contains("SGD: parameter 1 has dtype int64; only floating point tensors can be "
                                         "optimized"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::SGD({p, p}), doctest::Contains("SGD: parameter 1 appears more than once"), Error);
  optim::SGD opt({p});
  CHECK_THROWS_WITH_AS(opt.add_param_group({random_param({1}), p}),
                       doctest::Contains("SGD: parameter 2 appears more than once (in this group or in another group)"),
                       Error);
  CHECK(opt.num_param_groups() == 1);
}

TEST_CASE("SGD refuses a gradient of the wrong shape or dtype, naming the parameter, before changing anything") {
  manual_seed(1407);
  Tensor a = random_param({3}), b = random_param({2, 3});
  optim::SGD opt({a, b}, {.lr = 0.1, .momentum = 0.9});
  set_random_grad(a);
  b.mutable_grad() = random({3, 2});
  const std::vector<double> a_before = values(a);
  CHECK_THROWS_WITH_AS(opt.step(),
                       doctest::Contains("SGD: the gradient of parameter 1 has shape [3, 2] but the "
                                         "parameter has shape [2, 3]"),
                       Error);
  CHECK(values(a) == a_before);
  CHECK_FALSE(opt.state(0).momentum_buffer.defined());
  b.mutable_grad() = random({2, 3}, kFloat64);
  CHECK_THROWS_WITH_AS(opt.step(),
                       doctest::Contains("SGD: the gradient of parameter 1 has dtype float64 but the "
                                         "parameter has dtype float32"),
                       Error);
  CHECK(values(a) == a_before);
}

TEST_CASE("SGD's state dict: keys, numbers as 0-dim float64 CPU tensors, copies") {
  manual_seed(1408);
  Tensor a = random_param({3}), b = random_param({2});
  optim::SGD opt({a}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  opt.add_param_group({b}, {.lr = 0.2, .momentum = 0.5, .dampening = 0.25, .weight_decay = 0.01, .maximize = true});
  set_random_grad(a);
  opt.step();  // b has no gradient: no state
  const StateDict sd = opt.state_dict();
  CHECK(sd.metadata().at("kiln.optimizer") == "SGD");
  const std::vector<std::string> expected = {
      "state.0.momentum_buffer",     "param_groups.0.params",   "param_groups.1.params",
      "param_groups.0.lr",           "param_groups.0.momentum", "param_groups.0.dampening",
      "param_groups.0.weight_decay", "param_groups.0.nesterov", "param_groups.0.maximize",
      "param_groups.1.lr",           "param_groups.1.momentum", "param_groups.1.dampening",
      "param_groups.1.weight_decay", "param_groups.1.nesterov", "param_groups.1.maximize"};
  CHECK(sd.keys() == expected);
  const Tensor& lr = sd.at("param_groups.1.lr");
  CHECK(lr.dim() == 0);
  CHECK(lr.dtype() == kFloat64);
  CHECK(lr.device() == Device::cpu());
  CHECK(lr.item<double>() == 0.2);
  CHECK(sd.at("param_groups.0.nesterov").item<double>() == 1.0);
  CHECK(sd.at("param_groups.1.maximize").item<double>() == 1.0);
  CHECK(sd.at("param_groups.1.dampening").item<double>() == 0.25);
  CHECK(sd.at("param_groups.1.params").to_vector<int64_t>() == std::vector<int64_t>{1});
  CHECK(sd.at("param_groups.1.params").dtype() == kInt64);
  // The buffer is a copy: later steps do not change the dict.
  const std::vector<double> saved = values(sd.at("state.0.momentum_buffer"));
  CHECK(saved == values(opt.state(0).momentum_buffer));
  set_random_grad(a);
  opt.step();
  CHECK(values(sd.at("state.0.momentum_buffer")) == saved);
}

TEST_CASE("SGD resumes from its state dict bit for bit") {
  manual_seed(1409);
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor a = random_param({4, 3}, dtype), b = random_param({5}, dtype);
    optim::SGD opt({a, b}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
    for (int s = 0; s < 3; ++s) {
      set_random_grad(a);
      set_random_grad(b);
      opt.step();
    }
    const StateDict sd = opt.state_dict();
    Tensor a2 = a.clone(), b2 = b.clone();
    optim::SGD resumed({a2, b2}, {.lr = 0.5});  // options come from the dict
    resumed.load_state_dict(sd);
    CHECK(resumed.options(0).momentum == 0.9);
    CHECK(resumed.lr(0) == 0.1);
    for (int s = 0; s < 3; ++s) {
      set_random_grad(a);
      set_random_grad(b);
      a2.mutable_grad() = a.grad().clone();
      b2.mutable_grad() = b.grad().clone();
      opt.step();
      resumed.step();
      CHECK(bitwise_equal(a, a2));
      CHECK(bitwise_equal(b, b2));
    }
    // The loaded state is the optimizer's own copy, not the dict's tensor.
    CHECK_FALSE(resumed.state(0).momentum_buffer.is_alias_of(sd.at("state.0.momentum_buffer")));
  }
}

TEST_CASE("SGD's load_state_dict converts state to the parameter's dtype") {
  manual_seed(1410);
  Tensor a = random_param({3}, kFloat64);
  optim::SGD opt({a}, {.momentum = 0.9});
  set_random_grad(a);
  opt.step();
  Tensor f = a.to(kFloat32);
  optim::SGD other({f}, {.momentum = 0.9});
  other.load_state_dict(opt.state_dict());
  CHECK(other.state(0).momentum_buffer.dtype() == kFloat32);
  check_close(other.state(0).momentum_buffer, values(opt.state(0).momentum_buffer), {3});
}

TEST_CASE("SGD refuses bad state dicts and stays as it was") {
  manual_seed(1411);
  Tensor a = random_param({3}), b = random_param({2});
  optim::SGD opt({a}, {.lr = 0.1, .momentum = 0.9});
  opt.add_param_group({b});
  set_random_grad(a);
  set_random_grad(b);
  opt.step();
  const StateDict good = opt.state_dict();
  const std::vector<double> buf_before = values(opt.state(0).momentum_buffer);

  auto edited = [&](const std::function<void(std::map<std::string, Tensor>&)>& edit) {
    std::map<std::string, Tensor> entries;
    std::vector<std::string> order = good.keys();
    for (const auto& [k, v] : good) entries[k] = v;
    edit(entries);
    StateDict out;
    for (const std::string& k : order)
      if (entries.count(k)) out.insert(k, entries[k]);
    for (const auto& [k, v] : entries)
      if (!out.contains(k)) out.insert(k, v);
    return out;
  };
  struct Bad {
    std::string what;
    StateDict dict;
    std::string message;
  };
  StateDict other_writer = good;
  other_writer.metadata()["kiln.optimizer"] = "Adam";
  std::vector<Bad> bad = {
      {"missing lr", edited([](auto& e) { e.erase("param_groups.1.lr"); }),
       "SGD.load_state_dict: missing key 'param_groups.1.lr'"},
      {"unexpected key", edited([](auto& e) { e["state.0.exp_avg"] = zeros({3}); }),
       "SGD.load_state_dict: unexpected key 'state.0.exp_avg'"},
      {"wrong buffer shape", edited([](auto& e) { e["state.1.momentum_buffer"] = zeros({3}); }),
       "SGD.load_state_dict: state.1.momentum_buffer has shape [3] but parameter 1 has shape [2]"},
      {"integer buffer", edited([](auto& e) { e["state.0.momentum_buffer"] = arange(3); }),
       "SGD.load_state_dict: state.0.momentum_buffer has dtype int64; optimizer state is floating point"},
      {"negative lr", edited([](auto& e) { e["param_groups.0.lr"] = optim::scalar_state(-1); }),
       "SGD: invalid learning rate: -1"},
      {"nesterov not a flag", edited([](auto& e) { e["param_groups.0.nesterov"] = optim::scalar_state(2); }),
       "SGD.load_state_dict: key 'param_groups.0.nesterov' must be 0 or 1 (a boolean), got 2"},
      {"lr not a number", edited([](auto& e) { e["param_groups.0.lr"] = zeros({2}); }),
       "SGD.load_state_dict: key 'param_groups.0.lr' must hold one number, got a tensor of shape [2]"},
      {"extra group", edited([](auto& e) { e["param_groups.2.params"] = from_vector<int64_t>({2}); }),
       "SGD.load_state_dict: the state dict has more parameter groups than the optimizer's 2"},
      {"missing group", edited([](auto& e) { e.erase("param_groups.1.params"); }),
       "SGD.load_state_dict: the state dict has 1 parameter groups but the optimizer has 2"},
      {"group size", edited([](auto& e) {
         e["param_groups.1.params"] = from_vector<int64_t>({1, 2});
       }),
       "SGD.load_state_dict: parameter group 1 of the state dict has 2 parameters but the optimizer's has 1"},
      {"group numbering", edited([](auto& e) { e["param_groups.1.params"] = from_vector<int64_t>({0}); }),
       "SGD.load_state_dict: param_groups.1.params lists parameter 0 at position 0; the optimizer numbers it 1"},
      {"float params", edited([](auto& e) { e["param_groups.1.params"] = from_vector<double>({1}); }),
       "SGD.load_state_dict: param_groups.1.params must be a 1-D integer tensor"},
      {"another optimizer's dict", other_writer, "SGD.load_state_dict: the state dict was written by Adam"},
  };
  for (const Bad& b : bad) {
    INFO(b.what);
    CHECK_THROWS_WITH_AS(opt.load_state_dict(b.dict), doctest::Contains(b.message.c_str()), Error);
    CHECK(opt.lr(0) == 0.1);
    CHECK(opt.options(0).nesterov == false);
    CHECK(values(opt.state(0).momentum_buffer) == buf_before);
    CHECK(opt.state(1).momentum_buffer.sizes() == Shape{2});
  }
  // An Adam dict has other keys.
  optim::Adam adam({a.clone()});
  CHECK_THROWS_WITH_AS(opt.load_state_dict(adam.state_dict()),
                       doctest::Contains("SGD.load_state_dict: the state dict was written by Adam"), Error);
}
