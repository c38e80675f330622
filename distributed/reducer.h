// Reducer: DistributedDataParallel's gradient machinery (PyTorch's C++ Reducer). It groups
// the parameters into buckets, registers a post-accumulate-grad hook on each, and during a
// synced backward pass:
//   1. a hook copies its parameter's fresh .grad() into the parameter's slot of a flat,
//      contiguous bucket buffer (one dtype and device per bucket);
//   2. when every slot of a bucket is filled, and every bucket before it has been launched
//      (so all ranks issue the collectives in the same order), the bucket's all_reduce(Avg)
//      is launched asynchronously — while backward still computes the earlier layers;
//   3. at the end of the pass (a callback the first hook queued with autograd::queue_callback)
//      it waits for every bucket and copies the averaged values back into each .grad().
// .grad() keeps its own memory (PyTorch's gradient_as_bucket_view = false): the copy back is
// one memcpy per parameter, and the optimizer and AccumulateGrad never see bucket memory.
//
// Buckets follow PyTorch's compute_bucket_assignment_by_size: parameters in reverse
// registration order (gradients of the last layers are ready first), split by (dtype,
// device), a bucket closed once it holds at least its cap — first_bucket_cap_bytes for the
// first bucket of each (dtype, device), bucket_cap_bytes after — so the first all-reduce
// starts early.
//
// CUDA (NCCL): each bucket is reduced on a communication stream of its device. The launch
// records an event on the compute stream after the bucket was filled and makes the
// communication stream wait for it; the final wait makes the compute stream wait for the
// collective, so the host never blocks and the trace shows the all-reduces overlapping
// backward kernels.
//
// Unused parameters: a parameter whose gradient never arrives in a synced pass leaves its
// bucket (and every later one) unlaunched; the end-of-backward callback then throws a
// kiln::Error naming the parameters (Kiln raises at the end of that backward pass, where
// PyTorch raises at the next forward). With find_unused_parameters, prepare_for_backward()
// walks the autograd graph from the forward's output, and parameters it does not reach are
// marked ready (their slot holds the local .grad(), or zeros) when the first hook runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../core/stream.h"
#include "../tensor/tensor.h"
#include "process_group.h"

namespace kiln::distributed {

/// How a Reducer buckets and what it tolerates.
struct ReducerOptions {
  size_t bucket_cap_bytes = size_t{25} << 20;       ///< later buckets close at this size
  size_t first_bucket_cap_bytes = size_t{1} << 20;  ///< the first bucket per dtype/device closes at this size
  bool find_unused_parameters = false;              ///< mark unreached parameters ready with zeros
};

/// Which parameters go into which bucket: indices into the parameter list, buckets in launch
/// order, parameters within a bucket in slot order.
using BucketAssignment = std::vector<std::vector<size_t>>;

/// PyTorch's compute_bucket_assignment_by_size over `params` (see the file comment).
BucketAssignment compute_bucket_assignment(const std::vector<Tensor>& params, size_t bucket_cap_bytes,
                                           size_t first_bucket_cap_bytes);

/// See the file comment. Made with create(); the hooks hold it weakly, so a parameter that
/// outlives its Reducer runs no stale hook (the destructor also removes them).
class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  /// A Reducer over the named parameters (those that require grad) reducing over `group`.
  static std::shared_ptr<Reducer> create(std::vector<std::pair<std::string, Tensor>> named_params,
                                         ProcessGroup& group, ReducerOptions options);
  /// Removes the hooks from the parameters.
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  /// Arms the hooks for the backward pass of `output` (a synced iteration); with
  /// find_unused_parameters, finds the parameters `output` does not depend on. An iteration
  /// left unfinished (a forward without backward, a backward that threw) is dropped first.
  void prepare_for_backward(const Tensor& output);
  /// Disarms the hooks: the next backward only accumulates locally (no_sync, or a forward
  /// whose output needs no gradient).
  void disarm();
  /// True between prepare_for_backward() and the end of the next backward pass.
  bool armed() const { return armed_; }

  /// The buckets: parameter indices in launch order.
  const BucketAssignment& bucket_assignment() const { return assignment_; }
  /// The parameters' dotted names, in the order given to create().
  const std::vector<std::string>& parameter_names() const { return names_; }

 private:
  struct Bucket {
    std::vector<size_t> params;    // parameter indices, in slot order
    std::vector<int64_t> offsets;  // element offset of each slot in `flat`
    Tensor flat;                   // the bucket's contiguous buffer
    size_t pending = 0;            // slots not yet filled in this iteration
    WorkHandle work;               // the all-reduce in flight, once launched
    std::unique_ptr<Event> filled;  // CUDA: marks the end of the copies into `flat`
  };

  Reducer(std::vector<std::pair<std::string, Tensor>> named_params, ProcessGroup& group, ReducerOptions options);
  void register_hooks();
  void on_grad_ready(size_t index);
  void mark_ready(size_t index);
  void launch(Bucket& bucket);
  void finalize();
  void reset();                 // waits for launched collectives, then reset_state()
  void reset_state() noexcept;  // forgets the iteration
  Tensor slot(const Bucket& bucket, size_t k) const;

  std::vector<std::string> names_;
  std::vector<Tensor> params_;
  std::vector<uint64_t> hook_keys_;
  ProcessGroup& group_;
  ReducerOptions options_;
  BucketAssignment assignment_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;  // parameter -> (bucket, slot)
  std::vector<Stream> comm_streams_;             // one per CUDA device used, by device index

  // Per-iteration state.
  bool armed_ = false;
  bool first_hook_seen_ = false;
  std::vector<bool> ready_;
  std::vector<size_t> unused_;  // with find_unused_parameters: parameters the output does not reach
  size_t next_bucket_ = 0;      // buckets before it are launched
};

}  // namespace kiln::distributed
