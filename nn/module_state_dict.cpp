// Module::state_dict() and load_state_dict(): a module's tensors under PyTorch's dotted keys,
// and loading them back all-or-nothing.
//
// load_state_dict() runs in three phases so that a load that fails changes nothing: check
// every key and shape (collecting every problem into one message, as PyTorch does), convert
// every source to its destination's device and dtype (the only step that allocates, so the
// only one likely to fail for want of memory), and only then copy into the module's memory.
// Copies go into the existing storage, so every handle to a parameter (Linear::weight, an
// optimizer's list) sees the loaded values.
#include <unordered_set>

#include "../tensor/shape.h"
#include "module.h"

namespace kiln::nn {

namespace {

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "\"" : ", \"") + k + "\"";
  return out;
}

// True when some elements of t share memory (an expanded view), which copy_ cannot write.
bool has_overlapping_elements(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && t.sizes()[d] > 1) return true;
  return false;
}

}  // namespace

void Module::collect_state(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [n, t] : parameters_) out.emplace_back(prefix + n, t);
  for (const auto& [n, t] : buffers_) out.emplace_back(prefix + n, t);
  for (const auto& [n, child] : children_) child->collect_state(prefix + n + ".", out);
}

StateDict Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> entries;
  collect_state("", entries);
  StateDict out;
  for (auto& [name, t] : entries) out.insert(std::move(name), t.detach());  // shares memory and version counter, no history
  return out;
}

IncompatibleKeys Module::load_state_dict(const StateDict& state_dict, bool strict) {
  std::vector<std::pair<std::string, Tensor>> targets;
  collect_state("", targets);

  // Phase 1: match keys and check shapes; nothing is touched yet.
  IncompatibleKeys keys;
  std::vector<std::string> problems;
  std::vector<std::pair<Tensor, Tensor>> plan;  // (destination, source)
  std::unordered_set<std::string> known;
  for (const auto& [name, dst] : targets) {
    known.insert(name);
    const Tensor* src = state_dict.find(name);
    if (src == nullptr) {
      keys.missing_keys.push_back(name);
      continue;
    }
    if (!src->defined()) {
      problems.push_back(fmt::format("\"{}\" is an undefined tensor in the state dict.", name));
      continue;
    }
    if (src->sizes() != dst.sizes()) {
      problems.push_back(fmt::format("size mismatch for {}: copying a param with shape {} from checkpoint, the shape "
                                     "in current model is {}.",
                                     name, shape_str(src->sizes()), shape_str(dst.sizes())));
      continue;
    }
    if (has_overlapping_elements(dst)) {
      problems.push_back(fmt::format("cannot load {}: its elements share memory (an expanded view of shape {}, "
                                     "strides {}).",
                                     name, shape_str(dst.sizes()), shape_str(dst.strides())));
      continue;
    }
    plan.emplace_back(dst, *src);
  }
  for (const auto& [name, _] : state_dict)
    if (known.count(name) == 0) keys.unexpected_keys.push_back(name);
  // PyTorch's order: missing keys, unexpected keys, then the size mismatches.
  if (strict && !keys.unexpected_keys.empty())
    problems.insert(problems.begin(),
                    fmt::format("Unexpected key(s) in state_dict: {}.", quoted_list(keys.unexpected_keys)));
  if (strict && !keys.missing_keys.empty())
    problems.insert(problems.begin(), fmt::format("Missing key(s) in state_dict: {}.", quoted_list(keys.missing_keys)));
  KILN_CHECK(problems.empty(), "load_state_dict: Error(s) in loading state_dict for {}:\n\t{}", name(),
             fmt::join(problems, "\n\t"));

  // Phase 2: sources on the destination's device, in its dtype. A source that shares memory
  // with any destination is cloned, so an earlier copy cannot overwrite it before it is read
  // (loading a module's own state dict back, or with its keys permuted).
  std::unordered_set<const StorageImpl*> destinations;
  for (const auto& [dst, _] : plan) destinations.insert(dst.unsafe_impl()->storage().get());
  std::vector<std::pair<Tensor, Tensor>> staged;
  staged.reserve(plan.size());
  for (const auto& [dst, src] : plan) {
    Tensor source = src.detach().to(dst.device(), dst.dtype());
    if (destinations.count(source.unsafe_impl()->storage().get()) != 0) source = source.clone();
    staged.emplace_back(dst.detach(), std::move(source));
  }

  // Phase 3: same shape, dtype and device on both sides: plain copies.
  for (auto& [dst, src] : staged) dst.copy_(src);
  return keys;
}

}  // namespace kiln::nn
