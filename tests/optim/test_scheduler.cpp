// The learning-rate schedulers against PyTorch's closed forms (written out here) over many
// epochs and two param groups, SequentialLR's warm-up then cosine (including a sequence
// computed by hand from PyTorch's documented behaviour), initial_lr bookkeeping, state dicts
// (resume, refusals that leave the scheduler unchanged) and each construction error.
#include <cmath>
#include <numbers>

#include "optim_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// An SGD with two groups whose learning rates are 0.1 and 0.02.
struct TwoGroups {
  Tensor a = random_param({2}), b = random_param({3});
  optim::SGD opt{{a}, {.lr = 0.1}};
  TwoGroups() { opt.add_param_group({b}, {.lr = 0.02}); }
  std::vector<double> base() const { return {0.1, 0.02}; }
};

// Checks that `sched` sets lr(epoch, base) for epochs 0..epochs-1, in get_last_lr() and in
// the optimizer.
void check_sequence(optim::LRScheduler& sched, optim::Optimizer& opt, const std::vector<double>& bases, int epochs,
                    const std::function<double(int64_t, double)>& closed_form) {
  for (int64_t e = 0; e < epochs; ++e) {
    if (e > 0) sched.step();
    CHECK(sched.last_epoch() == e);
    for (size_t g = 0; g < bases.size(); ++g) {
      const double expected = closed_form(e, bases[g]);
      INFO("epoch " << e << " group " << g << ": expected " << expected);
      CHECK(sched.get_last_lr()[g] == doctest::Approx(expected).epsilon(1e-12).scale(0));
      CHECK(opt.lr(g) == sched.get_last_lr()[g]);
    }
  }
}

}  // namespace

TEST_CASE("StepLR follows base * gamma^(epoch / step_size)") {
  manual_seed(1441);
  TwoGroups t;
  optim::StepLR sched(t.opt, 3, 0.5);
  CHECK(sched.name() == "StepLR");
  CHECK(sched.base_lrs() == t.base());
  check_sequence(sched, t.opt, t.base(), 12, [](int64_t e, double base) { return base * std::pow(0.5, e / 3); });
  optim::SGD single({random_param({1})}, {.lr = 1.0});
  optim::StepLR default_gamma(single, 2);  // gamma 0.1
  default_gamma.step();
  default_gamma.step();
  CHECK(single.lr(0) == doctest::Approx(0.1).epsilon(1e-15));
}

TEST_CASE("LinearLR warms up linearly and then holds") {
  manual_seed(1442);
  TwoGroups t;
  optim::LinearLR sched(t.opt, 0.25, 1.0, 4);
  check_sequence(sched, t.opt, t.base(), 9, [](int64_t e, double base) {
    return base * (0.25 + (1.0 - 0.25) * static_cast<double>(std::min<int64_t>(e, 4)) / 4.0);
  });
  // PyTorch's defaults: 1/3 to 1 over 5 iterations; a decay (end < start) works as well.
  optim::SGD single({random_param({1})}, {.lr = 0.3});
  optim::LinearLR defaults(single);
  CHECK(single.lr(0) == doctest::Approx(0.1).epsilon(1e-15));
  optim::SGD other({random_param({1})}, {.lr = 1.0});
  optim::LinearLR decay(other, 1.0, 0.0, 2);
  decay.step();
  CHECK(other.lr(0) == 0.5);
  decay.step();
  CHECK(other.lr(0) == 0.0);
}

TEST_CASE("CosineAnnealingLR follows the closed-form cosine, past T_max too") {
  manual_seed(1443);
  TwoGroups t;
  optim::CosineAnnealingLR sched(t.opt, 10, 1e-3);
  check_sequence(sched, t.opt, t.base(), 26, [](int64_t e, double base) {
    return 1e-3 + (base - 1e-3) * (1 + std::cos(std::numbers::pi * static_cast<double>(e) / 10.0)) / 2;
  });
}

TEST_CASE("SequentialLR runs a linear warm-up, then a cosine from its own epoch 0") {
  manual_seed(1444);
  TwoGroups t;
  auto warmup = std::make_shared<optim::LinearLR>(t.opt, 0.1, 1.0, 5);
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(t.opt, 20, 1e-5);
  // Each scheduler set the rates when it was made; the sequence starts from the warm-up's epoch 0.
  optim::SequentialLR sched(t.opt, {warmup, cosine}, {5});
  CHECK(sched.name() == "SequentialLR");
  CHECK(cosine->base_lrs() == t.base());  // from initial_lr, not the warm-up's rate
  check_sequence(sched, t.opt, t.base(), 40, [](int64_t e, double base) {
    if (e < 5) return base * (0.1 + (1.0 - 0.1) * static_cast<double>(e) / 5.0);
    return 1e-5 + (base - 1e-5) * (1 + std::cos(std::numbers::pi * static_cast<double>(e - 5) / 20.0)) / 2;
  });
  CHECK(warmup->last_epoch() == 4);
  CHECK(cosine->last_epoch() == 34);
}

TEST_CASE("SequentialLR gives PyTorch's sequence for a short warm-up and cosine") {
  // SGD(lr=1), LinearLR(start_factor=0.5, total_iters=2), CosineAnnealingLR(T_max=2),
  // SequentialLR(milestones=[2]), worked out by hand from PyTorch's closed forms and its
  // SequentialLR (the cosine's step(0) at the milestone): 0.5, 0.75, 1.0, 0.5, 0.0, 0.5, 1.0.
  optim::SGD opt({random_param({1})}, {.lr = 1.0});
  auto warmup = std::make_shared<optim::LinearLR>(opt, 0.5, 1.0, 2);
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(opt, 2);
  optim::SequentialLR sched(opt, {warmup, cosine}, {2});
  const std::vector<double> expected = {0.5, 0.75, 1.0, 0.5, 0.0, 0.5, 1.0};
  for (size_t e = 0; e < expected.size(); ++e) {
    if (e > 0) sched.step();
    CHECK(opt.lr(0) == doctest::Approx(expected[e]).epsilon(1e-15).scale(1e-16));
  }
}

TEST_CASE("The first scheduler records initial_lr; later ones start from it") {
  manual_seed(1445);
  optim::SGD opt({random_param({2})}, {.lr = 0.4});
  CHECK_FALSE(opt.initial_lr(0).has_value());
  optim::StepLR first(opt, 1, 0.5);
  REQUIRE(opt.initial_lr(0).has_value());
  CHECK(*opt.initial_lr(0) == 0.4);
  first.step();
  CHECK(opt.lr(0) == 0.2);
  optim::StepLR second(opt, 1, 0.1);  // its base is 0.4, not the current 0.2
  CHECK(second.base_lrs()[0] == 0.4);
  CHECK(opt.lr(0) == 0.4);
}

TEST_CASE("A scheduler refuses an optimizer whose group count changed") {
  optim::SGD opt({random_param({2})}, {.lr = 0.1});
  optim::StepLR sched(opt, 1);
  opt.add_param_group({random_param({1})});
  CHECK_THROWS_WITH_AS(sched.step(),
                       doctest::Contains("StepLR: the optimizer has 2 parameter groups but had 1 when the "
                                         "scheduler was made"),
                       Error);
}

TEST_CASE("Schedulers refuse bad settings") {
  optim::SGD opt({random_param({2})}, {.lr = 0.1});
  CHECK_THROWS_WITH_AS(optim::StepLR(opt, 0), doctest::Contains("StepLR: step_size must be positive, got 0"), Error);
  CHECK_THROWS_WITH_AS(optim::StepLR(opt, 2, -0.5),
                       doctest::Contains("StepLR: gamma must be a finite number >= 0, got "
                                         "-0.5"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::LinearLR(opt, 0.0),
                       doctest::Contains("LinearLR: starting multiplicative factor expected to be greater than 0 and "
                                         "less or equal to 1, got 0"),
                       Error);
  CHECK_THROWS_WITH_AS(
      optim::LinearLR(opt, 0.5, 1.5),
      doctest::Contains("LinearLR: ending multiplicative factor expected to be between 0 and 1, got 1.5"), Error);
  CHECK_THROWS_WITH_AS(optim::LinearLR(opt, 0.5, 1.0, 0),
                       doctest::Contains("LinearLR: total_iters must be positive, "
                                         "got 0"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::CosineAnnealingLR(opt, 0), doctest::Contains("CosineAnnealingLR: T_max must be positive"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::CosineAnnealingLR(opt, 5, -1.0),
                       doctest::Contains("CosineAnnealingLR: eta_min must be a finite number >= 0, got -1"), Error);
  auto s1 = std::make_shared<optim::StepLR>(opt, 2);
  auto s2 = std::make_shared<optim::StepLR>(opt, 3);
  CHECK_THROWS_WITH_AS(optim::SequentialLR(opt, {}, {}),
                       doctest::Contains("SequentialLR: expects at least one "
                                         "scheduler"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::SequentialLR(opt, {s1, s2}, {}),
                       doctest::Contains("SequentialLR: expects one more scheduler than milestones, got 2 schedulers "
                                         "and 0 milestones"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::SequentialLR(opt, {s1, nullptr}, {3}),
                       doctest::Contains("SequentialLR: scheduler 1 is "
                                         "null"),
                       Error);
  optim::SGD other({random_param({2})});
  auto foreign = std::make_shared<optim::StepLR>(other, 2);
  CHECK_THROWS_WITH_AS(optim::SequentialLR(opt, {s1, foreign}, {3}),
                       doctest::Contains("SequentialLR: scheduler 1 (StepLR) drives another optimizer than the "
                                         "sequence's"),
                       Error);
  auto s3 = std::make_shared<optim::StepLR>(opt, 4);
  CHECK_THROWS_WITH_AS(
      optim::SequentialLR(opt, {s1, s2, s3}, {5, 5}),
      doctest::Contains("SequentialLR: milestones must be positive and increasing, got 5 at position 1"), Error);
  CHECK_THROWS_WITH_AS(
      optim::SequentialLR(opt, {s1, s2}, {0}),
      doctest::Contains("SequentialLR: milestones must be positive and increasing, got 0 at position 0"), Error);
}

TEST_CASE("A scheduler's state dict: keys and a resume that continues the sequence") {
  manual_seed(1446);
  TwoGroups t;
  optim::StepLR sched(t.opt, 3, 0.5);
  for (int e = 0; e < 7; ++e) sched.step();
  const StateDict sd = sched.state_dict();
  CHECK(sd.metadata().at("kiln.lr_scheduler") == "StepLR");
  const std::vector<std::string> expected = {"last_epoch", "_step_count", "base_lrs.0", "base_lrs.1",
                                             "_last_lr.0", "_last_lr.1",  "step_size",  "gamma"};
  CHECK(sd.keys() == expected);
  CHECK(sd.at("last_epoch").item<double>() == 7);
  CHECK(sd.at("_step_count").item<double>() == 8);
  CHECK(sd.at("last_epoch").dtype() == kFloat64);

  TwoGroups u;
  optim::StepLR resumed(u.opt, 3, 0.5);
  resumed.load_state_dict(sd);
  u.opt.load_state_dict(t.opt.state_dict());
  CHECK(resumed.last_epoch() == 7);
  CHECK(resumed.get_last_lr() == sched.get_last_lr());
  for (int e = 0; e < 5; ++e) {
    sched.step();
    resumed.step();
    CHECK(resumed.get_last_lr() == sched.get_last_lr());
    CHECK(u.opt.lr(0) == t.opt.lr(0));
    CHECK(u.opt.lr(1) == t.opt.lr(1));
  }
}

TEST_CASE("SequentialLR's state dict nests its schedulers' and resumes") {
  manual_seed(1447);
  optim::SGD opt({random_param({2})}, {.lr = 0.1});
  auto warmup = std::make_shared<optim::LinearLR>(opt, 0.1, 1.0, 3);
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(opt, 10);
  optim::SequentialLR sched(opt, {warmup, cosine}, {3});
  for (int e = 0; e < 5; ++e) sched.step();
  const StateDict sd = sched.state_dict();
  CHECK(sd.contains("_milestones.0"));
  CHECK(sd.contains("_schedulers.0.total_iters"));
  CHECK(sd.contains("_schedulers.1.T_max"));
  CHECK(sd.at("_schedulers.1.last_epoch").item<double>() == 2);

  optim::SGD opt2({random_param({2})}, {.lr = 0.1});
  auto warmup2 = std::make_shared<optim::LinearLR>(opt2, 0.1, 1.0, 3);
  auto cosine2 = std::make_shared<optim::CosineAnnealingLR>(opt2, 10);
  optim::SequentialLR sched2(opt2, {warmup2, cosine2}, {3});
  sched2.load_state_dict(sd);
  CHECK(cosine2->last_epoch() == 2);
  for (int e = 0; e < 6; ++e) {
    sched.step();
    sched2.step();
    CHECK(opt2.lr(0) == opt.lr(0));
  }
  // Another recipe is refused, naming the nested key.
  optim::SGD opt3({random_param({2})}, {.lr = 0.1});
  auto warmup3 = std::make_shared<optim::LinearLR>(opt3, 0.1, 1.0, 3);
  auto cosine3 = std::make_shared<optim::CosineAnnealingLR>(opt3, 50);
  optim::SequentialLR sched3(opt3, {warmup3, cosine3}, {3});
  CHECK_THROWS_WITH_AS(sched3.load_state_dict(sd),
                       doctest::Contains("SequentialLR.load_state_dict: _schedulers.1.T_max is 10 but this scheduler's "
                                         "is 50"),
                       Error);
  CHECK(sched3.last_epoch() == 0);
  CHECK(warmup3->last_epoch() == 0);
}

TEST_CASE("Schedulers refuse bad state dicts and stay as they were") {
  manual_seed(1448);
  TwoGroups t;
  optim::StepLR sched(t.opt, 3, 0.5);
  sched.step();
  const StateDict good = sched.state_dict();
  auto replaced = [&](const std::string& key, const Tensor& value) {
    StateDict out;
    for (const auto& [k, v] : good) out.insert(k, k == key ? value : v);
    return out;
  };
  auto without = [&](const std::string& key) {
    StateDict out;
    for (const auto& [k, v] : good)
      if (k != key) out.insert(k, v);
    return out;
  };
  StateDict extra = good;
  extra.insert("verbose", optim::scalar_state(0));
  StateDict three_groups = good;
  three_groups.insert("base_lrs.2", optim::scalar_state(0.1));
  StateDict other_writer = good;
  other_writer.metadata()["kiln.lr_scheduler"] = "LinearLR";
  struct Bad {
    std::string what;
    StateDict dict;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {"other gamma", replaced("gamma", optim::scalar_state(0.1)),
       "StepLR.load_state_dict: gamma is 0.1 but this scheduler's is 0.5"},
      {"missing last_epoch", without("last_epoch"), "StepLR.load_state_dict: missing key 'last_epoch'"},
      {"fractional last_epoch", replaced("last_epoch", optim::scalar_state(2.5)),
       "StepLR.load_state_dict: key 'last_epoch' must be an integer, got 2.5"},
      {"negative step count", replaced("_step_count", optim::scalar_state(-3)),
       "StepLR.load_state_dict: last_epoch 1 and _step_count -3 are not a scheduler's progress"},
      {"missing group", without("base_lrs.1"),
       "StepLR.load_state_dict: the state dict has 1 parameter groups but the scheduler has 2"},
      {"extra group", three_groups,
       "StepLR.load_state_dict: the state dict has more than the scheduler's 2 parameter "
       "groups"},
      {"negative base lr", replaced("base_lrs.0", optim::scalar_state(-1)),
       "StepLR.load_state_dict: invalid learning rates -1 (base) and 0.1 (last) for group 0"},
      {"unexpected key", extra, "StepLR.load_state_dict: unexpected key 'verbose'"},
      {"another scheduler's dict", other_writer, "StepLR.load_state_dict: the state dict was written by LinearLR"},
  };
  for (const Bad& b : bad) {
    INFO(b.what);
    CHECK_THROWS_WITH_AS(sched.load_state_dict(b.dict), doctest::Contains(b.message.c_str()), Error);
    CHECK(sched.last_epoch() == 1);
    CHECK(sched.base_lrs() == t.base());
  }
}
