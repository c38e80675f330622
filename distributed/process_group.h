// kiln::distributed: PyTorch's torch.distributed for C++ — a process group, collectives on
// tensors, and async work handles. Two backends sit behind one interface:
//   - NCCL, for CUDA tensors: one rank per GPU, launched by torchrun --no-python, mpirun or
//     srun (init_process_group() reads their environment), or one thread per local GPU in a
//     single process (run_local()). Collectives run on the caller's current stream.
//   - Threads, for CPU tensors: ranks are threads of one process (run_local()), collectives meet
//     in shared memory. It exists so the whole data-parallel stack (DDP, bucketing, no_sync,
//     sampler) runs and is tested where there is no GPU, and for world size 1 on any machine.
// The layer sits above nn/ (DESIGN.md's dependency order): nn::DistributedDataParallel lives in
// distributed/ddp.h, not in nn/.
//
// Faults: every wait is bounded by the group's timeout (KILN_DIST_TIMEOUT seconds, default 300);
// a rank that dies or never joins makes the others throw a kiln::Error naming the rank and the
// collective, never hang (NCCL: non-blocking communicators, ncclCommGetAsyncError polling,
// ncclCommAbort).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln::distributed {

/// How all_reduce / reduce_scatter combine the ranks' values (torch.distributed.ReduceOp).
enum class ReduceOp : uint8_t { Sum, Avg, Max, Min };

/// "sum", "avg", "max", "min".
const char* to_string(ReduceOp op);

/// Which engine runs the collectives.
enum class Backend : uint8_t {
  NCCL,     ///< CUDA tensors, one GPU per rank
  Threads,  ///< CPU tensors, ranks are threads of one process
};

/// "nccl", "threads".
const char* to_string(Backend backend);

/// A collective in flight (torch.distributed's Work). For NCCL the collective is queued on a
/// stream: wait() makes the caller's current stream wait for it (the host does not block) and
/// rethrows a failure; synchronize() also blocks the host. For Threads the work is done on return
/// and wait() returns at once.
class Work {
 public:
  virtual ~Work() = default;
  /// True once the collective has finished on the device (never throws).
  virtual bool is_completed() = 0;
  /// Orders the caller's current stream after the collective; throws kiln::Error (naming the
  /// collective and the rank) if it failed or timed out.
  virtual void wait() = 0;
  /// wait(), then blocks the host until the collective has finished (bounded by the timeout).
  virtual void synchronize() = 0;
};

/// Shared handle to a Work.
using WorkHandle = std::shared_ptr<Work>;

/// A set of ranks that run collectives together (torch.distributed's ProcessGroup). Every
/// collective must be called by every rank of the group in the same order with matching sizes
/// and dtypes. Tensors must be contiguous (non-contiguous input: kiln::Error naming the op; the
/// caller decides whether to copy), on the group's device type, and the same dtype where two
/// are passed. In-place: `tensor` is overwritten with the result.
///
/// Every dtype is accepted. Integers wrap on overflow. Bool (NCCL: uint8) reduces as PyTorch's
/// NCCL backend does: Sum and Max are logical OR, Min logical AND; Avg needs a floating dtype.
/// Sums run in the ranks' order, so every rank gets the same bits (Threads: 0, 1, 2, ... with
/// 16-bit floats accumulated in float; NCCL: its own fixed order for a fixed world size).
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  /// This process's (or thread's) rank in [0, size()).
  virtual int rank() const = 0;
  /// Number of ranks.
  virtual int size() const = 0;
  /// The engine behind this group.
  virtual Backend backend() const = 0;
  /// The bound on every wait of this group.
  virtual std::chrono::milliseconds timeout() const = 0;
  /// Where this rank's tensors live: cpu for Threads, cuda:k for NCCL.
  virtual Device device() const = 0;

  /// Combines `tensor` across ranks in place.
  virtual WorkHandle all_reduce(Tensor& tensor, ReduceOp op) = 0;
  /// Copies rank `src`'s `tensor` into every rank's `tensor`.
  virtual WorkHandle broadcast(Tensor& tensor, int src) = 0;
  /// Concatenates every rank's `input` into `output` (size() * input.numel() elements, rank
  /// order along the first dimension: all_gather_into_tensor).
  virtual WorkHandle all_gather(Tensor& output, const Tensor& input) = 0;
  /// Reduces `input` (size() * output.numel() elements) across ranks and leaves block rank() of
  /// the result in `output` (reduce_scatter_tensor).
  virtual WorkHandle reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op) = 0;
  /// Returns once every rank has reached the barrier (the host waits).
  virtual void barrier() = 0;
};

/// Options of init_process_group(). Unset fields come from the environment.
struct InitOptions {
  std::optional<Backend> backend;  ///< default: NCCL when a GPU is visible and NCCL is built, else Threads (size 1 only)
  std::optional<std::chrono::milliseconds> timeout;  ///< default: KILN_DIST_TIMEOUT seconds, else 300 s
};

/// What a launcher told this process: read from torchrun's RANK / WORLD_SIZE / LOCAL_RANK /
/// MASTER_ADDR / MASTER_PORT, Open MPI's OMPI_COMM_WORLD_*, or SLURM's SLURM_PROCID / SLURM_NTASKS /
/// SLURM_LOCALID (first match in that order); absent: a single process (rank 0 of 1).
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "none";  ///< "torchrun", "mpirun", "srun" or "none"
};

/// Parses the launcher environment; throws kiln::Error naming the variable on a malformed value.
LaunchEnv read_launch_env();

/// KILN_DIST_TIMEOUT (seconds, a positive number; fractions allowed) or 300 s when unset;
/// throws kiln::Error naming the variable on a malformed value.
std::chrono::milliseconds timeout_from_env();

/// True when this build contains the NCCL backend (a CUDA build that found NCCL).
bool is_nccl_available();

/// Builds the default group from the launcher environment: picks cuda:local_rank as the
/// current device and creates the NCCL communicator (bootstrap through NCCL_COMM_ID =
/// master_addr:master_port+1 unless the user set it). Throws if already initialised.
void init_process_group(const InitOptions& options = {});

/// True between init_process_group() and destroy_process_group() (or inside run_local()).
bool is_initialized();

/// Tears the default group down (waits for queued collectives, bounded by the timeout). Call
/// it before main() returns: a group left to static destruction may outlive the CUDA runtime.
void destroy_process_group();

/// The default group: run_local()'s group in its threads, else the one init_process_group()
/// built. Throws if there is none.
ProcessGroup& default_group();

/// default_group().rank().
int get_rank();

/// default_group().size().
int get_world_size();

/// Single-process mode: runs fn(rank) on `world_size` threads, each with its own rank of a new
/// group as the thread's default group — NCCL over cuda:0..world_size-1 for DeviceType::CUDA,
/// Threads for DeviceType::CPU. Rethrows the first exception of any rank after all threads ended.
void run_local(int world_size, DeviceType device_type, const std::function<void(int rank)>& fn,
               std::optional<std::chrono::milliseconds> timeout = std::nullopt);

/// Collectives on the default group (or `group`), named as torch.distributed's. With
/// async_op = false they wait() before returning; the profiler shows each as an op row named
/// "nccl:all_reduce" (or "threads:all_reduce") with its kernels.
WorkHandle all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum, bool async_op = false,
                      ProcessGroup* group = nullptr);
/// broadcast from rank `src`.
WorkHandle broadcast(Tensor& tensor, int src, bool async_op = false, ProcessGroup* group = nullptr);
/// all_gather_into_tensor.
WorkHandle all_gather(Tensor& output, const Tensor& input, bool async_op = false, ProcessGroup* group = nullptr);
/// reduce_scatter_tensor.
WorkHandle reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                          bool async_op = false, ProcessGroup* group = nullptr);
/// barrier on the default group (or `group`).
void barrier(ProcessGroup* group = nullptr);

}  // namespace kiln::distributed
