// tensor({...}): the shape is read off the first element at each depth, every other list is
// checked against it, and the numbers are collected in row-major order as float64, int64 or
// bool (the inferred kind, so int64 values above 2^53 stay exact) before from_vector converts
// them to the dtype asked for.
#include "literal.h"

#include "../tensor/shape.h"
#include "factory.h"
#include "op_scope.h"

namespace kiln {

namespace {

enum class Kind { Bool, Integral, Floating };

struct Collected {
  Shape shape;
  Kind kind = Kind::Bool;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  std::vector<bool> bools;
};

// The path of zeros of length `depth`: the row every row at that depth is compared with.
std::vector<int64_t> first_path(size_t depth) { return std::vector<int64_t>(depth, 0); }

void collect(const NestedList& node, std::vector<int64_t>& path, Collected& c) {
  const size_t depth = path.size();
  const size_t ndim = c.shape.size();
  if (depth == ndim) {
    KILN_CHECK(node.is_number(), "tensor: ragged nested list: row {} is a list, expected a number (as at {})",
               shape_str(path), shape_str(first_path(depth)));
    const Scalar& v = node.value();
    if (v.is_floating()) c.kind = Kind::Floating;
    else if (v.is_integral() && c.kind == Kind::Bool) c.kind = Kind::Integral;
    c.floats.push_back(v.to_double());
    c.ints.push_back(v.to_int());
    c.bools.push_back(v.to_bool());
    return;
  }
  KILN_CHECK(!node.is_number(), "tensor: ragged nested list: element {} is the number {}, expected a list of {} "
             "(as row {})", shape_str(path), node.value(), c.shape[depth], shape_str(first_path(depth)));
  const auto n = static_cast<int64_t>(node.items().size());
  KILN_CHECK(n == c.shape[depth], "tensor: ragged nested list: row {} has {} elements, expected {} (as row {})",
             shape_str(path), n, c.shape[depth], shape_str(first_path(depth)));
  for (int64_t i = 0; i < n; ++i) {
    path.push_back(i);
    collect(node.items()[static_cast<size_t>(i)], path, c);
    path.pop_back();
  }
}

}  // namespace

Tensor tensor(const NestedList& data, TensorOptions options) {
  Collected c;
  // The shape: the length of the first list at each depth, down to the first number (or an
  // empty list, which ends the shape with a 0).
  for (const NestedList* node = &data; !node->is_number();) {
    c.shape.push_back(static_cast<int64_t>(node->items().size()));
    if (node->items().empty()) break;
    node = &node->items().front();
  }
  std::vector<int64_t> path;
  collect(data, path, c);
  if (c.floats.empty()) c.kind = Kind::Floating;  // torch.tensor([]) is float32
  const DType inferred =
      c.kind == Kind::Floating ? DType::Float32 : c.kind == Kind::Integral ? DType::Int64 : DType::Bool;
  if (!options.has_dtype()) options = options.dtype(inferred);
  OpScope scope(op::tensor, {}, c.shape, options.dtype(), options.device());
  switch (c.kind) {
    case Kind::Floating: return scope.output(from_vector(c.floats, c.shape, options));
    case Kind::Integral: return scope.output(from_vector(c.ints, c.shape, options));
    case Kind::Bool: break;
  }
  return scope.output(from_vector(c.bools, c.shape, options));
}

}  // namespace kiln
