// DistributedDataParallel (ddp.h): the replica check and broadcasts at construction, the
// forward that prepares the Reducer, and no_sync().
#include "ddp.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "../ops/grad_mode.h"
#include "../ops/ops.h"
#include "../profiler/record_function.h"

namespace kiln::distributed {

namespace {

size_t mib_to_bytes(double mb, const char* what) {
  KILN_CHECK(std::isfinite(mb) && mb > 0 && mb * 1048576.0 < 9.0e18,
             "DistributedDataParallel: {} must be a positive number of MiB, got {}", what, mb);
  return static_cast<size_t>(mb * 1048576.0);
}

// FNV-1a over the parameters' dtypes and shapes: equal on ranks that wrap the same model.
int64_t shape_signature(const std::vector<std::pair<std::string, Tensor>>& params) {
  uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const auto& [name, p] : params) {
    mix(static_cast<uint64_t>(p.dtype()));
    mix(static_cast<uint64_t>(p.dim()));
    for (int64_t s : p.sizes()) mix(static_cast<uint64_t>(s));
  }
  return static_cast<int64_t>(h);
}

}  // namespace

NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.sync_) { ddp_.sync_ = false; }

NoSyncGuard::~NoSyncGuard() { ddp_.sync_ = previous_; }

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options)
    : nn::Module("DistributedDataParallel"), module_(std::move(module)), options_(options) {
  KILN_CHECK(module_ != nullptr, "DistributedDataParallel: the module is null");
  group_ = options_.process_group != nullptr ? options_.process_group : &default_group();
  const ReducerOptions reducer_options{mib_to_bytes(options_.bucket_cap_mb, "bucket_cap_mb"),
                                       mib_to_bytes(options_.first_bucket_cap_mb, "first_bucket_cap_mb"),
                                       options_.find_unused_parameters};
  const auto params = module_->named_parameters();
  bool any_trained = false;
  for (const auto& [name, p] : params) any_trained = any_trained || p.requires_grad();
  KILN_CHECK(any_trained, "DistributedDataParallel: the module ({}) has no parameter that requires a gradient: "
             "DistributedDataParallel is not needed", module_->name());
  register_module("module", module_);
  // The Reducer checks devices against the backend before any collective runs.
  reducer_ = Reducer::create(params, *group_, reducer_options);
  check_replicas_match();
  broadcast_from_rank0(params);
  broadcast_from_rank0(module_->named_buffers());
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::check_replicas_match() const {
  const auto params = module_->named_parameters();
  const int world = group_->size();
  const Device dev = group_->device();
  const Tensor mine = from_vector(std::vector<int64_t>{static_cast<int64_t>(params.size()), shape_signature(params)},
                                  {2})
                          .to(dev);
  Tensor all = zeros({static_cast<int64_t>(world) * 2}, TensorOptions().dtype(kInt64).device(dev));
  all_gather(all, mine, /*async_op=*/false, group_);
  const std::vector<int64_t> v = all.to_vector<int64_t>();
  for (int r = 1; r < world; ++r)
    KILN_CHECK(v[2 * r] == v[0] && v[2 * r + 1] == v[1],
               "DistributedDataParallel: rank {} wraps a model with {} parameters (shape signature {:#x}) but rank 0 "
               "wraps one with {} (shape signature {:#x}); every rank must wrap the same model",
               r, v[2 * r], static_cast<uint64_t>(v[2 * r + 1]), v[0], static_cast<uint64_t>(v[1]));
}

void DistributedDataParallel::broadcast_from_rank0(const std::vector<std::pair<std::string, Tensor>>& tensors) const {
  NoGradGuard no_grad;
  for (const auto& [name, t] : tensors) {
    if (t.numel() == 0) continue;
    Tensor data = t.is_contiguous() ? t.detach() : t.contiguous();
    broadcast(data, 0, /*async_op=*/false, group_);
    if (!data.is_alias_of(t)) t.detach().copy_(data);
  }
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  profiler::RecordFunction scope("DistributedDataParallel.forward");  // PyTorch's row name
  if (options_.broadcast_buffers && group_->size() > 1) {
    const auto buffers = module_->named_buffers();
    if (!buffers.empty()) broadcast_from_rank0(buffers);
  }
  Tensor out = module_->forward(x);
  if (sync_ && is_grad_enabled() && out.defined() && out.requires_grad()) reducer_->prepare_for_backward(out);
  else if (!sync_) reducer_->disarm();  // no_sync: this forward's backward accumulates locally
  return out;
}

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& bucket : reducer_->bucket_assignment()) {
    out.emplace_back();
    for (size_t i : bucket) out.back().push_back(reducer_->parameter_names()[i]);
  }
  return out;
}

std::string DistributedDataParallel::extra_repr() const {
  return fmt::format("world_size={}, rank={}, backend={}, bucket_cap_mb={}, find_unused_parameters={}",
                     group_->size(), group_->rank(), to_string(group_->backend()), options_.bucket_cap_mb,
                     options_.find_unused_parameters ? "True" : "False");
}

}  // namespace kiln::distributed
