// The Kiln side of the safetensors interop check with PyTorch (scripts/safetensors_interop.py
// drives it and decides PASS/FAIL): it loads weights Python wrote into an nn::MLP and runs the
// forward, exports a Kiln MLP's weights and outputs for Python to check, and re-saves any file
// so Python can compare what Kiln wrote with what it read.
//
//   safetensors_interop forward WEIGHTS INPUTS OUT [--device cpu|cuda] [--dtype float32|float64]
//       builds an MLP whose sizes come from WEIGHTS ("0.weight", "2.weight", ...: PyTorch's
//       nn.Sequential(Linear, GELU, Linear, ...)), loads WEIGHTS into it (strict; converted to
//       --dtype), runs it on INPUTS' "x" (in --dtype) and saves {"y": output} to OUT
//   safetensors_interop export DIR [--seed N]
//       saves a seeded 16-32-32-8 GELU MLP to DIR/kiln_weights.safetensors and its inputs and
//       outputs (float32, and float64 from a float64 copy) to DIR/kiln_io.safetensors
//   safetensors_interop resave IN OUT [--device cpu|cuda]
//       load(IN, device) then save(OUT): every dtype, through the device when asked
//   safetensors_interop has-cuda
//       prints "yes" when Kiln sees a GPU, else "no"
#include <kiln/kiln.h>

#include <cstdio>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct Options {
  std::vector<std::string> positional;
  Device device = Device::cpu();
  DType dtype = kFloat32;
  uint64_t seed = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      KILN_CHECK(i + 1 < argc, "safetensors_interop: {} needs a value", a);
      return std::string(argv[++i]);
    };
    if (a == "--device") {
      const std::string d = value();
      KILN_CHECK(d == "cpu" || d == "cuda", "safetensors_interop: --device must be cpu or cuda, got \"{}\"", d);
      o.device = d == "cpu" ? Device::cpu() : Device::cuda(0);
    } else if (a == "--dtype") {
      const std::string d = value();
      KILN_CHECK(d == "float32" || d == "float64", "safetensors_interop: --dtype must be float32 or float64, got \"{}\"",
                 d);
      o.dtype = d == "float32" ? kFloat32 : kFloat64;
    } else if (a == "--seed") {
      o.seed = std::stoull(value());
    } else {
      o.positional.push_back(a);
    }
  }
  return o;
}

// PyTorch's nn.Sequential(Linear, GELU, ..., Linear) keys: linear layers at even indices.
std::vector<int64_t> mlp_sizes(const StateDict& weights) {
  std::vector<int64_t> sizes;
  for (int i = 0; weights.contains(fmt::format("{}.weight", i)); i += 2) {
    const Tensor& w = weights.at(fmt::format("{}.weight", i));
    KILN_CHECK(w.dim() == 2, "safetensors_interop: {}.weight must be 2-D, got shape {}", i, shape_str(w.sizes()));
    if (sizes.empty()) sizes.push_back(w.size(1));
    sizes.push_back(w.size(0));
  }
  KILN_CHECK(sizes.size() >= 2, "safetensors_interop: no \"0.weight\" in the weights (keys: {})",
             fmt::join(weights.keys(), ", "));
  return sizes;
}

int forward(const Options& o) {
  KILN_CHECK(o.positional.size() == 3, "safetensors_interop forward: expected WEIGHTS INPUTS OUT");
  const StateDict weights = load(o.positional[0], o.device);
  nn::MLP mlp({.sizes = mlp_sizes(weights), .activation = nn::Activation::GELU});
  mlp.to(o.device, o.dtype);
  const nn::IncompatibleKeys keys = mlp.load_state_dict(weights);  // strict
  KILN_CHECK(keys.empty(), "safetensors_interop: strict load reported unmatched keys");
  const Tensor x = load(o.positional[1], o.device).at("x").to(o.dtype);
  StateDict out;
  out.insert("y", mlp(x));
  out.metadata().emplace("producer", "kiln");
  out.metadata().emplace("device", o.device.str());
  save(out, o.positional[2]);
  fmt::print("safetensors_interop: forward of MLP {} on {} in {}: wrote {}\n", shape_str(mlp_sizes(weights)),
             o.device.str(), dtype_name(o.dtype), o.positional[2]);
  return 0;
}

int export_model(const Options& o) {
  KILN_CHECK(o.positional.size() == 1, "safetensors_interop export: expected DIR");
  const std::string dir = o.positional[0];
  manual_seed(o.seed);
  nn::MLP mlp({.sizes = {16, 32, 32, 8}, .activation = nn::Activation::GELU});
  StateDict weights = mlp.state_dict();
  weights.metadata().emplace("format", "pt");
  save(weights, dir + "/kiln_weights.safetensors");
  const Tensor x = randn({5, 16});
  StateDict io;
  io.insert("x", x);
  io.insert("y", mlp(x));
  mlp.to(kFloat64);
  io.insert("y64", mlp(x.to(kFloat64)));
  save(io, dir + "/kiln_io.safetensors");
  fmt::print("safetensors_interop: exported MLP [16, 32, 32, 8] to {}\n", dir);
  return 0;
}

int resave(const Options& o) {
  KILN_CHECK(o.positional.size() == 2, "safetensors_interop resave: expected IN OUT");
  const StateDict sd = load(o.positional[0], o.device);
  for (const auto& [name, t] : sd)
    KILN_CHECK(t.device() == o.device, "safetensors_interop: \"{}\" landed on {}", name, t.device().str());
  save(sd, o.positional[1]);
  fmt::print("safetensors_interop: re-saved {} tensors through {}\n", sd.size(), o.device.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: safetensors_interop forward|export|resave|has-cuda ... (see the source's comment)\n");
    return 2;
  }
  const std::string command = argv[1];
  try {
    const Options o = parse(argc, argv);
    if (command == "forward") return forward(o);
    if (command == "export") return export_model(o);
    if (command == "resave") return resave(o);
    if (command == "has-cuda") {
      fmt::print("{}\n", cuda::is_available() ? "yes" : "no");
      return 0;
    }
    std::fprintf(stderr, "safetensors_interop: unknown command \"%s\"\n", command.c_str());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "safetensors_interop: %s\n", e.what());
    return 1;
  }
}
