// Checkpoints on the GPU: CUDA tensors (every dtype, strided ones too) saved through the host
// and read back bit for bit on either device, load(path, cuda), and load_state_dict across
// devices: values copied into the parameters' own device and memory, a failed load leaving a
// GPU module as it was.
#ifdef KILN_WITH_CUDA

#include "cuda/differential.h"
#include "nn/safetensors_testing.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("CUDA tensors of every dtype and layout are saved through the host and load on either device") {
  manual_seed(21);
  TempDir dir;
  StateDict sd;
  for (DType dtype : kAll)
    for (Layout layout : kLayouts)
      sd.insert(fmt::format("{}_{}", dtype_name(dtype), layout_name(layout)),
                same_layout_on(random_with_layout({3, 5}, layout, dtype), kGpu));
  sd.insert("scalar", full({}, 3.25).to(kGpu));
  sd.insert("empty", empty({0, 4}, kGpu));
  sd.metadata().emplace("device", "cuda");
  save(sd, dir / "gpu.safetensors");
  CHECK(save_bytes(sd) == read_file(dir / "gpu.safetensors"));

  const StateDict on_cpu = load(dir / "gpu.safetensors");
  const StateDict on_gpu = load(dir / "gpu.safetensors", kGpu);
  CHECK(on_cpu.keys() == sd.keys());
  CHECK(on_gpu.keys() == sd.keys());
  CHECK(on_gpu.metadata() == sd.metadata());
  for (const auto& [name, t] : sd) {
    INFO(name);
    CHECK(on_cpu.at(name).device() == Device::cpu());
    CHECK(on_gpu.at(name).device() == kGpu);
    CHECK(bitwise_equal(on_cpu.at(name), t));
    CHECK(bitwise_equal(on_gpu.at(name), t));
  }
  // A malformed file fails the same way when the target is the GPU.
  std::vector<uint8_t> bytes = read_file(dir / "gpu.safetensors");
  bytes.pop_back();
  CHECK_THROWS_WITH_AS(load_bytes(bytes, kGpu), doctest::Contains("load: \"<memory>\": tensor"), Error);
}

TEST_CASE("load_state_dict copies into each parameter's own device, whatever the source's") {
  manual_seed(22);
  nn::MLP cpu_model({.sizes = {6, 10, 3}, .activation = nn::Activation::GELU});
  nn::MLP gpu_model({.sizes = {6, 10, 3}, .activation = nn::Activation::GELU});
  gpu_model.to(kGpu);
  const std::vector<Tensor> handles = gpu_model.parameters();

  // CPU state dict into the GPU module.
  CHECK(gpu_model.load_state_dict(cpu_model.state_dict()).empty());
  for (size_t i = 0; i < handles.size(); ++i) {
    CHECK(gpu_model.parameters()[i].is_same(handles[i]));
    CHECK(handles[i].device() == kGpu);
  }
  for (const auto& [n, t] : cpu_model.state_dict()) CHECK_MESSAGE(bitwise_equal(gpu_model.state_dict().at(n), t), n);
  const Tensor x = random({4, 6});
  check_close(gpu_model(x.to(kGpu)), values(cpu_model(x)), {4, 3}, gpu_tolerance(kFloat32), "GPU vs CPU forward");

  // GPU state dict (float64 on the GPU) into a CPU module: moved and converted.
  nn::MLP other({.sizes = {6, 10, 3}, .activation = nn::Activation::GELU});
  StateDict sd64;
  for (const auto& [n, t] : other.state_dict()) sd64.insert(n, random(t.sizes(), kFloat64).to(kGpu));
  cpu_model.load_state_dict(sd64);
  for (const auto& [n, t] : sd64) {
    INFO(n);
    CHECK(cpu_model.state_dict().at(n).device() == Device::cpu());
    std::vector<double> want = values(t);
    for (double& v : want) v = round_to(v, kFloat32);
    CHECK(values(cpu_model.state_dict().at(n)) == want);
  }

  // A failed load leaves the GPU module bit for bit as it was.
  std::vector<std::vector<uint8_t>> before;
  for (const Tensor& p : gpu_model.parameters()) before.push_back(tensor_bytes(p));
  StateDict bad;
  for (const auto& [n, t] : other.state_dict()) bad.insert(n, random(t.sizes()).to(kGpu));
  bad.insert_or_assign("2.bias", random({4}).to(kGpu));
  CHECK_THROWS_WITH_AS(gpu_model.load_state_dict(bad), doctest::Contains("size mismatch for 2.bias"), Error);
  for (size_t i = 0; i < handles.size(); ++i) CHECK(tensor_bytes(gpu_model.parameters()[i]) == before[i]);
}

TEST_CASE("a GPU module goes through a file and back onto the GPU") {
  manual_seed(23);
  TempDir dir;
  nn::MLP a({.sizes = {8, 16, 4}, .activation = nn::Activation::GELU});
  a.to(kGpu);
  save(a.state_dict(), dir / "gpu_mlp.safetensors");
  nn::MLP b({.sizes = {8, 16, 4}, .activation = nn::Activation::GELU});
  b.to(kGpu);
  CHECK(b.load_state_dict(load(dir / "gpu_mlp.safetensors", kGpu)).empty());
  const Tensor x = random({3, 8}).to(kGpu);
  CHECK(bitwise_equal(a(x), b(x)));
}

#endif  // KILN_WITH_CUDA
