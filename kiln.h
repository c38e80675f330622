// Kiln's umbrella header: #include <kiln/kiln.h> brings in the whole public API.
#pragma once

#include "core/error.h"
#include "core/device.h"
#include "core/stream.h"
#include "tensor/dtype.h"
#include "allocator/memory.h"
#include "allocator/pinned_host_allocator.h"
#include "tensor/generator.h"
#include "tensor/scalar.h"
#include "tensor/shape.h"
#include "tensor/tensor.h"
#include "tensor/tensor_options.h"
#include "ops/ops.h"
#include "autograd/autograd.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "profiler/profiler_api.h"
