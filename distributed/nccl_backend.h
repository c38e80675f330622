// The NCCL backend: one rank per GPU, collectives on the caller's current stream through a
// non-blocking communicator with a watchdog (nccl_comm.h), each returning a Work that is a
// CUDA event recorded after the collective. Bootstrap without a network protocol of Kiln's
// own: with a launcher, every rank sets NCCL_COMM_ID = master_addr:master_port+1 (unless the
// user set it) so that ncclGetUniqueId gives all of them the same id and rank 0's
// ncclCommInitRank hosts NCCL's bootstrap root there; in run_local() the id is made once and
// shared in memory by the threads. CUDA builds with NCCL only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "process_group.h"

namespace kiln::distributed::detail {

/// init_process_group()'s NCCL group for this process, from the launcher's environment:
/// makes cuda:local_rank the current device and joins the communicator (bounded by `timeout`).
std::unique_ptr<ProcessGroup> make_nccl_group(const LaunchEnv& env, std::chrono::milliseconds timeout);

/// run_local() over CUDA: fn(rank) on `world_size` threads, thread r on cuda:r with rank r of
/// one NCCL group as its default group; rethrows the first exception after all ended.
void run_nccl_threads(int world_size, std::chrono::milliseconds timeout, const std::function<void(int)>& fn);

}  // namespace kiln::distributed::detail
