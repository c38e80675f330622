// The two calls the op scope makes into autograd/ when an op records history. They are
// declared here and defined in autograd/record.cpp: ops/ never includes an autograd header
// (the include arrows point one way), and both halves build into the one kiln library.
#pragma once

#include "op_record.h"

namespace kiln::detail {

/// Checks, before the kernel runs, that autograd allows this call (an in-place write to a
/// leaf that requires grad, or to a view, is refused with PyTorch's message).
void autograd_check(const OpCall& call);
/// Builds the call's backward node and attaches it to its outputs.
void autograd_record(const OpCall& call);

}  // namespace kiln::detail
