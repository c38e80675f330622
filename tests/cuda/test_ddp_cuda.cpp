// DistributedDataParallel on GPUs: a CUDA model under a CPU (Threads) group is refused; on one
// GPU (an NCCL group of one, run_local(1, CUDA)) the gradients equal the model's own and the
// bucket all-reduces run on a communication stream, not the compute stream; on two GPUs
// (skipped with a message on fewer) the gradients equal one process's on the concatenated
// batch, |g - ref| <= 1e-5 + 1e-4 |ref| against a float64 CPU reference (TF32 stays off).
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <memory>
#include <string>
#include <vector>

#include "distributed/ddp_testing.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;
using distributed::DistributedDataParallel;

namespace {

constexpr double kRtol = 1e-4, kAtol = 1e-5;

// Records the current CUDA stream of each all_reduce call.
class StreamRecordingGroup final : public distributed::ProcessGroup {
 public:
  explicit StreamRecordingGroup(distributed::ProcessGroup& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  distributed::Backend backend() const override { return inner_.backend(); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }
  Device device() const override { return inner_.device(); }
  distributed::WorkHandle all_reduce(Tensor& tensor, distributed::ReduceOp op) override {
    streams.push_back(cuda::current_stream(tensor.device()).id());
    return inner_.all_reduce(tensor, op);
  }
  distributed::WorkHandle broadcast(Tensor& tensor, int src) override { return inner_.broadcast(tensor, src); }
  distributed::WorkHandle all_gather(Tensor& output, const Tensor& input) override {
    return inner_.all_gather(output, input);
  }
  distributed::WorkHandle reduce_scatter(Tensor& output, const Tensor& input, distributed::ReduceOp op) override {
    return inner_.reduce_scatter(output, input, op);
  }
  void barrier() override { inner_.barrier(); }
  std::vector<StreamId> streams;

 private:
  distributed::ProcessGroup& inner_;
};

std::vector<Tensor> grads_of(const nn::Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.grad().to(Device::cpu()));
  return out;
}

bool have_nccl() {
  if (distributed::is_nccl_available()) return true;
  MESSAGE("skipped: this build has no NCCL backend");
  return false;
}

}  // namespace

TEST_CASE("DDP refuses a CUDA model under a CPU process group") {
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{4, 3});
  model->to(Device::cuda(0));
  CHECK_THROWS_WITH_AS(
      distributed::run_local(1, DeviceType::CPU, [&](int) { DistributedDataParallel ddp(model); }),
      doctest::Contains("DistributedDataParallel: parameter 0.weight is on cuda:0 but this rank of the process group "
                        "(threads backend) works on cpu"),
      Error);
}

TEST_CASE("DDP on one GPU: gradients unchanged, all-reduces on a communication stream") {
  if (!have_nccl()) return;
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{16, 32, 32, 8}, nn::Activation::Tanh);
  auto twin = std::make_shared<nn::MLP>(std::vector<int64_t>{16, 32, 32, 8}, nn::Activation::Tanh);
  twin->load_state_dict(model->state_dict());
  model->to(Device::cuda(0));
  twin->to(Device::cuda(0));
  const Tensor x = random({6, 16}).to(Device::cuda(0)), y = random({6, 8}).to(Device::cuda(0));
  std::vector<Tensor> grads;
  std::vector<StreamId> comm_streams;
  StreamId compute = 0;
  distributed::run_local(1, DeviceType::CUDA, [&](int) {
    StreamRecordingGroup rec(distributed::default_group());
    DistributedDataParallel ddp(model, {.bucket_cap_mb = 4096.0 / 1048576, .first_bucket_cap_mb = 512.0 / 1048576,
                                        .process_group = &rec});
    compute = cuda::current_stream(Device::cuda(0)).id();
    mse_loss(ddp(x), y).backward();
    grads = grads_of(ddp);
    comm_streams = rec.streams;
  });
  mse_loss((*twin)(x), y).backward();
  const auto expected = grads_of(*twin);
  REQUIRE(grads.size() == expected.size());
  for (size_t i = 0; i < grads.size(); ++i) CHECK(excess(grads[i], expected[i], kRtol, kAtol) <= 0);
  REQUIRE(comm_streams.size() >= 2);  // several buckets
  for (StreamId s : comm_streams) {
    CHECK(s != compute);
    CHECK(s == comm_streams.front());
  }
}

TEST_CASE("DDP on two GPUs: gradients equal one process's on the concatenated batch") {
  if (!have_nccl()) return;
  if (cuda::device_count() < 2) {
    MESSAGE("skipped: needs 2 GPUs, found " << cuda::device_count());
    return;
  }
  const int world = 2;
  const int64_t per = 8;
  std::vector<std::shared_ptr<nn::MLP>> models;
  for (int r = 0; r < world; ++r) models.push_back(std::make_shared<nn::MLP>(std::vector<int64_t>{16, 64, 64, 8}));
  auto ref = std::make_shared<nn::MLP>(std::vector<int64_t>{16, 64, 64, 8});
  ref->load_state_dict(models[0]->state_dict());
  ref->to(kFloat64);
  const Tensor X = random({world * per, 16}), Y = random({world * per, 8});
  std::vector<std::vector<Tensor>> grads(world);
  distributed::run_local(world, DeviceType::CUDA, [&](int rank) {
    const Device dev = Device::cuda(rank);
    models[rank]->to(dev);
    DistributedDataParallel ddp(models[rank], {.first_bucket_cap_mb = 8192.0 / 1048576});
    mse_loss(ddp(X.narrow(0, rank * per, per).to(dev)), Y.narrow(0, rank * per, per).to(dev)).backward();
    grads[rank] = grads_of(ddp);
  });
  mse_loss((*ref)(X.to(kFloat64)), Y.to(kFloat64)).backward();
  const auto expected = grads_of(*ref);
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < expected.size(); ++i) {
      CHECK(excess(grads[r][i], expected[i], kRtol, kAtol) <= 0);
      CHECK(identical(grads[r][i], grads[0][i]));
    }
}
