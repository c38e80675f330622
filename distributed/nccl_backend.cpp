// The NCCL backend's group and work handles, and its two ways in (nccl_backend.h).
//
// Each collective: check the arguments (collective_checks.h), open its profiler row and NVTX
// range, mark the tensors used by the current stream for the caching allocator (the caller
// may run the collective on a side stream, as DDP does), enqueue it on that stream through
// the communicator (nccl_comm.h), and return a Work holding the event recorded after it.
#include "nccl_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <string_view>
#include <vector>

#include "../core/cuda_check.h"
#include "../core/error.h"
#include "../core/stream.h"
#include "../ops/factory.h"
#include "collective_checks.h"
#include "collective_scope.h"
#include "nccl_comm.h"
#include "rank_threads.h"

namespace kiln::distributed::detail {

namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return ncclUint8;  // one byte, 0 or 1
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
  }
  KILN_INTERNAL_ASSERT(false, "unknown dtype");
  return ncclFloat32;
}

// Bool as PyTorch's NCCL backend: sum and max are OR (ncclMax on 0/1), min is AND.
ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  if (dtype == DType::Bool) return op == ReduceOp::Min ? ncclMin : ncclMax;
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

cudaStream_t as_cuda(const Stream& s) { return reinterpret_cast<cudaStream_t>(s.id()); }

/// A collective queued on a stream: the event recorded after it.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclComm> comm, std::shared_ptr<PendingCollective> pending)
      : comm_(std::move(comm)), pending_(std::move(pending)) {}

  bool is_completed() override {
    const cudaError_t s = cudaEventQuery(static_cast<cudaEvent_t>(pending_->event));
    if (s == cudaErrorNotReady) (void)cudaGetLastError();
    return s == cudaSuccess;
  }
  void wait() override {
    comm_->check_healthy(pending_->name);
    const Stream stream = cuda::current_stream(comm_->device());
    CUDA_CHECK(cudaStreamWaitEvent(as_cuda(stream), static_cast<cudaEvent_t>(pending_->event), 0));
  }
  void synchronize() override {
    wait();
    comm_->synchronize(pending_->name, *pending_);
  }

 private:
  std::shared_ptr<NcclComm> comm_;
  std::shared_ptr<PendingCollective> pending_;
};

/// One rank of an NCCL group.
class NcclGroup final : public ProcessGroup {
 public:
  explicit NcclGroup(std::shared_ptr<NcclComm> comm)
      : comm_(std::move(comm)), check_calls_(cross_rank_checks_from_env()) {}

  int rank() const override { return comm_->rank(); }
  int size() const override { return comm_->size(); }
  Backend backend() const override { return Backend::NCCL; }
  std::chrono::milliseconds timeout() const override { return comm_->timeout(); }
  Device device() const override { return comm_->device(); }

  WorkHandle all_reduce(Tensor& tensor, ReduceOp op) override {
    CollectiveScope scope("nccl:all_reduce");
    check_all_reduce(*this, tensor, op);
    agree({"all_reduce", tensor.dtype(), tensor.numel(), tensor.numel(), op, -1});
    const Stream stream = use_stream({&tensor});
    void* data = tensor.data_ptr();
    const size_t count = static_cast<size_t>(tensor.numel());
    return run("all_reduce", stream, [&](ncclComm_t c) {
      return ncclAllReduce(data, data, count, nccl_type(tensor.dtype()), nccl_op(op, tensor.dtype()), c,
                           as_cuda(stream));
    });
  }

  WorkHandle broadcast(Tensor& tensor, int src) override {
    CollectiveScope scope("nccl:broadcast");
    check_broadcast(*this, tensor, src);
    agree({"broadcast", tensor.dtype(), tensor.numel(), tensor.numel(), ReduceOp::Sum, src});
    const Stream stream = use_stream({&tensor});
    void* data = tensor.data_ptr();
    const size_t count = static_cast<size_t>(tensor.numel());
    return run("broadcast", stream, [&](ncclComm_t c) {
      return ncclBroadcast(data, data, count, nccl_type(tensor.dtype()), src, c, as_cuda(stream));
    });
  }

  WorkHandle all_gather(Tensor& output, const Tensor& input) override {
    CollectiveScope scope("nccl:all_gather");
    check_all_gather(*this, output, input);
    agree({"all_gather", input.dtype(), input.numel(), output.numel(), ReduceOp::Sum, -1});
    const Stream stream = use_stream({&output, &input});
    return run("all_gather", stream, [&](ncclComm_t c) {
      return ncclAllGather(input.data_ptr(), output.data_ptr(), static_cast<size_t>(input.numel()),
                           nccl_type(input.dtype()), c, as_cuda(stream));
    });
  }

  WorkHandle reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op) override {
    CollectiveScope scope("nccl:reduce_scatter");
    check_reduce_scatter(*this, output, input, op);
    agree({"reduce_scatter", input.dtype(), input.numel(), output.numel(), op, -1});
    const Stream stream = use_stream({&output, &input});
    return run("reduce_scatter", stream, [&](ncclComm_t c) {
      return ncclReduceScatter(input.data_ptr(), output.data_ptr(), static_cast<size_t>(output.numel()),
                               nccl_type(input.dtype()), nccl_op(op, input.dtype()), c, as_cuda(stream));
    });
  }

  // As PyTorch's: an all_reduce of one element, then the host waits for it (bounded).
  void barrier() override {
    CollectiveScope scope("nccl:barrier");
    comm_->check_healthy("barrier");
    agree({"barrier", DType::Float32, 0, 0, ReduceOp::Sum, -1});
    if (!token_.defined()) token_ = zeros({1}, TensorOptions(kFloat32).device(device()));
    const Stream stream = use_stream({&token_});
    void* data = token_.data_ptr();
    WorkHandle work = run("barrier", stream, [&](ncclComm_t c) {
      return ncclAllReduce(data, data, 1, ncclFloat32, ncclSum, c, as_cuda(stream));
    });
    work->synchronize();
  }

 private:
  // The current stream of the group's device, recorded on every tensor (no-op for the stream
  // that allocated them).
  Stream use_stream(std::initializer_list<const Tensor*> tensors) const {
    const Stream stream = cuda::current_stream(device());
    for (const Tensor* t : tensors)
      if (t->numel() > 0) t->record_stream(stream);
    return stream;
  }

  // With KILN_DIST_DEBUG=1: every rank's call gathered over NCCL and compared, so that all
  // ranks throw the same message (with each rank's values) before a mismatched collective.
  void agree(const CallSummary& call) {
    if (!check_calls_ || size() == 1) return;
    static constexpr const char* kNames[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"};
    int64_t index = 0;
    while (index < 5 && std::string_view(kNames[index]) != call.collective) ++index;
    const std::vector<int64_t> mine = {index, static_cast<int64_t>(call.dtype), call.input_numel, call.output_numel,
                                       static_cast<int64_t>(call.op), call.src};
    constexpr int64_t kFields = 6;
    Tensor local = from_vector(mine, {kFields}).to(device());
    Tensor all = empty({size() * kFields}, TensorOptions(kInt64).device(device()));
    const Stream stream = use_stream({&local, &all});
    run("agree", stream, [&](ncclComm_t c) {
      return ncclAllGather(local.data_ptr(), all.data_ptr(), kFields, ncclInt64, c, as_cuda(stream));
    })->synchronize();
    const std::vector<int64_t> v = all.cpu().to_vector<int64_t>();
    std::vector<CallSummary> calls(static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r) {
      const int64_t* f = v.data() + r * kFields;
      calls[r] = {f[0] >= 0 && f[0] < 5 ? kNames[f[0]] : "?", static_cast<DType>(f[1]), f[2], f[3],
                  static_cast<ReduceOp>(f[4]), static_cast<int>(f[5])};
    }
    check_same_call(call.collective, calls);
  }

  WorkHandle run(const char* collective, const Stream& stream, const std::function<ncclResult_t(ncclComm_t)>& call) {
    return std::make_shared<NcclWork>(comm_, comm_->enqueue(collective, reinterpret_cast<void*>(stream.id()), call));
  }

  std::shared_ptr<NcclComm> comm_;
  bool check_calls_;  // KILN_DIST_DEBUG
  Tensor token_;      // barrier's element
};

// The unique id of a new communicator, made by this process (no network: rank 0's
// ncclCommInitRank will host the root).
ncclUniqueId new_unique_id(const char* caller) {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  KILN_CHECK(r == ncclSuccess, "{}: ncclGetUniqueId failed: {}", caller, nccl_error_text(r, nullptr));
  return id;
}

// Sets NCCL_COMM_ID for the scope unless the user did, and removes it again after.
class CommIdEnv {
 public:
  CommIdEnv(const std::string& addr, int port) {
    if (std::getenv("NCCL_COMM_ID") != nullptr) return;
    // An IPv6 literal goes in brackets: NCCL parses "<ipv4>:<port>", "[<ipv6>]:<port>", "<host>:<port>".
    const std::string value = addr.find(':') != std::string::npos && addr.front() != '['
                                  ? fmt::format("[{}]:{}", addr, port)
                                  : fmt::format("{}:{}", addr, port);
    set_ = ::setenv("NCCL_COMM_ID", value.c_str(), 1) == 0;
  }
  ~CommIdEnv() {
    if (set_) ::unsetenv("NCCL_COMM_ID");
  }
  CommIdEnv(const CommIdEnv&) = delete;
  CommIdEnv& operator=(const CommIdEnv&) = delete;

 private:
  bool set_ = false;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_nccl_group(const LaunchEnv& env, std::chrono::milliseconds timeout) {
  const int gpus = cuda::device_count();
  KILN_CHECK(gpus > 0, "init_process_group: the nccl backend needs a GPU, but none is visible");
  KILN_CHECK(env.local_rank < gpus,
             "init_process_group: local rank {} would use cuda:{}, but {} GPU(s) are visible ({} launch, rank {} of {})",
             env.local_rank, env.local_rank, gpus, env.source, env.rank, env.world_size);
  CUDA_CHECK(cudaSetDevice(env.local_rank));  // the process's GPU from now on, as torch.cuda.set_device
  std::shared_ptr<NcclComm> comm;
  if (env.world_size == 1) {
    // Alone: a private id (an ephemeral port), nothing to agree on with anyone.
    comm = std::make_shared<NcclComm>("init_process_group", 0, 1, Device::cuda(env.local_rank),
                                      new_unique_id("init_process_group"), timeout, nullptr);
  } else {
    // Kept set until the communicator exists: rank 0's ncclCommInitRank reads it to host the root.
    CommIdEnv comm_id(env.master_addr, env.master_port + 1);
    comm = std::make_shared<NcclComm>("init_process_group", env.rank, env.world_size, Device::cuda(env.local_rank),
                                      new_unique_id("init_process_group"), timeout, nullptr);
  }
  return std::make_unique<NcclGroup>(std::move(comm));
}

void run_nccl_threads(int world_size, std::chrono::milliseconds timeout, const std::function<void(int)>& fn) {
  const ncclUniqueId id = new_unique_id("run_local");
  auto abort = std::make_shared<AbortSignal>();
  RankHooks hooks;
  hooks.make_group = [&](int rank) -> std::unique_ptr<ProcessGroup> {
    CUDA_CHECK(cudaSetDevice(rank));  // the thread's GPU, for the user's function too
    return std::make_unique<NcclGroup>(
        std::make_shared<NcclComm>("run_local", rank, world_size, Device::cuda(rank), id, timeout, abort));
  };
  hooks.abort = [&](const std::string& reason) { abort->raise(reason); };
  run_rank_threads(world_size, hooks, fn);
}

}  // namespace kiln::distributed::detail
