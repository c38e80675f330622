// Where the op scope hands a call to autograd (ops/autograd_hook.h): the checks before the
// kernel runs, and the node attached to the outputs after.
#include "../ops/autograd_hook.h"
#include "../ops/op_list.h"
#include "node.h"

namespace kiln::detail {

namespace {
bool is_view_with_history(const Tensor& t) {
  const AutogradMeta* meta = t.unsafe_impl()->autograd_meta();
  return meta != nullptr && meta->is_view;
}
}  // namespace

void autograd_check(const OpCall& call) {
  const OpDesc& op = *call.op;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const Tensor* t = call.inputs[i];
    if (t == nullptr || !t->requires_grad()) continue;
    const AutogradMeta* meta = t->unsafe_impl()->autograd_meta();
    // A view whose memory changed since it was made no longer matches its history.
    if (meta->is_view && t->_version() != meta->view_version)
      KILN_FAIL("{}: input {} is a view of a tensor that was modified in place after the view was made; its "
                "gradient history no longer matches its values (Kiln does not rebase views as PyTorch does). Make "
                "the view after the in-place change, or clone() it",
                op.name, i);
  }
  if (!op.has(kOpInPlace) || call.inputs.empty() || call.inputs[0] == nullptr) return;
  const Tensor& self = *call.inputs[0];
  if (self.requires_grad() && self.is_leaf())
    KILN_FAIL("{}: a leaf Variable that requires grad is being used in an in-place operation", op.name);
  bool any = false;
  for (const Tensor* t : call.inputs) any = any || (t != nullptr && t->requires_grad());
  if (!any) return;
  KILN_CHECK(op.backward != nullptr,
             "{}: this in-place op has no backward formula in Kiln, and a tensor it takes requires grad; use the "
             "out-of-place form",
             op.name);
  KILN_CHECK(!is_view_with_history(self),
             "{}: an in-place operation on a view of a tensor that requires grad is not supported by Kiln's autograd "
             "(PyTorch rebases the view's history; Kiln does not). clone() the view first, or write into the base",
             op.name);
}

void autograd_record(const OpCall& call) {
  const OpDesc& op = *call.op;
  if (call.outputs.empty()) return;
  const bool in_place = op.has(kOpInPlace);
  // An op that handed back one of its inputs unchanged (dropout in eval, a no-op conversion)
  // adds nothing: gradients reach that input directly.
  if (!in_place)
    for (const Tensor* t : call.inputs)
      if (t != nullptr && call.outputs[0].is_same(*t)) return;
  bool any_floating = false;
  for (const Tensor& o : call.outputs) any_floating = any_floating || (o.defined() && o.is_floating_point());
  if (!any_floating) return;
  auto node = std::make_shared<autograd::OpNode>(call);
  bool any_edge = false;
  for (const autograd::Edge& e : node->next_edges()) any_edge = any_edge || e.valid();
  if (!any_edge) return;
  for (size_t j = 0; j < call.outputs.size(); ++j) {
    const Tensor& out = call.outputs[j];
    if (!out.defined() || !out.is_floating_point()) continue;
    AutogradMeta& meta = out.unsafe_impl()->ensure_autograd_meta();
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(j);
    meta.requires_grad = false;
    // A view of a tensor with history: an in-place write through it, or to its base after
    // it was made, is refused later (autograd_check).
    const Tensor* base = call.inputs.empty() ? nullptr : call.inputs[0];
    meta.is_view = !in_place && base != nullptr && out.is_alias_of(*base);
    meta.view_version = out._version();
  }
}

}  // namespace kiln::detail
