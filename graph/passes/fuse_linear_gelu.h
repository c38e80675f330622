// fuse_linear_gelu: rewrites a GEMM with a bias followed by GELU into one fused_linear_gelu
// node, whose kernel applies bias and GELU to the GEMM's accumulator and stores the result
// once (ops/fused_linear_gelu.h).
#pragma once

#include <cstddef>

#include "../graph.h"

namespace kiln::graph {

/// Rewrites into fused_linear_gelu(x, w, b, approximate), where `g` is a gelu node (either
/// approximate mode) and the value it reads is read by nothing else and is no graph output:
///  - g(linear(x, w, b)), b possibly absent;
///  - g(addmm(b, x, t(w))) with beta = alpha = 1, b of shape [N] (N = w's rows), x and w 2-D,
///    t(w) a `t` or a `transpose` of w's two dims;
///  - g(add(matmul(x, t(w)), b)) (either operand order, alpha = 1; `mm` as well as `matmul`)
///    with b of shape [N], the product read only by the add.
/// All operands must share one dtype, and no in-place node may run between the first matched
/// node and the gelu (the fused node reads its operands where the gelu stood). The fused
/// node takes the gelu's place; the replaced nodes, and a transpose left unread, are erased.
/// Returns the number of rewrites.
size_t fuse_linear_gelu(Graph& graph);

}  // namespace kiln::graph
