// nn::Module basics: registration and its errors, dotted names through nesting, buffers,
// repr, in-place to(dtype) and train/eval propagation, on small modules built here.
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("MLP prints like PyTorch and names its parameters with dots") {
  nn::MLP mlp({.sizes = {4, 8, 2}, .activation = nn::Activation::GELU});
  CHECK(mlp.repr() ==
        "MLP(\n"
        "  (0): Linear(in_features=4, out_features=8, bias=True)\n"
        "  (1): GELU(approximate='none')\n"
        "  (2): Linear(in_features=8, out_features=2, bias=True)\n"
        ")");
  std::vector<std::string> names;
  for (auto& [n, p] : mlp.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
}

namespace {

// A module with its own parameter and buffer around a child: the shape of a real block.
struct Block : nn::Module {
  Block() : Module("Block") {
    scale = register_parameter("scale", ones({3}));
    steps = register_buffer("steps", zeros({1}, kInt64));
    running = register_buffer("running", zeros({3}));
    proj = register_module("proj", std::make_shared<nn::Linear>(3, 2));
  }
  Tensor forward(const Tensor& x) override { return (*proj)(x * scale); }
  Tensor scale, steps, running;
  std::shared_ptr<nn::Linear> proj;
};

struct Outer : nn::Module {
  Outer() : Module("Outer") {
    alpha = register_parameter("alpha", full({}, 0.5));
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 3, false));
    block = register_module("block", std::make_shared<Block>());
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
  }
  Tensor alpha;
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<Block> block;
  std::shared_ptr<nn::Dropout> drop;
};

// A bare module for registration tests.
struct Bare : nn::Module {
  Bare() : Module("Bare") {}
};

template <typename Pairs>
std::vector<std::string> names_of(const Pairs& pairs) {
  std::vector<std::string> out;
  for (const auto& [n, _] : pairs) out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("named_parameters and named_buffers use dotted names through nesting") {
  manual_seed(101);
  Outer m;
  CHECK(names_of(m.named_parameters()) ==
        std::vector<std::string>{"alpha", "fc.weight", "block.scale", "block.proj.weight", "block.proj.bias"});
  CHECK(names_of(m.named_parameters(false)) == std::vector<std::string>{"alpha"});
  CHECK(names_of(m.named_buffers()) == std::vector<std::string>{"block.steps", "block.running"});
  CHECK(m.named_buffers(false).empty());
  CHECK(names_of(m.named_children()) == std::vector<std::string>{"fc", "block", "drop"});
  // parameters() and buffers() list the same tensors in the same order.
  const auto params = m.parameters();
  const auto named = m.named_parameters();
  REQUIRE(params.size() == named.size());
  for (size_t i = 0; i < params.size(); ++i) CHECK(params[i].is_same(named[i].second));
  CHECK(params[3].is_same(m.block->proj->weight));
  CHECK(m.buffers().size() == 2);
  CHECK(m.buffers()[0].is_same(m.block->steps));
  CHECK(m.children().size() == 3);
  CHECK(m.children()[1] == m.block);
  // Parameters track gradients; buffers do not.
  for (const Tensor& p : params) CHECK(p.requires_grad());
  for (const Tensor& b : m.buffers()) CHECK_FALSE(b.requires_grad());
}

TEST_CASE("register_parameter marks only floating tensors, unless told not to") {
  Bare m;
  const Tensor& f = m.register_parameter("f", zeros({2}));
  const Tensor& frozen = m.register_parameter("frozen", zeros({2}), false);
  const Tensor& i = m.register_parameter("i", zeros({2}, kInt64));
  CHECK(f.requires_grad());
  CHECK_FALSE(frozen.requires_grad());
  CHECK_FALSE(i.requires_grad());
  CHECK(names_of(m.named_parameters()) == std::vector<std::string>{"f", "frozen", "i"});
}

TEST_CASE("Module registration errors") {
  Bare m;
  m.register_parameter("w", zeros({2}));
  m.register_buffer("buf", zeros({2}));
  m.register_module("child", std::make_shared<nn::ReLU>());
  CHECK_THROWS_WITH_AS(m.register_parameter("w", zeros({2})),
                       doctest::Contains("register_parameter: Bare already has an attribute named \"w\""), kiln::Error);
  // One namespace for parameters, buffers and children, as attributes in PyTorch.
  CHECK_THROWS_WITH_AS(m.register_buffer("w", zeros({2})),
                       doctest::Contains("register_buffer: Bare already has an attribute named \"w\""), kiln::Error);
  CHECK_THROWS_WITH_AS(m.register_parameter("buf", zeros({2})),
                       doctest::Contains("register_parameter: Bare already has an attribute named \"buf\""),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(m.register_module("child", std::make_shared<nn::Tanh>()),
                       doctest::Contains("register_module: Bare already has an attribute named \"child\""),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(m.register_module("w", std::make_shared<nn::Tanh>()),
                       doctest::Contains("register_module: Bare already has an attribute named \"w\""), kiln::Error);
  CHECK_THROWS_WITH_AS(m.register_parameter("a.b", zeros({2})),
                       doctest::Contains("register_parameter: Bare name \"a.b\" must not contain \".\""), kiln::Error);
  CHECK_THROWS_WITH_AS(m.register_buffer("x.y", zeros({2})),
                       doctest::Contains("register_buffer: Bare name \"x.y\" must not contain \".\""), kiln::Error);
  CHECK_THROWS_WITH_AS(m.register_module("c.d", std::make_shared<nn::Tanh>()),
                       doctest::Contains("register_module: Bare name \"c.d\" must not contain \".\""), kiln::Error);
  CHECK_THROWS_WITH_AS(m.register_parameter("", zeros({2})),
                       doctest::Contains("register_parameter: Bare name must not be empty"), kiln::Error);
  CHECK_THROWS_WITH_AS(m.register_parameter("u", Tensor()),
                       doctest::Contains("register_parameter: parameter \"u\" of Bare is an undefined tensor"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(m.register_buffer("u", Tensor()),
                       doctest::Contains("register_buffer: buffer \"u\" of Bare is an undefined tensor"), kiln::Error);
  CHECK_THROWS_WITH_AS(m.register_module("n", std::shared_ptr<nn::Module>()),
                       doctest::Contains("register_module: child \"n\" of Bare is null"), kiln::Error);
  // Failed registrations leave nothing behind.
  CHECK(names_of(m.named_parameters()) == std::vector<std::string>{"w"});
  CHECK(names_of(m.named_buffers()) == std::vector<std::string>{"buf"});
  CHECK(names_of(m.named_children()) == std::vector<std::string>{"child"});
  // A module without forward says so.
  CHECK_THROWS_WITH_AS(m(zeros({2})), doctest::Contains("Bare: forward() is not implemented for this module"),
                       kiln::Error);
}

TEST_CASE("train() and eval() reach every descendant and switch Dropout") {
  manual_seed(102);
  Outer m;
  auto all_modes = [&](bool on) {
    CHECK(m.is_training() == on);
    CHECK(m.fc->is_training() == on);
    CHECK(m.block->is_training() == on);
    CHECK(m.block->proj->is_training() == on);
    CHECK(m.drop->is_training() == on);
  };
  all_modes(true);
  nn::Module& ret = m.eval();
  CHECK(&ret == &m);
  all_modes(false);
  const Tensor x = random({50, 40}, kFloat32, 0.5, 2.0);
  CHECK((*m.drop)(x).is_same(x));
  m.train();
  all_modes(true);
  const std::vector<double> y = values((*m.drop)(x));
  int zeros_seen = 0;
  for (double v : y) zeros_seen += v == 0.0;
  CHECK(zeros_seen > 500);  // ~1000 of 2000 dropped at p = 0.5
  m.train(false);
  all_modes(false);
  // Setting a child's mode does not touch its parent.
  m.block->train();
  CHECK(m.block->proj->is_training());
  CHECK_FALSE(m.is_training());
  CHECK_FALSE(m.drop->is_training());
}

TEST_CASE("Module::to(dtype) converts floating parameters and buffers in place") {
  manual_seed(103);
  Outer m;
  Tensor scale = m.block->scale, running = m.block->running, steps = m.block->steps;
  m.to(kFloat64);
  for (const auto& [n, p] : m.named_parameters()) {
    INFO(n);
    CHECK(p.dtype() == kFloat64);
    CHECK(p.requires_grad());
  }
  CHECK(scale.dtype() == kFloat64);  // handles taken before see the new dtype
  CHECK(running.dtype() == kFloat64);
  CHECK(steps.dtype() == kInt64);  // integer buffers keep their dtype
  check_close(scale, {1, 1, 1}, {3}, Tolerance{0, 0});
  // The converted module runs in float64.
  const Tensor x = random({2, 3}, kFloat64);
  CHECK((*m.block)(x).dtype() == kFloat64);
  // Integer and bool targets are refused, and nothing changes.
  CHECK_THROWS_WITH_AS(m.to(kInt64), doctest::Contains("Module::to: only floating dtypes are allowed, got int64"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(m.to(kInt32), doctest::Contains("Module::to: only floating dtypes are allowed, got int32"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(m.to(kBool), doctest::Contains("Module::to: only floating dtypes are allowed, got bool"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(m.to(Device::cpu(), kInt64),
                       doctest::Contains("Module::to: only floating dtypes are allowed, got int64"), kiln::Error);
  CHECK(scale.dtype() == kFloat64);
  // to(device) onto the device it is on keeps every handle and value.
  m.to(Device::cpu());
  CHECK(m.block->scale.is_same(scale));
  CHECK(scale.dtype() == kFloat64);
  m.to(Device::cpu(), kBFloat16);
  CHECK(scale.dtype() == kBFloat16);
  CHECK(m.fc->weight.dtype() == kBFloat16);
}

TEST_CASE("repr shows extra_repr lines before children") {
  manual_seed(104);
  struct Tagged : nn::Module {
    Tagged() : Module("Tagged") { register_module("act", std::make_shared<nn::ReLU>()); }
    std::string extra_repr() const override { return "k=1\nmode='fast'"; }
  };
  CHECK(Tagged().repr() ==
        "Tagged(\n"
        "  k=1\n"
        "  mode='fast'\n"
        "  (act): ReLU()\n"
        ")");
  CHECK(Bare().repr() == "Bare()");
  Outer m;
  CHECK(m.repr() ==
        "Outer(\n"
        "  (fc): Linear(in_features=4, out_features=3, bias=False)\n"
        "  (block): Block(\n"
        "    (proj): Linear(in_features=3, out_features=2, bias=True)\n"
        "  )\n"
        "  (drop): Dropout(p=0.5, inplace=False)\n"
        ")");
}
