// Trains an MLP (784-256-128-10, GELU) on Fashion-MNIST with AdamW and cross-entropy, the
// learning rate annealed to 0 by a cosine over all steps (--schedule constant keeps it), on the
// CPU or a GPU: a progress bar per epoch, a line per epoch with the training loss and the test
// accuracy, a safetensors checkpoint (model and optimizer) written at the end and read back
// into a fresh model, which must score the same. --resume continues from such a checkpoint;
// --profile prints the profiler's table of one training step. --compile captures the model's
// forward, fuses each linear+GELU (graph::fuse_linear_gelu) and, on a GPU, runs each full-size
// training step (forward, loss, backward, AdamW, schedule) as one CUDA graph replay
// (graph::compile of the step); an epoch's last, smaller batch is skipped (a captured step has
// fixed shapes, and its gradients live in the graph's memory: an eager step in between would
// leave the parameters' .grad pointing elsewhere).
//
//   train_fashion_mnist [--device cpu|cuda] [--epochs 20] [--batch 256] [--lr 1e-3] [--seed 0]
//                       [--schedule cosine|constant] [--data DIR] [--checkpoint PATH] [--resume PATH]
//                       [--limit N] [--profile] [--compile]
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
#include <optional>
#include <string>

#include "examples/data/data_loader.h"
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
  bool compile = false;
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
    else if (flag == "--compile") a.compile = true;
    else KILN_FAIL("train_fashion_mnist: unknown option \"{}\" (see the comment at the top of the file)", flag);
  }
  KILN_CHECK(a.device.empty() || a.device == "cpu" || a.device == "cuda",
             "train_fashion_mnist: --device must be cpu or cuda, got \"{}\"", a.device);
  KILN_CHECK(a.schedule == "cosine" || a.schedule == "constant",
             "train_fashion_mnist: --schedule must be cosine or constant, got \"{}\"", a.schedule);
  KILN_CHECK(a.epochs >= 0 && a.batch > 0 && a.lr > 0 && a.limit >= 0,
             "train_fashion_mnist: --epochs >= 0, --batch > 0, --lr > 0 and --limit >= 0 are required");
  return a;
}

// Test accuracy: the share of argmax(logits) == label, without recording history.
double accuracy(nn::MLP& model, const Tensor& x, const Tensor& y) {
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

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    const Device device = args.device == "cpu" || (args.device.empty() && !cuda::is_available())
                              ? Device::cpu()
                              : Device::cuda(0);
    const std::string dir =
        !args.data.empty() ? args.data : data::find_fashion_mnist().value_or(std::string(data::kFashionMnistSystemDir));
    data::LabeledImages train = data::load_fashion_mnist(dir, data::Split::Train);
    const data::LabeledImages test = data::load_fashion_mnist(dir, data::Split::Test);
    if (args.limit > 0 && args.limit < train.images.size(0)) {
      train.images = train.images.narrow(0, 0, args.limit);
      train.labels = train.labels.narrow(0, 0, args.limit);
    }
    const Tensor x_test = test.images.to(device), y_test = test.labels.to(device);
    const data::DataLoader loader(train.images, train.labels,
                                  {.batch_size = args.batch, .shuffle = true, .seed = args.seed, .device = device});
    std::printf("train_fashion_mnist: %lld training / %lld test images from %s, %lld steps of %lld per epoch, %s\n",
                static_cast<long long>(loader.num_samples()), static_cast<long long>(x_test.size(0)), dir.c_str(),
                static_cast<long long>(loader.num_batches()), static_cast<long long>(args.batch), device.str().c_str());

    manual_seed(args.seed);
    nn::MLP model({784, 256, 128, 10}, nn::Activation::GELU);
    model.to(device);
    optim::AdamW opt(model.parameters(), {.lr = args.lr});
    // Stepped once per batch: T_max is every step of the run.
    std::optional<optim::CosineAnnealingLR> cosine;
    if (args.schedule == "cosine") cosine.emplace(opt, std::max<int64_t>(1, args.epochs * loader.num_batches()));
    int64_t first_epoch = 1;
    if (!args.resume.empty()) {
      first_epoch = load_checkpoint(args.resume, model, &opt, device) + 1;
      // The schedule is a function of the step: move it to where the checkpoint left off.
      if (cosine)
        for (int64_t i = 0; i < (first_epoch - 1) * loader.num_batches(); ++i) cosine->step();
      std::printf("resumed from %s after epoch %lld (test accuracy %.4f)\n", args.resume.c_str(),
                  static_cast<long long>(first_epoch - 1), accuracy(model, x_test, y_test));
    }

    // One training step on (x, y) with `forward` as the model.
    auto train_step = [&](auto&& forward, const Tensor& x, const Tensor& y) {
      opt.zero_grad();
      const Tensor loss = cross_entropy(forward(x), y);
      loss.backward();
      opt.step();
      if (cosine) cosine->step();
      return loss;
    };
    auto eager_forward = [&](const Tensor& x) { return model(x); };
    std::function<Tensor(const data::Batch&)> step = [&](const data::Batch& b) {
      return train_step(eager_forward, b.x, b.y);
    };
    // --compile: the forward captured and fused, the whole step one CUDA graph on a GPU.
    std::optional<graph::Executable> forward_fused, compiled_step;
    if (args.compile) {
      const data::Batch first = loader.epoch(0).batch(0);
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
    if (args.profile) {  // one step, after one unprofiled warm-up step (first-call costs)
      auto epoch = loader.epoch(0);
      (void)step(epoch.batch(0));
      profiler::Profiler prof({.record_shapes = false});
      {
        profiler::ProfileGuard recording(prof);
        profiler::RecordFunction scope("train_step");
        (void)step(epoch.batch(1 % epoch.size()));
        if (device.is_cuda()) cuda::synchronize(device);
      }
      std::cout << prof.key_averages().table({.sort_by = device.is_cuda() ? "cuda_time_total" : "cpu_time_total",
                                              .row_limit = 25})
                << "\n";
    }

    double train_s = 0, acc = 0;
    for (int64_t epoch = first_epoch; epoch <= args.epochs; ++epoch) {
      if (device.is_cuda()) cuda::synchronize(device);
      const auto start = std::chrono::steady_clock::now();
      const auto batches = loader.epoch(epoch - 1);
      data::ProgressBar bar(fmt::format("epoch {}/{}", epoch, args.epochs), batches.size());
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
        if (bar.due(b.index + 1)) bar.update(b.index + 1, seen, loss_sum.item<double>() / static_cast<double>(seen));
      }
      if (device.is_cuda()) cuda::synchronize(device);
      const double epoch_s = seconds_since(start);
      train_s += epoch_s;
      bar.finish();
      acc = accuracy(model, x_test, y_test);
      std::printf("epoch %lld/%lld train_loss %.4f test_acc %.4f epoch_s %.3f\n", static_cast<long long>(epoch),
                  static_cast<long long>(args.epochs), loss_sum.item<double>() / static_cast<double>(seen), acc, epoch_s);
    }

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
        "RESULT framework=kiln seed=%llu acc=%.4f train_s=%.2f epochs=%lld batch=%lld lr=%g schedule=%s device=%s\n",
        static_cast<unsigned long long>(args.seed), acc, train_s, static_cast<long long>(args.epochs),
        static_cast<long long>(args.batch), args.lr, args.schedule.c_str(), device.is_cuda() ? "cuda" : "cpu");
    return reloaded_acc == accuracy(model, x_test, y_test) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "train_fashion_mnist: " << e.what() << "\n";
    return 1;
  }
}
