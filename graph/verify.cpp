// verify(): one walk over the nodes in program order with the set of values defined so far.
// The attribute check accepts what the op record's readers accept (attr_double widens an
// int, attr_scalar takes ints, floats and bools), so every call an op records passes.
#include "verify.h"

#include <fmt/format.h>

#include <unordered_set>

namespace kiln::graph {

namespace {

const char* kind_name(AttrKind kind) {
  switch (kind) {
    case AttrKind::Int: return "int";
    case AttrKind::Double: return "float";
    case AttrKind::Bool: return "bool";
    case AttrKind::Scalar: return "Scalar";
    case AttrKind::OptionalScalar: return "Scalar?";
    case AttrKind::IntList: return "int[]";
    case AttrKind::DType: return "dtype";
    case AttrKind::Device: return "device";
    case AttrKind::String: return "str";
    case AttrKind::OptionalInt: return "int?";
    case AttrKind::DoubleList: return "float[]";
  }
  return "?";
}

const char* value_kind_name(const AttrValue& v) {
  constexpr const char* kNames[] = {"None",  "int",    "float", "bool", "Scalar",
                                    "int[]", "dtype", "device", "str",  "float[]"};
  return kNames[v.index()];
}

template <typename... T>
bool holds_any(const AttrValue& v) {
  return (std::holds_alternative<T>(v) || ...);
}

bool attr_fits(AttrKind kind, const AttrValue& v) {
  switch (kind) {
    case AttrKind::Int: return holds_any<int64_t>(v);
    case AttrKind::Double: return holds_any<double, int64_t>(v);
    case AttrKind::Bool: return holds_any<bool>(v);
    case AttrKind::Scalar: return holds_any<Scalar, int64_t, double, bool>(v);
    case AttrKind::OptionalScalar: return holds_any<std::monostate, Scalar, int64_t, double, bool>(v);
    case AttrKind::IntList: return holds_any<Shape>(v);
    case AttrKind::DType: return holds_any<DType>(v);
    case AttrKind::Device: return holds_any<Device>(v);
    case AttrKind::String: return holds_any<std::string_view>(v);
    case AttrKind::OptionalInt: return holds_any<std::monostate, int64_t>(v);
    case AttrKind::DoubleList: return holds_any<std::vector<double>>(v);
  }
  return false;
}

// "node 'gelu' (gelu)"
std::string where(const Node& n) { return fmt::format("node '{}' ({})", n.name(), n.op().name); }

std::string slot_name(const Node& n, size_t i) {
  const auto slots = n.op().inputs;
  if (n.op().has(kOpVariadic) || i >= slots.size()) return fmt::format("input {}", i);
  return fmt::format("input {} ({})", i, slots[i]);
}

// Why `v` cannot be read here ("" when it can), for a value that is not among the defined ones.
std::string unreadable(const Graph& g, const Value* v) {
  if (v->erased()) return fmt::format("reads '{}', which was erased from the graph", v->name());
  if (!g.owns(v)) return fmt::format("reads '{}', a value of another graph", v->name());
  return fmt::format("reads '{}' before it is defined (its producer '{}' comes later)", v->name(),
                     v->producer() != nullptr ? v->producer()->name() : v->name());
}

}  // namespace

void verify(const Graph& g) {
  std::unordered_set<const Value*> defined;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value* v = g.inputs()[i];
    KILN_CHECK(v->has_meta(), "graph::verify: input {} ('{}') has no shape, dtype or device", i, v->name());
    KILN_CHECK(v->meta().defined, "graph::verify: input {} ('{}') is marked as an undefined tensor", i, v->name());
    defined.insert(v);
  }
  for (const Value* v : g.constants()) {
    KILN_CHECK(v->has_meta(), "graph::verify: constant '{}' has no shape, dtype or device", v->name());
    defined.insert(v);
  }
  for (const Node* n : g.nodes()) {
    const OpDesc& op = n->op();
    const auto inputs = n->inputs();
    if (op.has(kOpVariadic)) {
      KILN_CHECK(!inputs.empty(), "graph::verify: {} has no inputs, but {} takes a list of at least one tensor",
                 where(*n), op.name);
    } else {
      KILN_CHECK(inputs.size() == op.inputs.size(), "graph::verify: {} has {} input slots, but {} takes {} ({})",
                 where(*n), inputs.size(), op.name, op.inputs.size(), fmt::join(op.inputs, ", "));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Value* v = inputs[i];
      if (v == nullptr) {
        KILN_CHECK(!op.has(kOpVariadic), "graph::verify: {} {} is absent (a list entry must be a tensor)", where(*n),
                   slot_name(*n, i));
        continue;
      }
      KILN_CHECK(defined.count(v) == 1, "graph::verify: {} {} {}", where(*n), slot_name(*n, i), unreadable(g, v));
      KILN_CHECK(v->meta().defined,
                 "graph::verify: {} {} reads '{}', an undefined tensor (an output its op did not produce)", where(*n),
                 slot_name(*n, i), v->name());
    }
    const auto attrs = n->attrs();
    KILN_CHECK(attrs.size() == op.attrs.size(), "graph::verify: {} has {} attributes, but {} takes {}", where(*n),
               attrs.size(), op.name, op.attrs.size());
    for (size_t i = 0; i < attrs.size(); ++i)
      KILN_CHECK(attr_fits(op.attrs[i].kind, attrs[i]), "graph::verify: {} attribute {} ({}) should be {}, got {} {}",
                 where(*n), i, op.attrs[i].name, kind_name(op.attrs[i].kind), value_kind_name(attrs[i]),
                 attr_str(attrs[i]));
    KILN_CHECK(op.replay != nullptr, "graph::verify: {} cannot run: op {} has no replay in its record", where(*n),
               op.name);
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      const Value* v = n->outputs()[i];
      KILN_CHECK(v->has_meta(), "graph::verify: {} output {} ('{}') has no shape, dtype or device", where(*n), i,
                 v->name());
      defined.insert(v);
    }
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value* v = g.outputs()[i];
    KILN_CHECK(v != nullptr, "graph::verify: graph output {} is null", i);
    KILN_CHECK(defined.count(v) == 1, "graph::verify: graph output {} {}", i, unreadable(g, v));
    KILN_CHECK(v->meta().defined, "graph::verify: graph output {} is '{}', an undefined tensor", i, v->name());
  }
}

}  // namespace kiln::graph
