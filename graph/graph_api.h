// The graph layer's public API in one include (kiln.h includes it): the IR, capture, printing,
// the verifier, passes and compile().
#pragma once

#include "capture.h"
#include "compile.h"
#include "cuda_graph.h"
#include "graph.h"
#include "passes/dead_code.h"
#include "passes/fuse_linear_gelu.h"
#include "passes/pass.h"
#include "print.h"
#include "verify.h"
