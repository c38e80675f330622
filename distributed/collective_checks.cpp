// The local argument checks shared by the backends (collective_checks.h says why here).
#include "collective_checks.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../core/error.h"

namespace kiln::distributed::detail {

namespace {

// a * b, or a kiln::Error when it does not fit an int64_t.
int64_t checked_mul(const char* collective, int64_t a, int64_t b) {
  int64_t r = 0;
  KILN_CHECK(!__builtin_mul_overflow(a, b, &r), "{}: {} ranks x {} elements overflows int64", collective, a, b);
  return r;
}

void check_same_dtype(const char* collective, const Tensor& output, const Tensor& input) {
  KILN_CHECK(output.dtype() == input.dtype(), "{}: output is {} but input is {}; they must match", collective,
             output.dtype(), input.dtype());
}

}  // namespace

bool cross_rank_checks_from_env() {
  const char* v = std::getenv("KILN_DIST_DEBUG");
  if (v == nullptr || std::string_view(v).empty() || std::string_view(v) == "0") return false;
  KILN_CHECK(std::string_view(v) == "1", "KILN_DIST_DEBUG: expected 0 or 1, got \"{}\"", v);
  return true;
}

void check_tensor(const char* collective, const char* what, const Tensor& t, const ProcessGroup& group) {
  KILN_CHECK(t.defined(), "{}: {} is an undefined tensor", collective, what);
  KILN_CHECK(t.is_contiguous(), "{}: {} must be contiguous (sizes {}, strides {}); pass t.contiguous() and copy back",
             collective, what, t.sizes(), t.strides());
  const Device want = group.device();
  if (want.is_cpu()) {
    KILN_CHECK(t.device().is_cpu(), "{}: {} is on {} but the {} backend takes CPU tensors", collective, what,
               t.device(), to_string(group.backend()));
  } else {
    KILN_CHECK(t.device() == want, "{}: {} is on {} but this rank's group runs on {}", collective, what, t.device(),
               want);
  }
}

void check_reduce_op(const char* collective, ReduceOp op, DType dtype) {
  KILN_CHECK(op != ReduceOp::Avg || is_floating(dtype),
             "{}: avg needs a floating dtype, got {}; use sum and divide", collective, dtype);
}

void check_all_reduce(const ProcessGroup& group, const Tensor& tensor, ReduceOp op) {
  check_tensor("all_reduce", "tensor", tensor, group);
  check_reduce_op("all_reduce", op, tensor.dtype());
}

void check_broadcast(const ProcessGroup& group, const Tensor& tensor, int src) {
  check_tensor("broadcast", "tensor", tensor, group);
  KILN_CHECK(src >= 0 && src < group.size(), "broadcast: src {} is outside [0, {})", src, group.size());
}

void check_all_gather(const ProcessGroup& group, const Tensor& output, const Tensor& input) {
  check_tensor("all_gather", "output", output, group);
  check_tensor("all_gather", "input", input, group);
  check_same_dtype("all_gather", output, input);
  const int64_t want = checked_mul("all_gather", group.size(), input.numel());
  KILN_CHECK(output.numel() == want, "all_gather: output has {} elements but {} ranks x {} input elements = {}",
             output.numel(), group.size(), input.numel(), want);
}

void check_reduce_scatter(const ProcessGroup& group, const Tensor& output, const Tensor& input, ReduceOp op) {
  check_tensor("reduce_scatter", "output", output, group);
  check_tensor("reduce_scatter", "input", input, group);
  check_same_dtype("reduce_scatter", output, input);
  check_reduce_op("reduce_scatter", op, input.dtype());
  const int64_t want = checked_mul("reduce_scatter", group.size(), output.numel());
  KILN_CHECK(input.numel() == want, "reduce_scatter: input has {} elements but {} ranks x {} output elements = {}",
             input.numel(), group.size(), output.numel(), want);
}

void check_same_call(const char* collective, const std::vector<CallSummary>& calls) {
  auto differ = [&](auto field) {
    return std::any_of(calls.begin(), calls.end(), [&](const CallSummary& c) { return field(c) != field(calls[0]); });
  };
  auto each = [&](auto field) {
    std::vector<std::string> v;
    for (const CallSummary& c : calls) v.push_back(fmt::format("{}", field(c)));
    return fmt::format("[{}]", fmt::join(v, ", "));
  };
  auto name = [](const CallSummary& c) { return std::string_view(c.collective); };
  KILN_CHECK(!differ(name), "{}: the ranks called different collectives (per rank: {})", collective, each(name));
  auto dtype = [](const CallSummary& c) { return c.dtype; };
  KILN_CHECK(!differ(dtype), "{}: the ranks' dtypes differ (per rank: {})", collective, each(dtype));
  auto in = [](const CallSummary& c) { return c.input_numel; };
  auto out = [](const CallSummary& c) { return c.output_numel; };
  KILN_CHECK(!differ(in) && !differ(out),
             "{}: the ranks' tensor sizes differ (input elements per rank: {}, output elements per rank: {})",
             collective, each(in), each(out));
  auto op = [](const CallSummary& c) { return std::string_view(to_string(c.op)); };
  KILN_CHECK(!differ(op), "{}: the ranks' reduce ops differ (per rank: {})", collective, each(op));
  auto src = [](const CallSummary& c) { return c.src; };
  KILN_CHECK(!differ(src), "{}: the ranks' src differ (per rank: {})", collective, each(src));
}

}  // namespace kiln::distributed::detail
