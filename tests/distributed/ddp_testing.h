// Helpers for the DistributedDataParallel tests: a process group that records the
// collectives it forwards to the rank's real group (so a test sees which all-reduces ran, in
// which order, and interleaved with what), models built on the main thread (the default
// generator is not shared across rank threads), and a float64 closeness measure.
#pragma once

#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::testing {

/// Forwards every collective to `inner` and logs it ("all_reduce avg 68", "broadcast 16");
/// a test may add its own entries to the same log (note()).
class RecordingGroup final : public distributed::ProcessGroup {
 public:
  explicit RecordingGroup(distributed::ProcessGroup& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  distributed::Backend backend() const override { return inner_.backend(); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }
  Device device() const override { return inner_.device(); }
  distributed::WorkHandle all_reduce(Tensor& tensor, distributed::ReduceOp op) override {
    note(fmt::format("all_reduce {} {}", distributed::to_string(op), tensor.numel()));
    return inner_.all_reduce(tensor, op);
  }
  distributed::WorkHandle broadcast(Tensor& tensor, int src) override {
    note(fmt::format("broadcast {}", tensor.numel()));
    return inner_.broadcast(tensor, src);
  }
  distributed::WorkHandle all_gather(Tensor& output, const Tensor& input) override {
    note(fmt::format("all_gather {}", input.numel()));
    return inner_.all_gather(output, input);
  }
  distributed::WorkHandle reduce_scatter(Tensor& output, const Tensor& input, distributed::ReduceOp op) override {
    note(fmt::format("reduce_scatter {}", input.numel()));
    return inner_.reduce_scatter(output, input, op);
  }
  void barrier() override {
    note("barrier");
    inner_.barrier();
  }

  /// Appends an entry to the log.
  void note(std::string entry) { log_.push_back(std::move(entry)); }
  /// Everything logged so far.
  const std::vector<std::string>& log() const { return log_; }
  /// The entries that start with `prefix`.
  std::vector<std::string> entries(const std::string& prefix) const {
    std::vector<std::string> out;
    for (const std::string& e : log_)
      if (e.rfind(prefix, 0) == 0) out.push_back(e);
    return out;
  }

 private:
  distributed::ProcessGroup& inner_;
  std::vector<std::string> log_;
};

/// The largest |a - ref| - (atol + rtol |ref|) over the elements (<= 0: all within tolerance).
inline double excess(const Tensor& a, const Tensor& ref, double rtol, double atol) {
  REQUIRE(a.sizes() == ref.sizes());
  const std::vector<double> va = a.to_vector<double>(), vr = ref.to_vector<double>();
  double worst = -1;
  for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vr[i]) - (atol + rtol * std::abs(vr[i])));
  return worst;
}

/// True when both tensors hold the same values bit for bit (same dtype and shape).
inline bool identical(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.to_vector<double>() == b.to_vector<double>();
}

}  // namespace kiln::testing
