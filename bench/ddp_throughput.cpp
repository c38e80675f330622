// Training throughput under DistributedDataParallel (issue 16): the training issue's 4-layer
// MLP (1024-4096-1024-4096-10, GELU, fp32, batch 256 per rank) and a larger one (8 layers of
// 8192, GELU, bf16, batch 1024 per rank), AdamW, cross-entropy on random data. Each rank times
// `--steps` steps after `--warmup` (the device synchronised and the ranks at a barrier before
// the clock starts and stops); rank 0 prints samples per second for the whole group. Run it
// once on one GPU with --no-ddp (the plain model: the scaling baseline) and once per world size;
// scaling efficiency = throughput(N ranks) / (N x throughput(one GPU, no DDP)).
// bench/torch_ddp_throughput.py is PyTorch DDP's side, under torchrun, same models and batches.
//
//   torchrun --nproc-per-node 2 --no-python build/bench/ddp_throughput --model wide8
//   build/bench/ddp_throughput --model wide8 --no-ddp            # one GPU, the baseline
//   build/bench/ddp_throughput --model mlp4 --local 2            # two ranks as threads
//   build/bench/ddp_throughput --model mlp4 --device cpu --local 2 --scale 16 --steps 3   # a CPU check
//
// Output (rank 0), one greppable line:
//   RESULT ddp_throughput model=mlp4 world=2 ddp=1 batch_per_rank=256 step_ms=1.23 samples_per_s=416000
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace {

using namespace kiln;

struct Args {
  std::string model = "mlp4";  // mlp4 | wide8
  std::string device = "cuda";
  int64_t batch = 0;           // per rank; 0: the model's default
  int steps = 20, warmup = 5;
  int local = 0;               // ranks as threads (run_local); 0: the launcher's (or one process)
  bool ddp = true;
  int64_t scale = 1;           // divide the layer widths (quick checks on a CPU)
};

struct ModelSpec {
  std::vector<int64_t> sizes;
  DType dtype;
  int64_t batch;
};

ModelSpec spec_of(const Args& a) {
  KILN_CHECK(a.scale >= 1 && a.scale <= 1024, "ddp_throughput: --scale must be in [1, 1024], got {}", a.scale);
  ModelSpec s;
  if (a.model == "mlp4") {
    s = {{1024, 4096, 1024, 4096, 10}, kFloat32, 256};
  } else if (a.model == "wide8") {
    s = {std::vector<int64_t>(9, 8192), kBFloat16, 1024};
  } else {
    KILN_CHECK(false, "ddp_throughput: --model must be mlp4 or wide8, got '{}'", a.model);
  }
  for (size_t i = 0; i + 1 < s.sizes.size(); ++i) s.sizes[i] = std::max<int64_t>(1, s.sizes[i] / a.scale);
  if (a.model == "wide8") s.sizes.back() = std::max<int64_t>(1, s.sizes.back() / a.scale);
  if (a.batch > 0) s.batch = a.batch;
  return s;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      KILN_CHECK(i + 1 < argc, "ddp_throughput: {} needs a value", flag);
      return argv[++i];
    };
    if (flag == "--model") a.model = value();
    else if (flag == "--device") a.device = value();
    else if (flag == "--batch") a.batch = std::stoll(value());
    else if (flag == "--steps") a.steps = std::stoi(value());
    else if (flag == "--warmup") a.warmup = std::stoi(value());
    else if (flag == "--local") a.local = std::stoi(value());
    else if (flag == "--scale") a.scale = std::stoll(value());
    else if (flag == "--no-ddp") a.ddp = false;
    else KILN_CHECK(false, "ddp_throughput: unknown flag '{}'", flag);
  }
  KILN_CHECK(a.device == "cuda" || a.device == "cpu", "ddp_throughput: --device must be cuda or cpu, got '{}'", a.device);
  KILN_CHECK(a.steps >= 1 && a.warmup >= 0, "ddp_throughput: --steps must be >= 1 and --warmup >= 0, got {} and {}",
             a.steps, a.warmup);
  KILN_CHECK(a.local >= 0 && !(a.local > 0 && !a.ddp), "ddp_throughput: --local {} needs DDP (drop --no-ddp)", a.local);
  return a;
}

// One rank: builds its replica (DDP broadcasts rank 0's weights), trains on its own random
// batch, returns seconds per step measured between two barriers.
double run_rank(const Args& a, const ModelSpec& s, Device device, const std::shared_ptr<nn::MLP>& model,
                const Tensor& x_host, const Tensor& y_host) {
  model->to(device, s.dtype);
  const Tensor x = x_host.to(device, s.dtype), y = y_host.to(device);
  std::unique_ptr<distributed::DistributedDataParallel> ddp;
  if (a.ddp) ddp = std::make_unique<distributed::DistributedDataParallel>(model);
  nn::Module& net = ddp ? static_cast<nn::Module&>(*ddp) : static_cast<nn::Module&>(*model);
  optim::AdamW opt(model->parameters(), optim::AdamWOptions{.lr = 1e-4});
  auto step = [&] {
    opt.zero_grad();
    Tensor logits = net(x);
    if (logits.dtype() != kFloat32) logits = logits.to(kFloat32);
    cross_entropy(logits, y).backward();
    opt.step();
  };
  auto sync = [&] {
    if (device.is_cuda()) cuda::synchronize(device);
    if (a.ddp) distributed::barrier();
  };
  for (int i = 0; i < a.warmup; ++i) step();
  sync();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < a.steps; ++i) step();
  sync();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / a.steps;
}

void report(const Args& a, const ModelSpec& s, int world, double step_s) {
  std::printf("RESULT ddp_throughput model=%s world=%d ddp=%d batch_per_rank=%lld step_ms=%.3f samples_per_s=%.0f\n",
              a.model.c_str(), world, a.ddp ? 1 : 0, static_cast<long long>(s.batch), step_s * 1e3,
              static_cast<double>(s.batch) * world / step_s);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    const ModelSpec s = spec_of(a);
    const bool cuda = a.device == "cuda";
    KILN_CHECK(!cuda || cuda::is_available(), "ddp_throughput: --device cuda but no GPU is visible");
    set_allow_tf32(false);
    manual_seed(0);
    // Replicas and data are made here (the default generator is not shared across threads);
    // each rank's batch differs, its weights are overwritten by rank 0's at construction.
    const int world = a.local > 0 ? a.local : 1;
    auto make = [&] {
      return std::make_shared<nn::MLP>(nn::MLPOptions{.sizes = s.sizes, .activation = nn::Activation::GELU});
    };
    if (a.local > 0) {
      std::vector<std::shared_ptr<nn::MLP>> models;
      std::vector<Tensor> xs, ys;
      for (int r = 0; r < world; ++r) {
        models.push_back(make());
        xs.push_back(randn({s.batch, s.sizes.front()}));
        ys.push_back(argmax(randn({s.batch, s.sizes.back()}), 1));
      }
      std::vector<double> seconds(static_cast<size_t>(world), 0.0);
      distributed::run_local(world, cuda ? DeviceType::CUDA : DeviceType::CPU, [&](int rank) {
        const auto r = static_cast<size_t>(rank);
        seconds[r] = run_rank(a, s, cuda ? Device::cuda(rank) : Device::cpu(), models[r], xs[r], ys[r]);
      });
      report(a, s, world, *std::max_element(seconds.begin(), seconds.end()));
      return 0;
    }
    if (a.ddp) distributed::init_process_group();  // the launcher's group, or a group of one
    const int rank = a.ddp ? distributed::get_rank() : 0;
    const int size = a.ddp ? distributed::get_world_size() : 1;
    const auto model = make();
    manual_seed(static_cast<uint64_t>(1 + rank));
    const Tensor x = randn({s.batch, s.sizes.front()}), y = argmax(randn({s.batch, s.sizes.back()}), 1);
    const Device device = cuda ? Device::cuda(a.ddp ? distributed::read_launch_env().local_rank : 0) : Device::cpu();
    const double step_s = run_rank(a, s, device, model, x, y);
    if (rank == 0) report(a, s, size, step_s);
    if (a.ddp) distributed::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
