// Records the allocations of a real Kiln training loop with record_memory_history and writes
// them as an allocation trace (the format of bench/traces/, see scripts/make_alloc_traces.py),
// so the trace replays (bench/alloc_trace_replay, bench/alloc_trace_replay.py) compare the
// allocators on what Kiln itself asks for.
//
// The loop: a 784-512-256-10 MLP with ReLU and softmax cross-entropy, trained by SGD with a
// hand-written backward pass (Kiln has no autograd yet): matmul / t() / mul / gt / sum, the
// weights updated in place with copy_. The task is learnable (the class is the largest of the
// first ten inputs), so the printed loss falls. Batch sizes cycle through uneven values, as
// ragged batches and variable lengths do in real training, which is what fragments a cache.
//
//   record_training_trace [--device cpu|cuda] [--steps N] [--out PATH]
//
// The trace depends only on the sizes Kiln asks for, not on the device's data, so recording
// on the CPU gives the trace the GPU would (cuBLAS's workspace aside: on a GPU the trace also
// holds its one 32 MiB workspace per stream).
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

using namespace kiln;

namespace {

constexpr int64_t kBatches[] = {64, 256, 100, 512, 37, 128, 200, 77, 384, 64, 500, 33};

struct Layer {
  Tensor w, b;
};

Layer make_layer(int64_t in, int64_t out, Device dev) {
  // He initialisation for the ReLU layers.
  Layer l{mul(randn({in, out}, dev), std::sqrt(2.0 / static_cast<double>(in))), zeros({out}, dev)};
  return l;
}

/// One SGD step on a batch of `batch` rows; returns the loss.
double train_step(std::vector<Layer>& layers, int64_t batch, double lr, Device dev) {
  const Tensor x = randn({batch, 784}, dev);
  const Tensor y = argmax(x.narrow(1, 0, 10), 1);  // int64 class labels
  // Forward.
  const Tensor z1 = matmul(x, layers[0].w) + layers[0].b;
  const Tensor a1 = relu(z1);
  const Tensor z2 = matmul(a1, layers[1].w) + layers[1].b;
  const Tensor a2 = relu(z2);
  const Tensor logits = matmul(a2, layers[2].w) + layers[2].b;
  const double loss = cross_entropy(logits, y).item<double>();
  // Backward: d(mean cross-entropy)/d logits = (softmax - one_hot) / batch.
  const Tensor one_hot = eq(y.view({batch, 1}), arange(0, 10, 1, TensorOptions(dev).dtype(kInt64)).view({1, 10}));
  const Tensor dlogits = div(softmax(logits, 1) - one_hot.to(kFloat32), static_cast<double>(batch));
  const Tensor dw3 = matmul(a2.t(), dlogits);
  const Tensor db3 = sum(dlogits, {0});
  const Tensor dz2 = mul(matmul(dlogits, layers[2].w.t()), gt(z2, 0.0).to(kFloat32));
  const Tensor dw2 = matmul(a1.t(), dz2);
  const Tensor db2 = sum(dz2, {0});
  const Tensor dz1 = mul(matmul(dz2, layers[1].w.t()), gt(z1, 0.0).to(kFloat32));
  const Tensor dw1 = matmul(x.t(), dz1);
  const Tensor db1 = sum(dz1, {0});
  // SGD, in place.
  const Tensor* grads[3][2] = {{&dw1, &db1}, {&dw2, &db2}, {&dw3, &db3}};
  for (size_t i = 0; i < layers.size(); ++i) {
    layers[i].w.copy_(layers[i].w - mul(*grads[i][0], lr));
    layers[i].b.copy_(layers[i].b - mul(*grads[i][1], lr));
  }
  return loss;
}

/// The history as trace lines: an id per allocation, a free per user free (a block freed
/// after record_stream shows free_requested first; its free_completed is then not a user
/// free), and frees for whatever is still live at the end.
std::vector<std::string> to_trace(const std::vector<TraceEntry>& history, size_t& allocs) {
  std::vector<std::string> lines;
  std::unordered_map<uint64_t, int64_t> live;  // address -> id
  int64_t next_id = 0;
  allocs = 0;
  for (const TraceEntry& e : history) {
    if (e.action == TraceAction::Alloc) {
      live[e.address] = next_id;
      lines.push_back(fmt::format("a {} {}", next_id++, e.size));
      ++allocs;
    } else if (e.action == TraceAction::FreeRequested || e.action == TraceAction::FreeCompleted) {
      const auto it = live.find(e.address);
      if (it == live.end()) continue;  // the completion of a requested free, or a block from before recording
      lines.push_back(fmt::format("f {}", it->second));
      live.erase(it);
    }
  }
  std::vector<int64_t> left;
  for (const auto& [address, id] : live) left.push_back(id);
  std::sort(left.begin(), left.end());
  for (int64_t id : left) lines.push_back(fmt::format("f {}", id));
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  Device dev = Device::cpu();
  int steps = 300;
  std::string out = "bench/traces/kiln_training.trace";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      dev = std::strcmp(argv[++i], "cuda") == 0 ? Device::cuda(0) : Device::cpu();
    } else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else {
      fmt::print(stderr, "usage: record_training_trace [--device cpu|cuda] [--steps N] [--out PATH]\n");
      return 2;
    }
  }
  try {
    manual_seed(0);
    empty_cache(dev);
    record_memory_history(dev, true, 10'000'000);
    double first = 0, last = 0;
    {
      std::vector<Layer> layers = {make_layer(784, 512, dev), make_layer(512, 256, dev), make_layer(256, 10, dev)};
      for (int step = 0; step < steps; ++step) {
        const int64_t batch = kBatches[static_cast<size_t>(step) % std::size(kBatches)];
        const double loss = train_step(layers, batch, 0.05, dev);
        if (step == 0) first = loss;
        last = loss;
        if (step % 50 == 0 || step + 1 == steps)
          fmt::print("step {:4d}  batch {:4d}  loss {:.4f}\n", step, batch, loss);
      }
    }
    const MemorySnapshot snap = memory_snapshot(dev);
    record_memory_history(dev, false);
    size_t allocs = 0;
    const std::vector<std::string> lines = to_trace(snap.history, allocs);
    std::ofstream f(out);
    KILN_CHECK(f.good(), "record_training_trace: cannot open \"{}\" for writing", out);
    f << "# kiln_training: written by bench/record_training_trace on " << dev.str() << " (" << steps
      << " SGD steps of a 784-512-256-10 MLP, batch sizes cycling 64/256/100/512/37/128/200/77/384/64/500/33)\n";
    for (const std::string& l : lines) f << l << '\n';
    f.close();
    KILN_CHECK(f.good(), "record_training_trace: writing \"{}\" failed", out);
    fmt::print("loss {:.4f} -> {:.4f}; {} events ({} allocations) written to {}; peak allocated {} bytes\n", first,
               last, lines.size(), allocs, out, snap.stats.allocated_bytes[StatPool::All].peak);
  } catch (const std::exception& e) {
    fmt::print(stderr, "record_training_trace: {}\n", e.what());
    return 1;
  }
  return 0;
}
