// The profiler's with_flops columns read each op's cost from its op record (ops/op_cost.h
// holds the conventions and the cost functions); the profiler lists no op names.
#pragma once

#include "../ops/op_cost.h"

namespace kiln::profiler {

using kiln::OpCost;
using kiln::op_cost;

}  // namespace kiln::profiler
