// Module::state_dict() and load_state_dict(): PyTorch's keys and order, values that alias the
// module's memory without autograd state, loading with dtype conversion, PyTorch's strict
// errors (missing, unexpected, size mismatch, all listed in one message), and a failed load
// that leaves every parameter and buffer bit for bit as it was.
#include "nn/safetensors_testing.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// A block with a parameter, buffers of two dtypes and a child: the shape of a real layer.
struct Cell : nn::Module {
  Cell() : Module("Cell") {
    gain = register_parameter("gain", random({3}));
    count = register_buffer("count", from_vector<int64_t>({7}, {1}));
    running = register_buffer("running", random({3}));
    proj = register_module("proj", std::make_shared<nn::Linear>(3, 2));
  }
  Tensor forward(const Tensor& x) override { return (*proj)(x * gain + running); }
  Tensor gain, count, running;
  std::shared_ptr<nn::Linear> proj;
};

struct Net : nn::Module {
  Net() : Module("Net") {
    scale = register_parameter("scale", full({}, 0.25));
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 3, false));
    cell = register_module("cell", std::make_shared<Cell>());
  }
  Tensor forward(const Tensor& x) override { return (*cell)((*fc)(x) * scale); }
  Tensor scale;
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<Cell> cell;
};

// Every parameter and buffer of m, by name, as bytes.
std::vector<std::pair<std::string, std::vector<uint8_t>>> snapshot(const nn::Module& m) {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  for (const auto& [n, t] : m.named_parameters()) out.emplace_back(n, tensor_bytes(t));
  for (const auto& [n, t] : m.named_buffers()) out.emplace_back(n, tensor_bytes(t));
  return out;
}

// A state dict with m's keys and shapes, new random values (and a new count).
StateDict fresh_values(const nn::Module& m) {
  StateDict sd;
  for (const auto& [n, t] : m.state_dict()) sd.insert(n, t.is_floating_point() ? random(t.sizes(), t.dtype()) : t.clone().fill_(42));
  return sd;
}

}  // namespace

TEST_CASE("state_dict has PyTorch's keys: each module's parameters, then its buffers, then its children") {
  manual_seed(1);
  Net net;
  CHECK(net.state_dict().keys() == std::vector<std::string>{"scale", "fc.weight", "cell.gain", "cell.count",
                                                            "cell.running", "cell.proj.weight", "cell.proj.bias"});
  nn::MLP mlp({.sizes = {4, 8, 2}, .activation = nn::Activation::GELU});
  CHECK(mlp.state_dict().keys() == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(mlp.state_dict().metadata().empty());
}

TEST_CASE("state_dict values share the module's memory but carry no autograd state") {
  manual_seed(2);
  Net net;
  const StateDict sd = net.state_dict();
  const Tensor w = sd.at("fc.weight");
  CHECK(w.is_alias_of(net.fc->weight));
  CHECK_FALSE(w.is_same(net.fc->weight));
  CHECK(w.sizes() == net.fc->weight.sizes());
  CHECK(w.strides() == net.fc->weight.strides());
  CHECK_FALSE(w.requires_grad());
  CHECK(net.fc->weight.requires_grad());  // the parameter itself is untouched
  CHECK(bitwise_equal(w, net.fc->weight));
  // Writing through the state dict writes the parameter; both see one version counter.
  Tensor(w).fill_(1.5);
  CHECK(w._version() == net.fc->weight._version());
  for (double v : values(net.fc->weight)) CHECK(v == 1.5);
  CHECK(sd.at("cell.count").dtype() == kInt64);
  CHECK(sd.at("cell.count").is_alias_of(net.cell->count));
}

TEST_CASE("load_state_dict copies into the existing tensors, so every handle sees the values") {
  manual_seed(3);
  nn::MLP a({.sizes = {5, 7, 3}, .activation = nn::Activation::GELU});
  nn::MLP b({.sizes = {5, 7, 3}, .activation = nn::Activation::GELU});
  auto* b0 = dynamic_cast<nn::Linear*>(b[0].get());
  REQUIRE(b0 != nullptr);
  const Tensor handle = b0->weight;
  CHECK_FALSE(bitwise_equal(a.state_dict().at("0.weight"), handle));

  const nn::IncompatibleKeys keys = b.load_state_dict(a.state_dict());
  CHECK(keys.empty());
  CHECK(b0->weight.is_same(handle));
  CHECK(b0->weight.requires_grad());
  for (const auto& [n, t] : a.state_dict()) CHECK_MESSAGE(bitwise_equal(b.state_dict().at(n), t), n);
  const Tensor x = random({4, 5});
  CHECK(bitwise_equal(a(x), b(x)));
  // The two modules stay independent: the load copied values, it did not share memory.
  CHECK_FALSE(b0->weight.is_alias_of(dynamic_cast<nn::Linear*>(a[0].get())->weight));
}

TEST_CASE("load_state_dict converts dtypes as copy_ does") {
  manual_seed(4);
  Net net;
  StateDict sd;
  std::map<std::string, std::vector<double>> expected;
  for (const auto& [n, t] : net.state_dict()) {
    // Float64 values into the float32 parameters; a float64 7.9 into the int64 buffer.
    Tensor v = n == "cell.count" ? from_vector<double>({7.9}, {1}) : random(t.sizes(), kFloat64);
    std::vector<double> e = values(v);
    for (double& x : e) x = n == "cell.count" ? 7.0 : round_to(x, kFloat32);
    expected[n] = e;
    sd.insert(n, v);
  }
  net.load_state_dict(sd);
  for (const auto& [n, t] : net.state_dict()) {
    INFO(n);
    CHECK(t.dtype() == (n == "cell.count" ? kInt64 : kFloat32));
    CHECK(values(t) == expected[n]);
  }
  // bfloat16 and int32 sources into float32: exact.
  nn::Linear lin(2, 2);
  Tensor w16 = random({2, 2}, kBFloat16);
  StateDict small;
  small.insert("weight", w16);
  small.insert("bias", from_vector<int32_t>({-3, 5}, {2}));
  lin.load_state_dict(small);
  CHECK(values(lin.weight) == values(w16));
  CHECK(values(lin.bias) == std::vector<double>{-3, 5});
  CHECK(lin.weight.dtype() == kFloat32);
}

TEST_CASE("load_state_dict under strict lists missing and unexpected keys in PyTorch's words") {
  manual_seed(5);
  nn::MLP mlp({.sizes = {3, 4, 2}});
  StateDict sd = mlp.state_dict();
  StateDict partial;
  partial.insert("0.weight", sd.at("0.weight").clone());
  partial.insert("2.bias", sd.at("2.bias").clone());
  partial.insert("head.weight", random({2, 2}));
  partial.insert("extra", random({1}));
  CHECK_THROWS_WITH_AS(mlp.load_state_dict(partial),
                       "load_state_dict: Error(s) in loading state_dict for MLP:\n"
                       "\tMissing key(s) in state_dict: \"0.bias\", \"2.weight\".\n"
                       "\tUnexpected key(s) in state_dict: \"head.weight\", \"extra\".",
                       Error);
  StateDict missing_only;
  missing_only.insert("0.weight", sd.at("0.weight").clone());
  CHECK_THROWS_WITH_AS(mlp.load_state_dict(missing_only),
                       "load_state_dict: Error(s) in loading state_dict for MLP:\n"
                       "\tMissing key(s) in state_dict: \"0.bias\", \"2.weight\", \"2.bias\".",
                       Error);
  StateDict unexpected_only = fresh_values(mlp);
  unexpected_only.insert("running_mean", random({4}));
  CHECK_THROWS_WITH_AS(mlp.load_state_dict(unexpected_only),
                       "load_state_dict: Error(s) in loading state_dict for MLP:\n"
                       "\tUnexpected key(s) in state_dict: \"running_mean\".",
                       Error);
}

TEST_CASE("load_state_dict without strict reports the unmatched keys and loads the rest") {
  manual_seed(6);
  nn::MLP mlp({.sizes = {3, 4, 2}});
  const Tensor w0 = random({4, 3});
  const auto before = snapshot(mlp);
  StateDict partial;
  partial.insert("extra", random({5}));
  partial.insert("0.weight", w0);
  const nn::IncompatibleKeys keys = mlp.load_state_dict(partial, /*strict=*/false);
  CHECK(keys.missing_keys == std::vector<std::string>{"0.bias", "2.weight", "2.bias"});
  CHECK(keys.unexpected_keys == std::vector<std::string>{"extra"});
  CHECK_FALSE(keys.empty());
  CHECK(bitwise_equal(mlp.state_dict().at("0.weight"), w0));
  const StateDict now = mlp.state_dict();
  for (const auto& [n, bytes] : before)
    if (n != "0.weight") CHECK_MESSAGE(tensor_bytes(now.at(n)) == bytes, n);
}

TEST_CASE("a shape mismatch is an error naming the key and both shapes, strict or not") {
  manual_seed(7);
  nn::MLP mlp({.sizes = {3, 4, 2}});
  StateDict sd = fresh_values(mlp);
  sd.insert_or_assign("2.weight", random({2, 5}));
  sd.insert_or_assign("0.bias", random({4, 1}));
  const std::string message =
      "load_state_dict: Error(s) in loading state_dict for MLP:\n"
      "\tsize mismatch for 0.bias: copying a param with shape [4, 1] from checkpoint, the shape in current model is "
      "[4].\n"
      "\tsize mismatch for 2.weight: copying a param with shape [2, 5] from checkpoint, the shape in current model is "
      "[2, 4].";
  CHECK_THROWS_WITH_AS(mlp.load_state_dict(sd), message.c_str(), Error);
  CHECK_THROWS_WITH_AS(mlp.load_state_dict(sd, false), message.c_str(), Error);
  // Everything at once: missing, unexpected and a size mismatch in one message.
  StateDict all;
  all.insert("0.weight", random({1, 3}));
  all.insert("bogus", random({1}));
  CHECK_THROWS_WITH_AS(mlp.load_state_dict(all),
                       "load_state_dict: Error(s) in loading state_dict for MLP:\n"
                       "\tMissing key(s) in state_dict: \"0.bias\", \"2.weight\", \"2.bias\".\n"
                       "\tUnexpected key(s) in state_dict: \"bogus\".\n"
                       "\tsize mismatch for 0.weight: copying a param with shape [1, 3] from checkpoint, the shape in "
                       "current model is [4, 3].",
                       Error);
}

TEST_CASE("a failed load leaves every parameter and buffer bit for bit as it was") {
  manual_seed(8);
  Net net;
  const auto before = snapshot(net);
  const auto handles = net.state_dict();
  auto unchanged = [&] {
    const auto now = snapshot(net);
    REQUIRE(now.size() == before.size());
    for (size_t i = 0; i < now.size(); ++i) CHECK_MESSAGE(now[i] == before[i], now[i].first);
  };
  // Each broken state dict has new values for every key, with the fault on the last key in
  // the module's order, so a loader that copied as it went would have changed the rest.
  SUBCASE("shape mismatch on the last key") {
    StateDict sd = fresh_values(net);
    sd.insert_or_assign("cell.proj.bias", random({3}));
    CHECK_THROWS_AS(net.load_state_dict(sd), Error);
    CHECK_THROWS_AS(net.load_state_dict(sd, false), Error);
  }
  SUBCASE("missing last key") {
    StateDict sd;
    for (const auto& [n, t] : fresh_values(net))
      if (n != "cell.proj.bias") sd.insert(n, t);
    CHECK_THROWS_AS(net.load_state_dict(sd), Error);
  }
  SUBCASE("unexpected key") {
    StateDict sd = fresh_values(net);
    sd.insert("zzz", random({1}));
    CHECK_THROWS_AS(net.load_state_dict(sd), Error);
  }
  SUBCASE("undefined tensor") {
    StateDict sd = fresh_values(net);
    sd.insert_or_assign("cell.proj.bias", Tensor());
    CHECK_THROWS_WITH_AS(net.load_state_dict(sd),
                         doctest::Contains("\"cell.proj.bias\" is an undefined tensor in the state dict."), Error);
  }
  unchanged();
  // The module's handles are the same objects as before.
  for (const auto& [n, t] : net.state_dict()) CHECK(t.is_alias_of(handles.at(n)));
}

TEST_CASE("loading a module's own state dict, or its tensors under swapped keys, reads every value before writing") {
  manual_seed(9);
  Net net;
  const auto before = snapshot(net);
  net.load_state_dict(net.state_dict());
  CHECK(snapshot(net) == before);

  // gain and running have the same shape: swap them through the module's own aliases.
  const std::vector<uint8_t> gain = tensor_bytes(net.cell->gain), running = tensor_bytes(net.cell->running);
  StateDict swapped;
  for (const auto& [n, t] : net.state_dict()) {
    if (n == "cell.gain") swapped.insert(n, net.state_dict().at("cell.running"));
    else if (n == "cell.running") swapped.insert(n, net.state_dict().at("cell.gain"));
    else swapped.insert(n, t);
  }
  net.load_state_dict(swapped);
  CHECK(tensor_bytes(net.cell->gain) == running);
  CHECK(tensor_bytes(net.cell->running) == gain);
}

TEST_CASE("load_state_dict refuses a destination whose elements share memory") {
  struct Expanded : nn::Module {
    Expanded() : Module("Expanded") { register_buffer("mask", zeros({1, 3}).expand({2, 3})); }
  };
  Expanded m;
  StateDict sd;
  sd.insert("mask", random({2, 3}));
  CHECK_THROWS_WITH_AS(m.load_state_dict(sd),
                       doctest::Contains("cannot load mask: its elements share memory (an expanded view of shape "
                                         "[2, 3], strides [0, 1])"),
                       Error);
}

TEST_CASE("a module round-trips through a state dict on a non-contiguous source") {
  manual_seed(10);
  nn::Linear lin(3, 4);
  StateDict sd;
  const Tensor wt = random({3, 4}).t();  // [4, 3], transposed in memory
  REQUIRE_FALSE(wt.is_contiguous());
  sd.insert("weight", wt);
  sd.insert("bias", random({8}).slice(0, 0, 8, 2));
  lin.load_state_dict(sd);
  CHECK(values(lin.weight) == values(wt));
  CHECK(values(lin.bias) == values(sd.at("bias")));
  CHECK(lin.weight.is_contiguous());
  const Tensor x = random({2, 3});
  check_close(lin(x), reference_linear(x, wt, sd.at("bias")), {2, 4});
}
