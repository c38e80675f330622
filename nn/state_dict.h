// StateDict: the ordered name -> tensor map that module.state_dict(), optimizer
// state_dict()s and checkpoint files exchange (PyTorch's OrderedDict of tensors), with the
// string metadata a safetensors header carries beside the tensors.
//
// Insertion order is kept (files and printouts list entries as they were added); lookups by
// name go through an index, so a large model's load is not quadratic.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln {

/// Ordered name -> tensor map with string metadata; see the file comment.
class StateDict {
 public:
  using Entry = std::pair<std::string, Tensor>;

  /// Adds `name`; throws when it is already present (names are unique).
  void insert(std::string name, Tensor value) {
    KILN_CHECK(!contains(name), "StateDict: duplicate key '{}'", name);
    index_.emplace(name, entries_.size());
    entries_.emplace_back(std::move(name), std::move(value));
  }
  /// Adds or replaces `name`.
  void insert_or_assign(std::string name, Tensor value) {
    if (auto it = index_.find(name); it != index_.end()) {
      entries_[it->second].second = std::move(value);
      return;
    }
    insert(std::move(name), std::move(value));
  }
  /// True when `name` is present.
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  /// The tensor stored under `name`, or null.
  const Tensor* find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }
  /// The tensor stored under `name`; throws naming the key when absent.
  const Tensor& at(const std::string& name) const {
    const Tensor* t = find(name);
    KILN_CHECK(t != nullptr, "StateDict: no key '{}'", name);
    return *t;
  }
  /// Number of tensors.
  size_t size() const { return entries_.size(); }
  /// True when there are no tensors.
  bool empty() const { return entries_.empty(); }
  /// The keys, in insertion order.
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& e : entries_) out.push_back(e.first);
    return out;
  }
  /// Entries in insertion order.
  auto begin() const { return entries_.begin(); }
  /// End of the entries.
  auto end() const { return entries_.end(); }

  /// Free-form string metadata (a safetensors header's "__metadata__").
  std::map<std::string, std::string>& metadata() { return metadata_; }
  /// Free-form string metadata (read-only).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace kiln
