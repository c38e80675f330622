// Whether this build runs the CPU GEMM's float tiles through oneDNN (KILN_ONEDNN with libdnnl
// found): the tests of the oneDNN tile kernels skip, with a message, when it does not.
#pragma once

#include <string>

#include "ops/cpu/gemm_tiled.h"

namespace kiln::testing {

/// True when gemm_backend() names oneDNN.
inline bool onednn_tiles() { return std::string(cpu::gemm_backend()).find("oneDNN") != std::string::npos; }

}  // namespace kiln::testing
