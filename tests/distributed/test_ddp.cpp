// DistributedDataParallel on the Threads backend (run_local with 1..4 CPU ranks): gradients
// equal one process's gradients on the concatenated batch (fp32 against a float64 reference
// model, |g - ref| <= 1e-5 + 1e-4 |ref|), replicas identical after construction and after
// optimizer steps, no_sync accumulation, bucket assignment and launch order (several buckets
// launched before backward reaches the first layer), unused parameters (the error, and
// find_unused_parameters), buffers, frozen parameters, and the errors.
//
// Models are built on the main thread (each rank's own random initialisation, which the
// constructor's broadcast must replace by rank 0's); rank threads only record results, which
// the main thread checks after run_local returns.
#include <algorithm>
#include <type_traits>

#include "ddp_testing.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;
using distributed::DDPOptions;
using distributed::DistributedDataParallel;

namespace {

constexpr double kRtol = 1e-4, kAtol = 1e-5;  // fp32 DDP gradients against float64 ones

std::shared_ptr<nn::MLP> make_mlp(const std::vector<int64_t>& sizes = {6, 12, 10, 3}) {
  return std::make_shared<nn::MLP>(sizes, nn::Activation::Tanh);
}

// A float64 copy of `model`'s current state (the single-process reference).
std::shared_ptr<nn::MLP> float64_copy(const nn::MLP& model, const std::vector<int64_t>& sizes = {6, 12, 10, 3}) {
  auto ref = make_mlp(sizes);
  ref->load_state_dict(model.state_dict());
  ref->to(kFloat64);
  return ref;
}

std::vector<Tensor> clones(const std::vector<Tensor>& ts, bool grads) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(grads ? (t.grad().defined() ? t.grad().clone() : Tensor()) : t.detach().clone());
  return out;
}

std::vector<Tensor> grads_of(const nn::Module& m) { return clones(m.parameters(), true); }

// Two linear heads; forward uses the second only when use_both (an unused parameter otherwise).
class TwoHeads : public nn::Module {
 public:
  TwoHeads() : nn::Module("TwoHeads") {
    used = register_module("used", std::make_shared<nn::Linear>(4, 3));
    unused = register_module("unused", std::make_shared<nn::Linear>(4, 3));
  }
  Tensor forward(const Tensor& x) override { return use_both ? add(used->forward(x), unused->forward(x)) : used->forward(x); }
  std::shared_ptr<nn::Linear> used, unused;
  bool use_both = false;
};

// A linear layer and a buffer that forward adds to its output.
class WithBuffer : public nn::Module {
 public:
  WithBuffer() : nn::Module("WithBuffer") {
    fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
    register_buffer("shift", random({2}));
  }
  Tensor forward(const Tensor& x) override { return add(fc->forward(x), named_buffers().front().second); }
  std::shared_ptr<nn::Linear> fc;
};

}  // namespace

static_assert(std::is_same_v<nn::DistributedDataParallel, distributed::DistributedDataParallel>);

TEST_CASE("DDP gradients equal one process's gradients on the concatenated batch, 1 to 4 ranks") {
  for (int world : {1, 2, 3, 4}) {
    CAPTURE(world);
    const int64_t per = 5;
    std::vector<std::shared_ptr<nn::MLP>> models;
    for (int r = 0; r < world; ++r) models.push_back(make_mlp());
    const auto initial = clones(models[0]->parameters(), false);
    auto ref = float64_copy(*models[0]);
    const Tensor X = random({world * per, 6}), Y = random({world * per, 3});
    std::vector<std::vector<Tensor>> after_init(world), grads(world);
    distributed::run_local(world, DeviceType::CPU, [&](int rank) {
      DistributedDataParallel ddp(models[rank]);
      after_init[rank] = clones(ddp.parameters(), false);
      const Tensor x = X.narrow(0, rank * per, per), y = Y.narrow(0, rank * per, per);
      mse_loss(ddp(x), y).backward();
      grads[rank] = grads_of(ddp);
    });
    mse_loss((*ref)(X.to(kFloat64)), Y.to(kFloat64)).backward();
    const auto expected = grads_of(*ref);
    for (int r = 0; r < world; ++r) {
      REQUIRE(grads[r].size() == expected.size());
      for (size_t i = 0; i < expected.size(); ++i) {
        CHECK(identical(after_init[r][i], initial[i]));  // rank 0's initial parameters everywhere
        CHECK(grads[r][i].dtype() == kFloat32);
        CHECK(excess(grads[r][i], expected[i], kRtol, kAtol) <= 0);
        CHECK(identical(grads[r][i], grads[0][i]));
      }
    }
  }
}

TEST_CASE("DDP replicas stay identical through SGD steps and follow single-process training") {
  const int world = 3, steps = 3;
  const int64_t per = 4;
  std::vector<std::shared_ptr<nn::MLP>> models;
  for (int r = 0; r < world; ++r) models.push_back(make_mlp());
  auto ref = float64_copy(*models[0]);
  std::vector<Tensor> X, Y;
  for (int s = 0; s < steps; ++s) {
    X.push_back(random({world * per, 6}));
    Y.push_back(random({world * per, 3}));
  }
  std::vector<std::vector<std::vector<Tensor>>> params(steps, std::vector<std::vector<Tensor>>(world));
  distributed::run_local(world, DeviceType::CPU, [&](int rank) {
    DistributedDataParallel ddp(models[rank]);
    optim::SGD opt(ddp.parameters(), {.lr = 0.1, .momentum = 0.9});
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      mse_loss(ddp(X[s].narrow(0, rank * per, per)), Y[s].narrow(0, rank * per, per)).backward();
      opt.step();
      params[s][rank] = clones(ddp.parameters(), false);
    }
  });
  optim::SGD ref_opt(ref->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int s = 0; s < steps; ++s) {
    ref_opt.zero_grad();
    mse_loss((*ref)(X[s].to(kFloat64)), Y[s].to(kFloat64)).backward();
    ref_opt.step();
    const auto expected = clones(ref->parameters(), false);
    for (int r = 0; r < world; ++r)
      for (size_t i = 0; i < expected.size(); ++i) {
        CHECK(identical(params[s][r][i], params[s][0][i]));
        CHECK(excess(params[s][r][i], expected[i], kRtol, kAtol) <= 0);
      }
  }
}

TEST_CASE("no_sync accumulates locally without collectives; the next synced backward reduces the sum") {
  const int world = 2;
  const int64_t per = 3;
  std::vector<std::shared_ptr<nn::MLP>> models;
  for (int r = 0; r < world; ++r) models.push_back(make_mlp());
  auto ref = float64_copy(*models[0]);
  std::vector<std::shared_ptr<nn::MLP>> local_refs;
  for (int r = 0; r < world; ++r) local_refs.push_back(float64_copy(*models[0]));
  const Tensor XA = random({world * per, 6}), YA = random({world * per, 3});
  const Tensor XB = random({world * per, 6}), YB = random({world * per, 3});
  std::vector<std::vector<Tensor>> local(world), synced(world);
  std::vector<size_t> reduces_in_no_sync(world), reduces_after(world);
  std::vector<int> flags(world, -1);
  distributed::run_local(world, DeviceType::CPU, [&](int rank) {
    RecordingGroup rec(distributed::default_group());
    DistributedDataParallel ddp(models[rank], {.process_group = &rec});
    {
      auto guard = ddp.no_sync();
      flags[rank] = ddp.require_backward_grad_sync() ? 1 : 0;
      mse_loss(ddp(XA.narrow(0, rank * per, per)), YA.narrow(0, rank * per, per)).backward();
      local[rank] = grads_of(ddp);
      reduces_in_no_sync[rank] = rec.entries("all_reduce").size();
    }
    flags[rank] += ddp.require_backward_grad_sync() ? 10 : 0;
    mse_loss(ddp(XB.narrow(0, rank * per, per)), YB.narrow(0, rank * per, per)).backward();
    synced[rank] = grads_of(ddp);
    reduces_after[rank] = rec.entries("all_reduce").size();
  });
  // Local gradients inside no_sync: each rank's own batch only.
  for (int r = 0; r < world; ++r) {
    CHECK(flags[r] == 10);
    CHECK(reduces_in_no_sync[r] == 0);
    CHECK(reduces_after[r] >= 1);
    mse_loss((*local_refs[r])(XA.narrow(0, r * per, per).to(kFloat64)), YA.narrow(0, r * per, per).to(kFloat64))
        .backward();
    const auto expected = grads_of(*local_refs[r]);
    for (size_t i = 0; i < expected.size(); ++i) CHECK(excess(local[r][i], expected[i], kRtol, kAtol) <= 0);
  }
  // After the synced step: the average over ranks of (batch A + batch B) gradients, which is
  // the gradient of the two full-batch losses summed.
  mse_loss((*ref)(XA.to(kFloat64)), YA.to(kFloat64)).backward();
  mse_loss((*ref)(XB.to(kFloat64)), YB.to(kFloat64)).backward();
  const auto expected = grads_of(*ref);
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < expected.size(); ++i) {
      CHECK(excess(synced[r][i], expected[i], kRtol, kAtol) <= 0);
      CHECK(identical(synced[r][i], synced[0][i]));
    }
}

TEST_CASE("buckets: reverse registration order, first bucket small, launched while backward runs") {
  const std::vector<int64_t> sizes = {8, 16, 16, 4};  // 0.weight 16x8, 2.weight 16x16, 4.weight 4x16
  const int world = 2;
  const int64_t per = 3;
  std::vector<std::shared_ptr<nn::MLP>> models;
  for (int r = 0; r < world; ++r) models.push_back(make_mlp(sizes));
  auto ref = float64_copy(*models[0], sizes);
  const Tensor X = random({world * per, 8}), Y = random({world * per, 4});
  // First bucket closes at >= 200 bytes: 4.bias (16 B) + 4.weight (256 B). Later buckets at
  // >= 1000 bytes: 2.bias (64 B) + 2.weight (1024 B); the rest (0.bias, 0.weight) is the last.
  const DDPOptions small{.bucket_cap_mb = 1000.0 / 1048576, .first_bucket_cap_mb = 200.0 / 1048576};
  std::vector<std::vector<std::vector<std::string>>> names(world), default_names(world);
  std::vector<std::vector<std::string>> logs(world);
  std::vector<std::vector<Tensor>> grads(world);
  distributed::run_local(world, DeviceType::CPU, [&](int rank) {
    RecordingGroup rec(distributed::default_group());
    DDPOptions options = small;
    options.process_group = &rec;
    DistributedDataParallel ddp(models[rank], options);
    names[rank] = ddp.bucket_parameter_names();
    // Registered after DDP's hooks: logs once DDP's hook of the same parameter has run.
    for (const auto& [name, p] : ddp.module().named_parameters())
      if (name.starts_with("0."))
        p.register_post_accumulate_grad_hook([&rec, name = name](const Tensor&) { rec.note("ready " + name); });
    mse_loss(ddp(X.narrow(0, rank * per, per)), Y.narrow(0, rank * per, per)).backward();
    logs[rank] = rec.log();
    grads[rank] = grads_of(ddp);
  });
  const std::vector<std::vector<std::string>> expected_names = {
      {"4.bias", "4.weight"}, {"2.bias", "2.weight"}, {"0.bias", "0.weight"}};
  mse_loss((*ref)(X.to(kFloat64)), Y.to(kFloat64)).backward();
  const auto expected = grads_of(*ref);
  for (int r = 0; r < world; ++r) {
    CAPTURE(r);
    CHECK(names[r] == expected_names);
    // The three all-reduces in bucket order (elements: 4 + 64, 16 + 256, 16 + 128)...
    const std::vector<std::string> reduces = {"all_reduce avg 68", "all_reduce avg 272", "all_reduce avg 144"};
    std::vector<std::string> seen;
    for (const std::string& e : logs[r])
      if (e.starts_with("all_reduce")) seen.push_back(e);
    CHECK(seen == reduces);
    // ...the first two launched before any gradient of layer 0 was ready: communication
    // overlaps the rest of backward.
    const auto at = [&](const std::string& e) { return std::find(logs[r].begin(), logs[r].end(), e) - logs[r].begin(); };
    const auto first_layer0 = std::min(at("ready 0.weight"), at("ready 0.bias"));
    REQUIRE(first_layer0 < static_cast<std::ptrdiff_t>(logs[r].size()));
    CHECK(at(reduces[0]) < first_layer0);
    CHECK(at(reduces[1]) < first_layer0);
    CHECK(at(reduces[2]) > first_layer0);
    for (size_t i = 0; i < expected.size(); ++i) CHECK(excess(grads[r][i], expected[i], kRtol, kAtol) <= 0);
  }
}

TEST_CASE("compute_bucket_assignment: PyTorch's caps, one bucket per dtype and device") {
  const std::vector<Tensor> params = {zeros({300000}), zeros({10}), zeros({200000}), zeros({100}, kFloat64),
                                      zeros({4}), zeros({1})};
  // Default caps (25 MiB, first 1 MiB): the float32 bucket reaches 1 MiB only with its last
  // parameter (4 + 16 + 800000 + 40 + 1200000 bytes); float64 has a bucket of its own.
  CHECK(distributed::compute_bucket_assignment(params, size_t{25} << 20, size_t{1} << 20) ==
        distributed::BucketAssignment{{5, 4, 2, 1, 0}, {3}});
  // First cap 800 KB: closes after param 2 (20 + 800000 bytes); the rest goes to the second.
  CHECK(distributed::compute_bucket_assignment(params, size_t{25} << 20, 800000) ==
        distributed::BucketAssignment{{5, 4, 2}, {3}, {1, 0}});
  // Tiny caps: one parameter per bucket, in reverse registration order.
  CHECK(distributed::compute_bucket_assignment(params, 1, 1) ==
        distributed::BucketAssignment{{5}, {4}, {3}, {2}, {1}, {0}});
  CHECK(distributed::compute_bucket_assignment({}, 1, 1).empty());
}

TEST_CASE("a parameter without gradient in a synced backward is an error naming it; the next iteration works") {
  const int world = 2;
  std::vector<std::shared_ptr<TwoHeads>> models;
  for (int r = 0; r < world; ++r) models.push_back(std::make_shared<TwoHeads>());
  const Tensor X = random({world * 2, 4}), Y = random({world * 2, 3});
  std::vector<std::string> errors(world);
  std::vector<std::vector<Tensor>> grads(world);
  distributed::run_local(world, DeviceType::CPU, [&](int rank) {
    DistributedDataParallel ddp(models[rank]);
    const Tensor x = X.narrow(0, rank * 2, 2), y = Y.narrow(0, rank * 2, 2);
    try {
      mse_loss(ddp(x), y).backward();
    } catch (const Error& e) {
      errors[rank] = e.what();
    }
    for (Tensor& p : ddp.parameters()) p.set_grad(Tensor());
    models[rank]->use_both = true;
    mse_loss(ddp(x), y).backward();
    grads[rank] = grads_of(ddp);
  });
  for (int r = 0; r < world; ++r) {
    CHECK(errors[r].find(fmt::format("DistributedDataParallel: rank {} finished a backward pass in which 2 of 4 "
                                     "parameters received no gradient: unused.weight, unused.bias", r)) != std::string::npos);
    CHECK(errors[r].find("find_unused_parameters = true") != std::string::npos);
    for (size_t i = 0; i < grads[r].size(); ++i) {
      REQUIRE(grads[r][i].defined());
      CHECK(identical(grads[r][i], grads[0][i]));
    }
  }
}

TEST_CASE("find_unused_parameters: unused parameters count as zeros, also when only some ranks use them") {
  const int world = 2;
  std::vector<std::shared_ptr<TwoHeads>> models;
  for (int r = 0; r < world; ++r) models.push_back(std::make_shared<TwoHeads>());
  // The reference: one float64 model, loss = (rank 0's loss with both heads + rank 1's with one) / 2.
  auto ref = std::make_shared<TwoHeads>();
  ref->load_state_dict(models[0]->state_dict());
  ref->to(kFloat64);
  const Tensor X = random({world * 2, 4}), Y = random({world * 2, 3});
  std::vector<std::vector<Tensor>> mixed(world), none_used(world);
  distributed::run_local(world, DeviceType::CPU, [&](int rank) {
    DistributedDataParallel ddp(models[rank], {.find_unused_parameters = true});
    const Tensor x = X.narrow(0, rank * 2, 2), y = Y.narrow(0, rank * 2, 2);
    models[rank]->use_both = rank == 0;
    mse_loss(ddp(x), y).backward();
    mixed[rank] = grads_of(ddp);
    for (Tensor& p : ddp.parameters()) p.set_grad(Tensor());
    models[rank]->use_both = false;  // now no rank uses the second head
    mse_loss(ddp(x), y).backward();
    none_used[rank] = grads_of(ddp);
  });
  ref->use_both = true;
  const Tensor l0 = mse_loss((*ref)(X.narrow(0, 0, 2).to(kFloat64)), Y.narrow(0, 0, 2).to(kFloat64));
  ref->use_both = false;
  const Tensor l1 = mse_loss((*ref)(X.narrow(0, 2, 2).to(kFloat64)), Y.narrow(0, 2, 2).to(kFloat64));
  mul(add(l0, l1), 0.5).backward();
  const auto expected = grads_of(*ref);  // used.weight, used.bias, unused.weight, unused.bias
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < expected.size(); ++i) {
      CHECK(excess(mixed[r][i], expected[i], kRtol, kAtol) <= 0);
      CHECK(identical(mixed[r][i], mixed[0][i]));
      REQUIRE(none_used[r][i].defined());
      if (i >= 2) CHECK(none_used[r][i].to_vector<double>() == std::vector<double>(none_used[r][i].numel(), 0.0));
    }
}

TEST_CASE("find_unused_parameters: a parameter the output does not reach but the loss does is an error") {
  std::vector<std::shared_ptr<TwoHeads>> models = {std::make_shared<TwoHeads>(), std::make_shared<TwoHeads>()};
  const Tensor X = random({4, 4}), Y = random({4, 3});
  CHECK_THROWS_WITH_AS(distributed::run_local(2, DeviceType::CPU, [&](int rank) {
    DistributedDataParallel ddp(models[rank], {.find_unused_parameters = true});
    const Tensor out = ddp(X.narrow(0, rank * 2, 2));
    add(mse_loss(out, Y.narrow(0, rank * 2, 2)), sum(models[rank]->unused->named_parameters()[0].second)).backward();
  }), doctest::Contains("parameter unused.weight received a gradient after it was marked ready"), Error);
}

TEST_CASE("DDP broadcasts rank 0's buffers at construction and (broadcast_buffers) at every forward") {
  const int world = 3;
  std::vector<std::shared_ptr<WithBuffer>> models, unsynced;
  for (int r = 0; r < world; ++r) {
    models.push_back(std::make_shared<WithBuffer>());
    unsynced.push_back(std::make_shared<WithBuffer>());
  }
  const Tensor rank0_shift = models[0]->named_buffers()[0].second.clone();
  const Tensor x = random({2, 3});
  std::vector<Tensor> at_init(world), after_forward(world), kept(world);
  distributed::run_local(world, DeviceType::CPU, [&](int rank) {
    DistributedDataParallel ddp(models[rank]);
    at_init[rank] = models[rank]->named_buffers()[0].second.clone();
    if (rank != 0) {
      NoGradGuard no_grad;
      models[rank]->named_buffers()[0].second.fill_(7.0);  // drifts, e.g. running statistics
    }
    (void)ddp(x);
    after_forward[rank] = models[rank]->named_buffers()[0].second.clone();
    DistributedDataParallel off(unsynced[rank], {.broadcast_buffers = false});
    if (rank != 0) {
      NoGradGuard no_grad;
      unsynced[rank]->named_buffers()[0].second.fill_(7.0);
    }
    (void)off(x);
    kept[rank] = unsynced[rank]->named_buffers()[0].second.clone();
  });
  for (int r = 0; r < world; ++r) {
    CHECK(identical(at_init[r], rank0_shift));
    CHECK(identical(after_forward[r], rank0_shift));
    CHECK(kept[r].to_vector<double>() == (r == 0 ? kept[0].to_vector<double>() : std::vector<double>(2, 7.0)));
  }
}

TEST_CASE("DDP: frozen parameters are not bucketed; state_dict keys and repr are PyTorch's") {
  auto model = make_mlp();
  model->named_parameters()[1].second.requires_grad_(false);  // 0.bias frozen
  std::vector<std::vector<std::string>> names;
  std::vector<std::string> keys;
  std::string repr;
  bool frozen_grad = true;
  distributed::run_local(1, DeviceType::CPU, [&](int) {
    DistributedDataParallel ddp(model);
    names = ddp.bucket_parameter_names();
    keys = ddp.state_dict().keys();
    repr = ddp.repr();
    mse_loss(ddp(random({2, 6})), random({2, 3})).backward();
    frozen_grad = model->named_parameters()[1].second.grad().defined();
  });
  CHECK(names == std::vector<std::vector<std::string>>{{"4.bias", "4.weight", "2.bias", "2.weight", "0.weight"}});
  CHECK(keys.front() == "module.0.weight");
  CHECK(keys.size() == 6);
  CHECK(repr.starts_with("DistributedDataParallel(\n  world_size=1, rank=0, backend=threads, bucket_cap_mb=25, "
                         "find_unused_parameters=False\n  (module): MLP("));
  CHECK_FALSE(frozen_grad);
}

TEST_CASE("DDP construction errors name the problem and its values") {
  auto model = make_mlp();
  auto other = make_mlp({6, 12, 3});
  CHECK_THROWS_WITH_AS(distributed::run_local(1, DeviceType::CPU, [&](int) { DistributedDataParallel ddp(nullptr); }),
                       doctest::Contains("DistributedDataParallel: the module is null"), Error);
  CHECK_THROWS_WITH_AS(distributed::run_local(1, DeviceType::CPU,
                                              [&](int) { DistributedDataParallel ddp(std::make_shared<nn::Tanh>()); }),
                       doctest::Contains("DistributedDataParallel: the module (Tanh) has no parameter that requires a "
                                         "gradient"),
                       Error);
  for (double bad : {0.0, -1.0, std::nan("")})
    CHECK_THROWS_WITH_AS(
        distributed::run_local(1, DeviceType::CPU, [&](int) { DistributedDataParallel ddp(model, {.bucket_cap_mb = bad}); }),
        doctest::Contains(
            fmt::format("DistributedDataParallel: bucket_cap_mb must be a positive number of MiB, got {}", bad).c_str()),
        Error);
  CHECK_THROWS_WITH_AS(distributed::run_local(
                           1, DeviceType::CPU, [&](int) { DistributedDataParallel ddp(model, {.first_bucket_cap_mb = -2}); }),
                       doctest::Contains("first_bucket_cap_mb must be a positive number of MiB, got -2"), Error);
  CHECK_THROWS_WITH_AS(distributed::run_local(
                           1, DeviceType::CPU, [&](int) { DistributedDataParallel ddp(model, {.bucket_cap_mb = 1e20}); }),
                       doctest::Contains("bucket_cap_mb must be a positive number of MiB, got 1e+20"), Error);
  // A cap that rounds down to no bytes at all.
  CHECK_THROWS_WITH_AS(distributed::run_local(
                           1, DeviceType::CPU, [&](int) { DistributedDataParallel ddp(model, {.bucket_cap_mb = 1e-9}); }),
                       doctest::Contains("DistributedDataParallel: bucket caps must be positive, got bucket_cap 0 bytes "
                                         "and first_bucket_cap 1048576 bytes"),
                       Error);
  // Rank 1 wraps a different model: every rank learns before any gradient is reduced.
  const std::vector<std::shared_ptr<nn::MLP>> models = {model, other};
  CHECK_THROWS_WITH_AS(distributed::run_local(2, DeviceType::CPU, [&](int rank) { DistributedDataParallel ddp(models[rank]); }),
                       doctest::Contains("DistributedDataParallel: rank 1 wraps a model with 4 parameters"), Error);
  // Without a process group.
  CHECK_THROWS_AS(DistributedDataParallel{model}, Error);
}
