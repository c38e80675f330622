// The Reducer of reducer.h: bucket assignment, the hooks, the launches in bucket order and
// the end-of-backward wait and copy back.
#include "reducer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "../autograd/engine.h"
#include "../autograd/node.h"
#include "../ops/grad_mode.h"
#include "../ops/ops.h"

namespace kiln::distributed {

namespace {

// a + b for sizes, throwing on overflow (`what` names the quantity).
size_t checked_add(size_t a, size_t b, const char* what) {
  KILN_CHECK(a <= std::numeric_limits<size_t>::max() - b, "DistributedDataParallel: {} overflows ({} + {})", what, a, b);
  return a + b;
}

size_t bytes_of(const Tensor& t) {
  const auto n = static_cast<size_t>(t.numel());
  const size_t e = element_size(t.dtype());
  KILN_CHECK(n <= std::numeric_limits<size_t>::max() / e, "DistributedDataParallel: parameter of {} elements of {} "
             "bytes overflows size_t", n, e);
  return n * e;
}

}  // namespace

BucketAssignment compute_bucket_assignment(const std::vector<Tensor>& params, size_t bucket_cap_bytes,
                                           size_t first_bucket_cap_bytes) {
  struct Open {
    DType dtype;
    Device device;
    std::vector<size_t> params;
    size_t bytes = 0;
    bool closed_one = false;  // the first bucket of this (dtype, device) is done: the larger cap applies
  };
  std::vector<Open> open;
  BucketAssignment buckets;
  for (size_t i = params.size(); i-- > 0;) {
    const Tensor& p = params[i];
    auto it = std::find_if(open.begin(), open.end(),
                           [&](const Open& o) { return o.dtype == p.dtype() && o.device == p.device(); });
    if (it == open.end()) it = open.insert(open.end(), Open{p.dtype(), p.device(), {}, 0, false});
    it->params.push_back(i);
    it->bytes = checked_add(it->bytes, bytes_of(p), "the bucket size");
    if (it->bytes >= (it->closed_one ? bucket_cap_bytes : first_bucket_cap_bytes)) {
      buckets.push_back(std::move(it->params));
      it->params.clear();
      it->bytes = 0;
      it->closed_one = true;
    }
  }
  for (Open& o : open)
    if (!o.params.empty()) buckets.push_back(std::move(o.params));
  // Launch order: by each bucket's first parameter in reverse registration order.
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const std::vector<size_t>& a, const std::vector<size_t>& b) { return a.front() > b.front(); });
  return buckets;
}

std::shared_ptr<Reducer> Reducer::create(std::vector<std::pair<std::string, Tensor>> named_params, ProcessGroup& group,
                                         ReducerOptions options) {
  std::shared_ptr<Reducer> reducer(new Reducer(std::move(named_params), group, options));
  reducer->register_hooks();
  return reducer;
}

Reducer::Reducer(std::vector<std::pair<std::string, Tensor>> named_params, ProcessGroup& group, ReducerOptions options)
    : group_(group), options_(options) {
  KILN_CHECK(options.bucket_cap_bytes > 0 && options.first_bucket_cap_bytes > 0,
             "DistributedDataParallel: bucket caps must be positive, got bucket_cap {} bytes and first_bucket_cap {} "
             "bytes", options.bucket_cap_bytes, options.first_bucket_cap_bytes);
  std::unordered_set<const TensorImpl*> seen;
  for (auto& [name, p] : named_params) {
    KILN_CHECK(p.defined(), "DistributedDataParallel: parameter {} is undefined", name);
    if (!p.requires_grad()) continue;  // frozen parameters are neither bucketed nor reduced
    KILN_CHECK(p.device() == group.device(),
               "DistributedDataParallel: parameter {} is on {} but this rank of the process group ({} backend) works "
               "on {}; move the module with to() before wrapping it", name, p.device(), to_string(group.backend()),
               group.device());
    if (!seen.insert(p.unsafe_impl()).second) continue;  // a shared parameter is reduced once
    names_.push_back(name);
    params_.push_back(p);
  }
  assignment_ = compute_bucket_assignment(params_, options.bucket_cap_bytes, options.first_bucket_cap_bytes);
  where_.resize(params_.size());
  for (size_t b = 0; b < assignment_.size(); ++b) {
    Bucket bucket;
    bucket.params = assignment_[b];
    int64_t total = 0;
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      const Tensor& p = params_[bucket.params[k]];
      where_[bucket.params[k]] = {b, k};
      bucket.offsets.push_back(total);
      KILN_CHECK(total <= std::numeric_limits<int64_t>::max() - p.numel(),
                 "DistributedDataParallel: bucket {} of {} + {} elements overflows int64", b, total, p.numel());
      total += p.numel();
    }
    const Tensor& first = params_[bucket.params.front()];
    bucket.flat = zeros({total}, TensorOptions().dtype(first.dtype()).device(first.device()));
    bucket.pending = bucket.params.size();
    if (bucket.flat.is_cuda()) {
      // The bucket is read by the communication stream: its memory must not be reused
      // before that stream is done with it, even after the Reducer is gone.
      const Device dev = bucket.flat.device();
      auto it = std::find_if(comm_streams_.begin(), comm_streams_.end(),
                             [&](const Stream& s) { return s.device() == dev; });
      if (it == comm_streams_.end()) it = comm_streams_.insert(comm_streams_.end(), Stream::create(dev));
      bucket.flat.record_stream(*it);
      bucket.filled = std::make_unique<Event>(dev);
    }
    buckets_.push_back(std::move(bucket));
  }
  ready_.assign(params_.size(), false);
}

void Reducer::register_hooks() {
  std::weak_ptr<Reducer> self = weak_from_this();
  for (size_t i = 0; i < params_.size(); ++i)
    hook_keys_.push_back(params_[i].register_post_accumulate_grad_hook([self, i](const Tensor&) {
      if (auto reducer = self.lock()) reducer->on_grad_ready(i);
    }));
}

Reducer::~Reducer() {
  for (size_t i = 0; i < hook_keys_.size(); ++i) params_[i].remove_post_accumulate_grad_hook(hook_keys_[i]);
}

Tensor Reducer::slot(const Bucket& bucket, size_t k) const {
  const Tensor& p = params_[bucket.params[k]];
  return bucket.flat.narrow(0, bucket.offsets[k], p.numel()).view(p.sizes());
}

void Reducer::prepare_for_backward(const Tensor& output) {
  reset();  // drops an iteration a forward without backward (or a failed backward) left behind
  armed_ = true;
  if (!options_.find_unused_parameters) return;
  // The leaves the output's graph reaches: their AccumulateGrad nodes.
  std::unordered_set<const TensorImpl*> reached;
  std::unordered_set<const autograd::Node*> visited;
  std::vector<std::shared_ptr<autograd::Node>> stack;
  if (const autograd::Edge root = autograd::gradient_edge(output); root.valid()) stack.push_back(root.node);
  while (!stack.empty()) {
    std::shared_ptr<autograd::Node> node = std::move(stack.back());
    stack.pop_back();
    if (!visited.insert(node.get()).second) continue;
    if (const auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(node.get())) {
      if (const Tensor leaf = acc->variable(); leaf.defined()) reached.insert(leaf.unsafe_impl());
      continue;
    }
    for (const autograd::Edge& e : node->next_edges())
      if (e.valid()) stack.push_back(e.node);
  }
  for (size_t i = 0; i < params_.size(); ++i)
    if (!reached.contains(params_[i].unsafe_impl())) unused_.push_back(i);
}

void Reducer::disarm() { reset(); }

void Reducer::on_grad_ready(size_t index) {
  if (!armed_) return;  // no_sync, or a backward DDP's forward did not prepare: accumulate locally
  if (!first_hook_seen_) {
    first_hook_seen_ = true;
    std::weak_ptr<Reducer> self = weak_from_this();
    autograd::queue_callback([self] {
      if (auto reducer = self.lock()) reducer->finalize();
    });
    for (size_t u : unused_) mark_ready(u);
  }
  mark_ready(index);
}

void Reducer::mark_ready(size_t index) {
  KILN_CHECK(!ready_[index],
             "DistributedDataParallel: parameter {} received a gradient after it was marked ready in this iteration "
             "(find_unused_parameters found it unused by the forward's output: is it used outside the wrapped "
             "module's forward?)", names_[index]);
  ready_[index] = true;
  const auto [b, k] = where_[index];
  Bucket& bucket = buckets_[b];
  {
    NoGradGuard no_grad;
    Tensor s = slot(bucket, k);
    const Tensor& grad = params_[index].grad();
    if (grad.defined()) s.copy_(grad);
    else s.zero_();
  }
  --bucket.pending;
  // Launch in bucket order, so that every rank issues the same collectives in the same order.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) launch(buckets_[next_bucket_++]);
}

void Reducer::launch(Bucket& bucket) {
  if (!bucket.flat.is_cuda()) {
    bucket.work = all_reduce(bucket.flat, ReduceOp::Avg, /*async_op=*/true, &group_);
    return;
  }
  const Device dev = bucket.flat.device();
  const Stream compute = cuda::current_stream(dev);
  const Stream& comm = *std::find_if(comm_streams_.begin(), comm_streams_.end(),
                                     [&](const Stream& s) { return s.device() == dev; });
  bucket.filled->record(compute);  // after the copies into the bucket
  bucket.filled->block(comm);
  cuda::StreamGuard on_comm(comm);
  bucket.work = all_reduce(bucket.flat, ReduceOp::Avg, /*async_op=*/true, &group_);
}

void Reducer::finalize() {
  if (!armed_) return;  // disarmed (a new forward) before the pass ended
  struct ResetAtExit {  // whatever happens, the next iteration starts clean
    Reducer* r;
    ~ResetAtExit() { r->reset_state(); }
  } reset_at_exit{this};
  if (next_bucket_ < buckets_.size()) {
    std::vector<std::string> missing;
    for (size_t i = 0; i < params_.size(); ++i)
      if (!ready_[i]) missing.push_back(names_[i]);
    for (size_t b = 0; b < next_bucket_; ++b) buckets_[b].work->wait();
    KILN_FAIL("DistributedDataParallel: rank {} finished a backward pass in which {} of {} parameters received no "
              "gradient: {}. Every parameter must take part in computing the loss; pass find_unused_parameters = true "
              "to reduce zeros for the parameters a forward does not use",
              group_.rank(), missing.size(), params_.size(), fmt::join(missing, ", "));
  }
  for (Bucket& bucket : buckets_) bucket.work->wait();  // CUDA: the compute stream waits, not the host
  NoGradGuard no_grad;
  for (Bucket& bucket : buckets_)
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      Tensor& grad = params_[bucket.params[k]].mutable_grad();
      if (grad.defined()) grad.copy_(slot(bucket, k));
      else grad = slot(bucket, k).clone();  // an unused parameter (find_unused_parameters)
    }
}

void Reducer::reset() {
  // A collective still in flight from an abandoned iteration finishes before its bucket is
  // written again (and rethrows its failure).
  for (size_t b = 0; b < next_bucket_; ++b)
    if (buckets_[b].work) buckets_[b].work->wait();
  reset_state();
}

void Reducer::reset_state() noexcept {
  armed_ = false;
  first_hook_seen_ = false;
  ready_.assign(params_.size(), false);
  unused_.clear();
  next_bucket_ = 0;
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.params.size();
    bucket.work.reset();
  }
}

}  // namespace kiln::distributed
