// Trains an MLP (784-256-128-10, GELU) on Fashion-MNIST with AdamW and cross-entropy, the
// learning rate annealed to 0 by a cosine over all steps (--schedule constant keeps it), on the
// CPU or a GPU: a progress bar per epoch, a line per epoch with the training loss and the test
// accuracy, a safetensors checkpoint (model and optimizer) written at the end and read back
// into a fresh model, which must score the same. --resume continues from such a checkpoint;
// --profile prints the profiler's table of one training step (--trace PATH also writes its
// Chrome trace: with DDP it shows the gradient all-reduces beside the backward kernels).
// --compile captures the model's forward, fuses each linear+GELU (graph::fuse_linear_gelu) and, on a GPU, runs each full-size
// training step (forward, loss, backward, AdamW, schedule) as one CUDA graph replay
// (graph::compile of the step); an epoch's last, smaller batch is skipped (a captured step has
// fixed shapes, and its gradients live in the graph's memory: an eager step in between would
// leave the parameters' .grad pointing elsewhere).
//
// Data parallel (distributed::DistributedDataParallel): --ddp joins the process group a
// launcher describes (init_process_group(): torchrun, mpirun or srun; without one, a group of
// one), one rank per GPU over NCCL, or on the CPU a group of one over the Threads backend:
//   torchrun --nproc-per-node 2 --no-python build/examples/train_fashion_mnist --ddp
// --ddp-local N runs N ranks as threads of this process (distributed::run_local): over NCCL on
// cuda:0..N-1, or over the Threads backend with --device cpu. Each rank trains on its shard of
// every epoch (data::DistributedSampler), --batch samples per step per rank as in PyTorch (N
// ranks at --batch B/N take the steps of one process at --batch B); rank 0 prints, evaluates
// and writes the checkpoint (the wrapped model's keys, so it loads without --ddp). The model's
// gradients (0.94 MB) fit DDP's first bucket; --first-bucket-cap-mb 0.1 --bucket-cap-mb 0.2
// splits them, so a --profile --trace shows all-reduces overlapping the rest of backward.
//
//   train_fashion_mnist [--device cpu|cuda] [--epochs 20] [--batch 256] [--lr 1e-3] [--seed 0]
//                       [--schedule cosine|constant] [--data DIR] [--checkpoint PATH] [--resume PATH]
//                       [--limit N] [--profile [--trace PATH]] [--compile] [--ddp | --ddp-local N]
//                       [--bucket-cap-mb 25] [--first-bucket-cap-mb 1]
//
// The last line is greppable, as bench/fashion_mnist_torch.py's:
//   RESULT framework=kiln seed=0 acc=0.8901 train_s=12.34 ...
// train_s sums the epochs' training loops (shuffle, forward, backward, optimizer), synchronised
// at both ends of each; loading, the model's set-up and the test evaluation are outside it.
#include <kiln/kiln.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "examples/data/data_loader.h"
#include "examples/data/distributed_sampler.h"
#include "examples/data/fashion_mnist.h"
#include "examples/data/progress.h"

using namespace kiln;

namespace {

struct Args {
  std::string device;
  int64_t epochs = 20;
  std::string schedule = "cosine";
  int64_t batch = 256;
  double lr = 1e-3;
  uint64_t seed = 0;
  std::string data;
  std::string checkpoint = "fashion_mnist.safetensors";
  std::string resume;
  int64_t limit = 0;  // training samples used (0: all)
  bool profile = false;
  std::string trace;  // with --profile: the Chrome trace of the profiled step
  bool compile = false;
  bool ddp = false;       // join the launcher's process group
  int64_t ddp_local = 0;  // run this many ranks as threads (0: off)
  distributed::DDPOptions ddp_options;  // --bucket-cap-mb, --first-bucket-cap-mb
};

Args parse(int argc, char** argv) {
  Args a;
  auto value = [&](int& i) -> std::string {
    KILN_CHECK(i + 1 < argc, "train_fashion_mnist: {} needs a value", argv[i]);
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--device") a.device = value(i);
    else if (flag == "--epochs") a.epochs = std::stoll(value(i));
    else if (flag == "--batch") a.batch = std::stoll(value(i));
    else if (flag == "--lr") a.lr = std::stod(value(i));
    else if (flag == "--seed") a.seed = std::stoull(value(i));
    else if (flag == "--schedule") a.schedule = value(i);
    else if (flag == "--data") a.data = value(i);
    else if (flag == "--checkpoint") a.checkpoint = value(i);
    else if (flag == "--resume") a.resume = value(i);
    else if (flag == "--limit") a.limit = std::stoll(value(i));
    else if (flag == "--profile") a.profile = true;
    else if (flag == "--trace") a.trace = value(i);
    else if (flag == "--compile") a.compile = true;
    else if (flag == "--ddp") a.ddp = true;
    else if (flag == "--ddp-local") a.ddp_local = std::stoll(value(i));
    else if (flag == "--bucket-cap-mb") a.ddp_options.bucket_cap_mb = std::stod(value(i));
    else if (flag == "--first-bucket-cap-mb") a.ddp_options.first_bucket_cap_mb = std::stod(value(i));
    else KILN_FAIL("train_fashion_mnist: unknown option \"{}\" (see the comment at the top of the file)", flag);
  }
  KILN_CHECK(a.device.empty() || a.device == "cpu" || a.device == "cuda",
             "train_fashion_mnist: --device must be cpu or cuda, got \"{}\"", a.device);
  KILN_CHECK(a.schedule == "cosine" || a.schedule == "constant",
             "train_fashion_mnist: --schedule must be cosine or constant, got \"{}\"", a.schedule);
  KILN_CHECK(a.epochs >= 0 && a.batch > 0 && a.lr > 0 && a.limit >= 0,
             "train_fashion_mnist: --epochs >= 0, --batch > 0, --lr > 0 and --limit >= 0 are required");
  KILN_CHECK(!(a.ddp && a.ddp_local != 0), "train_fashion_mnist: --ddp and --ddp-local {} exclude each other", a.ddp_local);
  KILN_CHECK(a.ddp_local >= 0 && a.ddp_local <= 1024, "train_fashion_mnist: --ddp-local must be in [1, 1024], got {}",
             a.ddp_local);
  KILN_CHECK(!(a.compile && (a.ddp || a.ddp_local > 0)),
             "train_fashion_mnist: --compile captures a one-process step; it cannot be combined with --ddp/--ddp-local");
  return a;
}

// Test accuracy: the share of argmax(logits) == label, without recording history.
double accuracy(nn::Module& model, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  return eq(argmax(model(x), 1), y).to(kFloat64).mean().item<double>();
}

// The checkpoint: the model's state under "model.", the optimizer's under "optimizer.", the
// epoch reached in the metadata.
void save_checkpoint(const std::string& path, nn::MLP& model, optim::AdamW& opt, int64_t epoch) {
  StateDict all;
  for (const auto& [k, v] : model.state_dict()) all.insert("model." + k, v);
  for (const auto& [k, v] : opt.state_dict()) all.insert("optimizer." + k, v);
  all.metadata()["epoch"] = std::to_string(epoch);
  all.metadata()["format"] = "kiln train_fashion_mnist";
  save(all, path);
}

// Restores model and optimizer from `path`; returns the epoch it had reached.
int64_t load_checkpoint(const std::string& path, nn::MLP& model, optim::AdamW* opt, Device device) {
  const StateDict all = load(path, device);
  StateDict model_state, opt_state;
  for (const auto& [k, v] : all) {
    if (k.rfind("model.", 0) == 0) model_state.insert(k.substr(6), v);
    else if (k.rfind("optimizer.", 0) == 0) opt_state.insert(k.substr(10), v);
  }
  model.load_state_dict(model_state);
  if (opt != nullptr) opt->load_state_dict(opt_state);
  const auto it = all.metadata().find("epoch");
  KILN_CHECK(it != all.metadata().end(), "train_fashion_mnist: checkpoint {} has no \"epoch\" metadata", path);
  return std::stoll(it->second);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The data set, loaded once per process (shared read-only by --ddp-local's rank threads).
struct Data {
  data::LabeledImages train, test;
  std::string dir;
};

// Which rank of how many this training loop is (rank 0 of 1, no DDP, without --ddp).
struct Rank {
  int rank = 0;
  int world = 1;
  bool ddp = false;
};

// Each epoch's batches: one shuffling loader over the whole training set in one process; with
// DDP, a loader over this rank's shard of the epoch (DistributedSampler), already in order.
class Batches {
 public:
  Batches(const Data& d, const Args& args, Device device, Rank who)
      : data_(d), args_(args), device_(device), who_(who),
        sampler_(d.train.images.size(0), who.world, who.rank, {.shuffle = true, .seed = args.seed}) {
    if (!who.ddp)
      whole_.emplace(d.train.images, d.train.labels,
                     data::DataLoaderOptions{.batch_size = args.batch, .shuffle = true, .seed = args.seed, .device = device});
  }
  // Samples per epoch on this rank.
  int64_t num_samples() const { return whole_ ? whole_->num_samples() : sampler_.num_samples(); }
  // Steps per epoch (the same on every rank: the sampler pads the shards to equal sizes).
  int64_t num_batches() const { return (num_samples() + args_.batch - 1) / args_.batch; }
  // The loader of epoch `epoch` (from 0) and its batches.
  std::pair<std::shared_ptr<data::DataLoader>, data::DataLoader::Epoch> epoch(int64_t epoch) {
    if (whole_) return {nullptr, whole_->epoch(epoch)};
    sampler_.set_epoch(epoch);
    const std::vector<int64_t> mine = sampler_.indices();
    const Tensor index = from_vector(mine, {static_cast<int64_t>(mine.size())});
    auto shard = std::make_shared<data::DataLoader>(
        index_select(data_.train.images, 0, index), index_select(data_.train.labels, 0, index),
        data::DataLoaderOptions{.batch_size = args_.batch, .shuffle = false, .device = device_});
    auto batches = shard->epoch(0);
    return {std::move(shard), std::move(batches)};
  }

 private:
  const Data& data_;
  const Args& args_;
  Device device_;
  Rank who_;
  data::DistributedSampler sampler_;
  std::optional<data::DataLoader> whole_;
};

// The training run of one rank (the only one without DDP); returns the exit code.
int train(const Args& args, const Data& data, Device device, Rank who, const std::shared_ptr<nn::MLP>& model_ptr) {
  nn::MLP& model = *model_ptr;
  const bool main_rank = who.rank == 0;
  const Tensor x_test = data.test.images.to(device), y_test = data.test.labels.to(device);
  Batches loader(data, args, device, who);
  if (main_rank)
    std::printf("train_fashion_mnist: %lld training / %lld test images from %s, %lld steps of %lld per epoch, %s%s\n",
                static_cast<long long>(data.train.images.size(0)), static_cast<long long>(x_test.size(0)),
                data.dir.c_str(), static_cast<long long>(loader.num_batches()), static_cast<long long>(args.batch),
                device.str().c_str(),
                who.ddp ? fmt::format(", DDP over {} rank{} ({} per rank)", who.world, who.world == 1 ? "" : "s",
                                      loader.num_samples()).c_str()
                        : "");
  model.to(device);
  optim::AdamW opt(model.parameters(), {.lr = args.lr});
  // Stepped once per batch: T_max is every step of the run.
  std::optional<optim::CosineAnnealingLR> cosine;
  if (args.schedule == "cosine") cosine.emplace(opt, std::max<int64_t>(1, args.epochs * loader.num_batches()));
  int64_t first_epoch = 1;
  if (!args.resume.empty()) {  // every rank reads the checkpoint (DDP would broadcast rank 0's anyway)
    first_epoch = load_checkpoint(args.resume, model, &opt, device) + 1;
    // The schedule is a function of the step: move it to where the checkpoint left off.
    if (cosine)
      for (int64_t i = 0; i < (first_epoch - 1) * loader.num_batches(); ++i) cosine->step();
    if (main_rank)
      std::printf("resumed from %s after epoch %lld (test accuracy %.4f)\n", args.resume.c_str(),
                  static_cast<long long>(first_epoch - 1), accuracy(model, x_test, y_test));
  }
  // With DDP the wrapper runs the forward (and so the gradient all-reduces of its backward).
  std::unique_ptr<distributed::DistributedDataParallel> ddp;
  if (who.ddp) ddp = std::make_unique<distributed::DistributedDataParallel>(model_ptr, args.ddp_options);
  nn::Module& net = ddp ? static_cast<nn::Module&>(*ddp) : static_cast<nn::Module&>(model);


  // One training step on (x, y) with `forward` as the model.
  auto train_step = [&](auto&& forward, const Tensor& x, const Tensor& y) {
    opt.zero_grad();
    const Tensor loss = cross_entropy(forward(x), y);
    loss.backward();
    opt.step();
    if (cosine) cosine->step();
    return loss;
  };
  auto eager_forward = [&](const Tensor& x) { return net(x); };
  std::function<Tensor(const data::Batch&)> step = [&](const data::Batch& b) {
    return train_step(eager_forward, b.x, b.y);
  };
  // --compile: the forward captured and fused, the whole step one CUDA graph on a GPU.
  std::optional<graph::Executable> forward_fused, compiled_step;
  if (args.compile) {
    const data::Batch first = loader.epoch(0).second.batch(0);
    graph::Graph g = graph::capture(model, {first.x});
    const size_t fused = graph::fuse_linear_gelu(g);
    std::printf("--compile: %zu linear+GELU pair%s fused; the forward graph:\n%s\n", fused, fused == 1 ? "" : "s",
                g.str().c_str());
    forward_fused.emplace(graph::compile(g));
    auto fused_forward = [&](const Tensor& x) { return (*forward_fused)({x})[0]; };
    compiled_step.emplace(graph::compile(
        [&, fused_forward](const std::vector<Tensor>& in) { return std::vector<Tensor>{train_step(fused_forward, in[0], in[1])}; },
        {first.x, first.y}, {.cuda_graph = device.is_cuda()}));
    step = [&](const data::Batch& b) { return (*compiled_step)({b.x, b.y})[0]; };
  }
  if (args.profile) {  // one step, after one unprofiled warm-up step (first-call costs); every rank steps, rank 0 records
    auto [shard, epoch] = loader.epoch(0);
    (void)step(epoch.batch(0));
    std::optional<profiler::Profiler> prof;
    if (main_rank) prof.emplace(profiler::ProfilerOptions{.record_shapes = false});
    {
      std::optional<profiler::ProfileGuard> recording;
      if (prof) recording.emplace(*prof);
      profiler::RecordFunction scope("train_step");
      (void)step(epoch.batch(1 % epoch.size()));
      if (device.is_cuda()) cuda::synchronize(device);
    }
    if (prof && !args.trace.empty()) {
      prof->export_chrome_trace(args.trace);
      std::printf("trace of the profiled step written to %s\n", args.trace.c_str());
    }
    if (prof)
      std::cout << prof->key_averages().table({.sort_by = device.is_cuda() ? "cuda_time_total" : "cpu_time_total",
                                               .row_limit = 25})
                << "\n";
  }

  double train_s = 0, acc = 0;
  for (int64_t epoch = first_epoch; epoch <= args.epochs; ++epoch) {
    if (device.is_cuda()) cuda::synchronize(device);
    const auto start = std::chrono::steady_clock::now();
    const auto [shard, batches] = loader.epoch(epoch - 1);
    std::optional<data::ProgressBar> bar;
    if (main_rank) bar.emplace(fmt::format("epoch {}/{}", epoch, args.epochs), batches.size());
    Tensor loss_sum = zeros({}, TensorOptions().device(device));
    int64_t seen = 0;
    for (const data::Batch& b : batches) {
      if (args.compile && b.size != args.batch) continue;  // drop_last under --compile (see the top)
      const Tensor loss = step(b);
      {
        NoGradGuard no_grad;
        loss_sum = add(loss_sum, mul(loss.detach(), static_cast<double>(b.size)));
      }
      seen += b.size;
      if (bar && bar->due(b.index + 1)) bar->update(b.index + 1, seen, loss_sum.item<double>() / static_cast<double>(seen));
    }
    if (device.is_cuda()) cuda::synchronize(device);
    const double epoch_s = seconds_since(start);
    train_s += epoch_s;
    if (bar) bar->finish();
    double train_loss = loss_sum.item<double>() / static_cast<double>(seen);
    if (who.ddp) {  // the loss over every rank's samples
      Tensor totals = from_vector(std::vector<double>{loss_sum.item<double>(), static_cast<double>(seen)}, {2}).to(device);
      distributed::all_reduce(totals, distributed::ReduceOp::Sum);
      const std::vector<double> t = totals.to_vector<double>();
      train_loss = t[0] / t[1];
    }
    if (!main_rank) continue;
    acc = accuracy(model, x_test, y_test);
    std::printf("epoch %lld/%lld train_loss %.4f test_acc %.4f epoch_s %.3f\n", static_cast<long long>(epoch),
                static_cast<long long>(args.epochs), train_loss, acc, epoch_s);
  }
  if (!main_rank) return 0;

  // Save, read back into a fresh model, and check it scores the same.
  save_checkpoint(args.checkpoint, model, opt, args.epochs);
  nn::MLP reloaded({784, 256, 128, 10}, nn::Activation::GELU);
  reloaded.to(device);
  (void)load_checkpoint(args.checkpoint, reloaded, nullptr, device);
  const double reloaded_acc = accuracy(reloaded, x_test, y_test);
  std::printf("checkpoint %s written and reloaded: test accuracy %.4f (%s)\n", args.checkpoint.c_str(), reloaded_acc,
              reloaded_acc == accuracy(model, x_test, y_test) ? "same" : "DIFFERENT");
  if (args.epochs >= first_epoch) acc = accuracy(model, x_test, y_test);
  std::printf(
      "RESULT framework=kiln seed=%llu acc=%.4f train_s=%.2f epochs=%lld batch=%lld lr=%g schedule=%s device=%s%s\n",
      static_cast<unsigned long long>(args.seed), acc, train_s, static_cast<long long>(args.epochs),
      static_cast<long long>(args.batch), args.lr, args.schedule.c_str(), device.is_cuda() ? "cuda" : "cpu",
      who.ddp ? fmt::format(" world={}", who.world).c_str() : "");
  return reloaded_acc == accuracy(model, x_test, y_test) ? 0 : 1;
}

// The model every rank starts from (DDP broadcasts rank 0's anyway).
std::shared_ptr<nn::MLP> make_model(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::MLP>(std::vector<int64_t>{784, 256, 128, 10}, nn::Activation::GELU);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    const bool use_cuda = args.device == "cuda" || (args.device.empty() && cuda::is_available());
    Data data;
    data.dir =
        !args.data.empty() ? args.data : data::find_fashion_mnist().value_or(std::string(data::kFashionMnistSystemDir));
    data.train = data::load_fashion_mnist(data.dir, data::Split::Train);
    data.test = data::load_fashion_mnist(data.dir, data::Split::Test);
    if (args.limit > 0 && args.limit < data.train.images.size(0)) {
      data.train.images = data.train.images.narrow(0, 0, args.limit);
      data.train.labels = data.train.labels.narrow(0, 0, args.limit);
    }
    if (args.ddp) {
      // One rank of a launched job (or a group of one): NCCL on cuda:LOCAL_RANK, else Threads.
      const distributed::LaunchEnv env = distributed::read_launch_env();
      distributed::InitOptions init;
      init.backend = use_cuda ? distributed::Backend::NCCL : distributed::Backend::Threads;
      distributed::init_process_group(init);
      // The group ends before main returns, also when training throws (process_group.h).
      struct EndGroup {
        ~EndGroup() {
          try {
            distributed::destroy_process_group();
          } catch (const std::exception& e) {
            std::cerr << "train_fashion_mnist: " << e.what() << "\n";
          }
        }
      } end_group;
      const Device device = use_cuda ? Device::cuda(env.local_rank) : Device::cpu();
      const int code = train(args, data, device, {distributed::get_rank(), distributed::get_world_size(), true},
                             make_model(args.seed));
      distributed::barrier();  // rank 0 evaluates and saves while the others wait
      return code;
    }
    if (args.ddp_local > 0) {
      // N ranks as threads; the models are made here (the default generator is not shared
      // across threads), each rank's moved to its device in its thread.
      const int world = static_cast<int>(args.ddp_local);
      std::vector<std::shared_ptr<nn::MLP>> models;
      for (int r = 0; r < world; ++r) models.push_back(make_model(args.seed));
      std::vector<int> codes(static_cast<size_t>(world), 0);
      distributed::run_local(world, use_cuda ? DeviceType::CUDA : DeviceType::CPU, [&](int rank) {
        const Device device = use_cuda ? Device::cuda(rank) : Device::cpu();
        codes[static_cast<size_t>(rank)] = train(args, data, device, {rank, world, true}, models[static_cast<size_t>(rank)]);
        distributed::barrier();
      });
      return *std::max_element(codes.begin(), codes.end());
    }
    return train(args, data, use_cuda ? Device::cuda(0) : Device::cpu(), {}, make_model(args.seed));
  } catch (const std::exception& e) {
    std::cerr << "train_fashion_mnist: " << e.what() << "\n";
    return 1;
  }
}
