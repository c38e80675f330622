// The argument checks every backend runs before a collective: one place, so the NCCL and
// Threads backends reject the same calls with the same messages ("all_reduce: ..."). Only
// what one rank can see locally is checked here; disagreement between ranks (sizes, dtypes,
// collective order) is the backend's to catch (Threads compares every rank's call; NCCL
// cannot without an extra round trip, and relies on the timeout).
#pragma once

#include <vector>

#include "../tensor/tensor.h"
#include "process_group.h"

namespace kiln::distributed::detail {

/// One rank's call of a collective, as the ranks compare them.
struct CallSummary {
  const char* collective = "";  ///< "all_reduce", ...
  DType dtype = DType::Float32;
  int64_t input_numel = 0;
  int64_t output_numel = 0;
  ReduceOp op = ReduceOp::Sum;
  int src = -1;  ///< broadcast's root
};

/// Throws "<collective>: the ranks' ... differ (per rank: [...])" unless every rank's call
/// (in rank order) is the same; every rank that sees the same list throws the same message.
void check_same_call(const char* collective, const std::vector<CallSummary>& calls);

/// KILN_DIST_DEBUG: "1" makes the NCCL backend compare every call across ranks before it
/// runs (one extra small all_gather and a host wait per collective), so mismatched sizes are
/// reported with each rank's values instead of ending in a timeout; unset or "0": off.
/// Throws kiln::Error naming the variable on any other value.
bool cross_rank_checks_from_env();

/// Throws unless `t` is defined, contiguous and on `group`'s device.
void check_tensor(const char* collective, const char* what, const Tensor& t, const ProcessGroup& group);

/// Throws unless `op` applies to `dtype` (Avg needs a floating dtype).
void check_reduce_op(const char* collective, ReduceOp op, DType dtype);

/// all_reduce's checks.
void check_all_reduce(const ProcessGroup& group, const Tensor& tensor, ReduceOp op);
/// broadcast's checks (src in range).
void check_broadcast(const ProcessGroup& group, const Tensor& tensor, int src);
/// all_gather's checks: same dtype, output.numel() == size() * input.numel().
void check_all_gather(const ProcessGroup& group, const Tensor& output, const Tensor& input);
/// reduce_scatter's checks: same dtype, input.numel() == size() * output.numel().
void check_reduce_scatter(const ProcessGroup& group, const Tensor& output, const Tensor& input, ReduceOp op);

}  // namespace kiln::distributed::detail
