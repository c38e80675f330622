// The op table's shared parts: the list of every descriptor, lookup by name, replay, and
// checked readers of attribute values (a recorded call replayed with the wrong kind of value
// is an internal error that names the op, never a bad variant access).
#include "op_record.h"

#include <fmt/format.h>

#include <array>

#include "op_list.h"

namespace kiln {

namespace {
constexpr std::array<const OpDesc*, static_cast<size_t>(OpId::kCount)> kAllOps = {
#define KILN_OP_ADDRESS(name) &op::name,
    KILN_FOR_EACH_OP(KILN_OP_ADDRESS)
#undef KILN_OP_ADDRESS
};

const char* kind_name(const AttrValue& v) {
  constexpr const char* kNames[] = {"None", "int", "float", "bool", "Scalar", "int[]", "dtype", "device", "str", "float[]"};
  return kNames[v.index()];
}

template <typename T>
const T& get(std::span<const AttrValue> attrs, size_t i, const char* want) {
  KILN_INTERNAL_ASSERT(i < attrs.size(), "op record: attribute {} asked of a call with {}", i, attrs.size());
  const T* v = std::get_if<T>(&attrs[i]);
  KILN_INTERNAL_ASSERT(v != nullptr, "op record: attribute {} is {}, not {}", i, kind_name(attrs[i]), want);
  return *v;
}
}  // namespace

std::span<const OpDesc* const> all_ops() { return kAllOps; }

const OpDesc* find_op(std::string_view name) {
  for (const OpDesc* d : kAllOps)
    if (name == d->name) return d;
  return nullptr;
}

std::vector<Tensor> replay(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  KILN_CHECK(op.replay != nullptr, "replay: op {} cannot be replayed", op.name);
  KILN_CHECK(op.has(kOpVariadic) || inputs.size() == op.inputs.size(),
             "replay: op {} takes {} inputs ({}), got {}", op.name, op.inputs.size(), fmt::join(op.inputs, ", "),
             inputs.size());
  KILN_CHECK(attrs.size() == op.attrs.size(), "replay: op {} takes {} attributes, got {}", op.name, op.attrs.size(),
             attrs.size());
  return op.replay(op, inputs, attrs);
}

std::vector<Tensor> replay(const OpCall& call, std::span<const Tensor> new_inputs) {
  return replay(*call.op, new_inputs, call.attrs);
}

std::string attr_str(const AttrValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "None";
        else if constexpr (std::is_same_v<T, bool>) return v ? "True" : "False";
        else if constexpr (std::is_same_v<T, Shape>) return fmt::format("[{}]", fmt::join(v, ", "));
        else if constexpr (std::is_same_v<T, std::string_view>) return fmt::format("'{}'", v);
        else if constexpr (std::is_same_v<T, std::vector<double>>) return fmt::format("[{}]", fmt::join(v, ", "));
        else return fmt::format("{}", v);
      },
      value);
}

int64_t attr_int(std::span<const AttrValue> attrs, size_t i) { return get<int64_t>(attrs, i, "int"); }

double attr_double(std::span<const AttrValue> attrs, size_t i) {
  if (i < attrs.size())
    if (const int64_t* v = std::get_if<int64_t>(&attrs[i])) return static_cast<double>(*v);
  return get<double>(attrs, i, "float");
}

bool attr_bool(std::span<const AttrValue> attrs, size_t i) { return get<bool>(attrs, i, "bool"); }

Scalar attr_scalar(std::span<const AttrValue> attrs, size_t i) {
  KILN_INTERNAL_ASSERT(i < attrs.size(), "op record: attribute {} asked of a call with {}", i, attrs.size());
  const AttrValue& a = attrs[i];
  if (const int64_t* v = std::get_if<int64_t>(&a)) return Scalar(*v);
  if (const double* v = std::get_if<double>(&a)) return Scalar(*v);
  if (const bool* v = std::get_if<bool>(&a)) return Scalar(*v);
  return get<Scalar>(attrs, i, "Scalar");
}

std::optional<Scalar> attr_optional_scalar(std::span<const AttrValue> attrs, size_t i) {
  KILN_INTERNAL_ASSERT(i < attrs.size(), "op record: attribute {} asked of a call with {}", i, attrs.size());
  if (std::holds_alternative<std::monostate>(attrs[i])) return std::nullopt;
  return attr_scalar(attrs, i);
}

const Shape& attr_ints(std::span<const AttrValue> attrs, size_t i) { return get<Shape>(attrs, i, "int[]"); }
DType attr_dtype(std::span<const AttrValue> attrs, size_t i) { return get<DType>(attrs, i, "dtype"); }
Device attr_device(std::span<const AttrValue> attrs, size_t i) { return get<Device>(attrs, i, "device"); }
std::string_view attr_string(std::span<const AttrValue> attrs, size_t i) {
  return get<std::string_view>(attrs, i, "str");
}
const std::vector<double>& attr_doubles(std::span<const AttrValue> attrs, size_t i) {
  return get<std::vector<double>>(attrs, i, "float[]");
}

}  // namespace kiln
