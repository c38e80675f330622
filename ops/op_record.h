// The op record: what Kiln knows about each op, written once (OpDesc), and what one call of
// it says about itself (OpCall). The profiler reads an op's cost from here, autograd its
// backward formula and which inputs to save, graph capture its attributes and fusion role,
// and replay() re-runs any recorded call.
//
// Each op has one constant-initialised OpDesc, `op::<name>` (the list is ops/op_list.h),
// defined with its replay adapter, cost and backward formula in ops/records/<family>.cpp.
// An op passes its descriptor, its tensor inputs (one per input slot, null where an optional
// one is absent) and its attribute values to its OpScope (op_scope.h).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln {

struct OpDesc;
struct OpCall;

/// The arithmetic an op's FLOPs run in, which picks the device's peak rate.
enum class MathKind : uint8_t { None, Float64, Float32, TF32, Half /* float16 and bfloat16 */ };

/// FLOPs and ideal bytes moved by one op call (conventions in ops/op_cost.h).
struct OpCost {
  double flops = 0;
  double bytes = 0;
  MathKind math = MathKind::None;  ///< the arithmetic the FLOPs run in (None when there are none)
};

/// One attribute value: absent (an optional left out), a number, a flag, a scalar, a list of
/// ints (dims, sizes), a dtype, a device, or a static string (gelu's approximate).
using AttrValue =
    std::variant<std::monostate, int64_t, double, bool, Scalar, Shape, DType, Device, std::string_view, std::vector<double>>;

/// What kind of value an attribute slot holds (for printing and checking recorded calls).
enum class AttrKind : uint8_t { Int, Double, Bool, Scalar, OptionalScalar, IntList, DType, Device, String, OptionalInt, DoubleList };

/// An attribute slot: its name as in PyTorch's schema and its kind.
struct AttrSpec {
  const char* name;
  AttrKind kind;
};

/// Op properties autograd, capture and the profiler act on.
enum OpFlag : uint32_t {
  kOpInPlace = 1u << 0,           ///< writes its first input and returns it (bumps its version)
  kOpView = 1u << 1,              ///< its output aliases its first input's storage
  kOpComposite = 1u << 2,         ///< no backward of its own: the ops it calls record theirs
  kOpNonDifferentiable = 1u << 3, ///< its outputs never require grad (comparisons, argmax, factories)
  kOpRandom = 1u << 4,            ///< draws from the generator (replay draws new numbers)
  kOpHostRead = 1u << 5,          ///< reads device values back to the host (item, equal, ...)
  kOpVariadic = 1u << 6,          ///< one input slot that takes a list (cat, stack)
  kOpFactory = 1u << 7,           ///< makes a tensor from attributes alone (no tensor inputs)
};

/// An op's role in fusion patterns (graph/ matches on it).
enum class FusionRole : uint8_t {
  None,
  Gemm,         ///< matmul, mm, addmm, linear: a GEMM whose epilogue can absorb a bias or activation
  Activation,   ///< gelu, relu, silu, ...: fusable into a producer's epilogue
  Elementwise,  ///< other pointwise ops
  Reduction,
  View,         ///< layout only
};

/// What a backward formula gets: the saved inputs and outputs (undefined where the op's
/// record does not save them), the attributes, one gradient per output (undefined where no
/// gradient flowed) and which inputs need a gradient.
struct BackwardArgs {
  const OpDesc& op;
  std::span<const Tensor> inputs;
  std::span<const AttrValue> attrs;
  std::span<const Tensor> outputs;
  std::span<const Tensor> grad_outputs;
  std::span<const bool> needs_grad;
  /// Input i's shape (kept for every input, saved or not).
  std::span<const Shape> input_sizes;
};

/// Gradients per input slot (undefined: none). The engine sums broadcast gradients down to
/// each input's shape and casts them to its dtype, so formulas may return the broadcast shape.
using BackwardFn = std::vector<Tensor> (*)(const BackwardArgs& args);
/// Re-runs the op on `inputs` (one per slot, undefined where absent) with recorded attributes.
using ReplayFn = std::vector<Tensor> (*)(const OpDesc& op, std::span<const Tensor> inputs,
                                         std::span<const AttrValue> attrs);
/// The FLOPs and bytes of one call.
using CostFn = OpCost (*)(const OpCall& call);

/// Save masks for OpDesc::saved: input i is bit i, output j bit 16 + j.
constexpr uint32_t save_input(int i) { return 1u << i; }
/// The bit that saves output j.
constexpr uint32_t save_output(int j) { return 1u << (16 + j); }

/// Everything Kiln knows about one op; see the file comment.
struct OpDesc {
  const char* name;                       ///< "add", "linear", ...: PyTorch's name
  std::span<const char* const> inputs;    ///< tensor input slots, in signature order
  std::span<const AttrSpec> attrs;        ///< non-tensor arguments, in signature order
  uint32_t flags = 0;                     ///< OpFlag bits
  ReplayFn replay = nullptr;              ///< re-runs a recorded call
  CostFn cost = nullptr;                  ///< null: inputs read and outputs written once, no FLOPs
  BackwardFn backward = nullptr;          ///< null for ops that are composite or not differentiable
  uint32_t saved = 0;                     ///< which inputs and outputs backward reads (save_input/output)
  FusionRole fusion = FusionRole::None;
  int code = 0;                           ///< the family's enum value (UnaryOp, BinaryOp, ...)

  /// True when `flag` is set.
  constexpr bool has(OpFlag flag) const { return (flags & flag) != 0; }
};

/// What an observer sees of one op call.
struct OpCall {
  const OpDesc* op;
  const char* name;                       ///< op->name
  std::span<const Tensor* const> inputs;  ///< one per input slot (null where absent), or the list of a variadic op
  std::span<const AttrValue> attrs;       ///< one per attribute slot
  std::span<const Tensor> outputs;        ///< empty in on_op_begin
  int depth;                              ///< 0 for an op the user called, >0 when nested
};

/// Re-runs a recorded call on new inputs (same slots) with its recorded attributes.
std::vector<Tensor> replay(const OpCall& call, std::span<const Tensor> new_inputs);
/// Re-runs op `op` with `inputs` and `attrs`.
std::vector<Tensor> replay(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs);

/// Every op's descriptor, in op_list.h order.
std::span<const OpDesc* const> all_ops();
/// The descriptor named `name`, or null.
const OpDesc* find_op(std::string_view name);

/// Readable form of an attribute value ("None", "3", "[0, 1]", "float32", "'tanh'").
std::string attr_str(const AttrValue& value);

// ---- reading attributes in replay adapters and formulas (checked: a wrong kind throws) ----
/// The int attribute at `i`.
int64_t attr_int(std::span<const AttrValue> attrs, size_t i);
/// The float attribute at `i` (ints widen).
double attr_double(std::span<const AttrValue> attrs, size_t i);
/// The bool attribute at `i`.
bool attr_bool(std::span<const AttrValue> attrs, size_t i);
/// The scalar attribute at `i` (ints, floats and bools become Scalars).
Scalar attr_scalar(std::span<const AttrValue> attrs, size_t i);
/// The optional scalar at `i` (nullopt for None).
std::optional<Scalar> attr_optional_scalar(std::span<const AttrValue> attrs, size_t i);
/// The int list at `i`.
const Shape& attr_ints(std::span<const AttrValue> attrs, size_t i);
/// The dtype at `i`.
DType attr_dtype(std::span<const AttrValue> attrs, size_t i);
/// The device at `i`.
Device attr_device(std::span<const AttrValue> attrs, size_t i);
/// The string at `i`.
std::string_view attr_string(std::span<const AttrValue> attrs, size_t i);
/// The float list at `i`.
const std::vector<double>& attr_doubles(std::span<const AttrValue> attrs, size_t i);

namespace detail {
/// An attribute value from an op's argument (the conversions OpScope applies).
inline AttrValue to_attr(int64_t v) { return v; }
inline AttrValue to_attr(int v) { return static_cast<int64_t>(v); }
inline AttrValue to_attr(double v) { return v; }
inline AttrValue to_attr(bool v) { return v; }
inline AttrValue to_attr(const Scalar& v) { return v; }
inline AttrValue to_attr(const Shape& v) { return v; }
inline AttrValue to_attr(DType v) { return v; }
inline AttrValue to_attr(Device v) { return v; }
inline AttrValue to_attr(std::string_view v) { return v; }
inline AttrValue to_attr(const char* v) { return std::string_view(v); }
inline AttrValue to_attr(const std::optional<Scalar>& v) { return v ? AttrValue(*v) : AttrValue(); }
inline AttrValue to_attr(const std::optional<int64_t>& v) { return v ? AttrValue(*v) : AttrValue(); }
inline AttrValue to_attr(std::monostate) { return {}; }
inline AttrValue to_attr(std::span<const double> v) { return std::vector<double>(v.begin(), v.end()); }
inline AttrValue to_attr(const std::vector<double>& v) { return v; }
}  // namespace detail

}  // namespace kiln
