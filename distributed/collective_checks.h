// The argument checks every backend runs before a collective: one place, so the NCCL and
// Threads backends reject the same calls with the same messages ("all_reduce: ..."). Only
// what one rank can see locally is checked here; disagreement between ranks (sizes, dtypes,
// collective order) is the backend's to catch (Threads compares every rank's call; NCCL
// cannot without an extra round trip, and relies on the timeout).
#pragma once

#include "../tensor/tensor.h"
#include "process_group.h"

namespace kiln::distributed::detail {

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
