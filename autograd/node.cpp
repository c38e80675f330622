// Backward nodes: OpNode runs an op record's backward formula on the gradients it receives,
// checks the saved tensors' versions first, and conforms each input's gradient to that
// input (sums a broadcast gradient down, converts dtype and device back); AccumulateGrad
// adds gradients into a leaf's .grad() and then runs the leaf's post-accumulate-grad hooks.
#include "node.h"

#include <atomic>
#include <cctype>

#include "../ops/grad_mode.h"
#include "../ops/ops.h"
#include "../tensor/make.h"
#include "../tensor/shape.h"

namespace kiln::autograd {

namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};

std::string describe(const Tensor& t) {
  return fmt::format("[{}{}Type {}]", t.is_cuda() ? "CUDA" : "CPU", t.dtype(), shape_str(t.sizes()));
}
}  // namespace

Node::Node() : sequence_nr_(g_next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

void Node::run_pre_hooks(std::vector<Tensor>& grads) const {
  for (const auto& [nr, hook] : pre_hooks_) {
    if (nr >= grads.size() || !grads[nr].defined()) continue;
    Tensor replaced = hook(grads[nr]);
    if (replaced.defined()) grads[nr] = std::move(replaced);
  }
}

namespace {
std::string backward_name_of(std::string_view name) {
  if (name == "to" || name == "_to_copy") return "ToCopyBackward0";
  if (name == "copy_") return "CopyBackwards";
  // A fused loss's forward op stands for the loss: _nll_loss_forward -> NllLossBackward0.
  if (name.starts_with("_") && name.ends_with("_forward")) return backward_name_of(name.substr(1, name.size() - 9));
  std::string out;
  bool upper = true;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out.push_back(upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c);
    upper = false;
  }
  return out + "Backward0";
}
}  // namespace

std::string backward_name(const OpDesc& op) { return backward_name_of(op.name); }

Tensor sum_to(const Tensor& grad, const Shape& sizes) {
  if (grad.sizes() == sizes) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(sizes.size());
  KILN_INTERNAL_ASSERT(lead >= 0, "autograd: gradient of shape {} cannot be summed to shape {}", shape_str(grad.sizes()),
                       shape_str(sizes));
  Shape dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t g = grad.sizes()[static_cast<size_t>(lead) + i];
    if (sizes[i] == 1 && g != 1) dims.push_back(lead + static_cast<int64_t>(i));
    else
      KILN_INTERNAL_ASSERT(g == sizes[i], "autograd: gradient of shape {} does not match input shape {}",
                           shape_str(grad.sizes()), shape_str(sizes));
  }
  const Tensor summed = dims.empty() ? grad : sum(grad, dims, true);
  return summed.reshape(sizes);
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  AutogradMeta* meta = t.unsafe_impl()->autograd_meta();
  if (meta == nullptr) return {};
  if (meta->grad_fn) return Edge{meta->grad_fn, meta->output_nr};
  if (!meta->requires_grad) return {};
  std::shared_ptr<Node> acc = meta->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    meta->grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

// ---- OpNode -------------------------------------------------------------------------------

OpNode::OpNode(const OpCall& call)
    : op_(call.op), name_(backward_name(*call.op)), attrs_(call.attrs.begin(), call.attrs.end()),
      num_outputs_(call.outputs.size()) {
  const size_t n = call.inputs.size();
  inputs_.resize(n);
  input_sizes_.resize(n);
  input_dtypes_.resize(n, DType::Float32);
  input_devices_.resize(n, Device::cpu());
  needs_grad_ = std::make_unique<bool[]>(n);  // value-initialised: false
  next_edges_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor* t = call.inputs[i];
    if (t == nullptr) continue;
    input_sizes_[i] = t->sizes();
    input_dtypes_[i] = t->dtype();
    input_devices_[i] = t->device();
    // An in-place op's first input is its output: its edge is the history it had before.
    next_edges_[i] = gradient_edge(*t);
    needs_grad_[i] = next_edges_[i].valid();
    if ((op_->saved & save_input(static_cast<int>(i))) == 0) continue;
    // An input that is also the output (in place) would own its own node: keep an alias.
    const bool is_self = !call.outputs.empty() && call.outputs[0].is_same(*t);
    inputs_[i] = SavedTensor{is_self ? new_view(*t, t->sizes(), t->strides(), t->storage_offset()) : *t,
                             t->_version(), is_self, true};
  }
  outputs_.resize(call.outputs.size());
  for (size_t j = 0; j < call.outputs.size(); ++j) {
    if ((op_->saved & save_output(static_cast<int>(j))) == 0) continue;
    const Tensor& o = call.outputs[j];
    outputs_[j] = SavedTensor{new_view(o, o.sizes(), o.strides(), o.storage_offset()), o._version(), true, true};
  }
}

Tensor OpNode::unpack(const SavedTensor& s, size_t which, bool is_input) {
  if (!s.saved) return {};
  if (s.data._version() != s.version)
    KILN_FAIL(
        "one of the variables needed for gradient computation has been modified by an inplace operation: {}, which "
        "is {} {} of {}, is at version {}; expected version {} instead. Hint: clone() the tensor before modifying it "
        "in place, or modify a copy",
        describe(s.data), is_input ? "input" : "output", which, name_, s.data._version(), s.version);
  if (!s.is_output || !is_grad_enabled()) return s.data;
  // create_graph: the saved output gets its history back, so second-order gradients flow.
  Tensor t = new_view(s.data, s.data.sizes(), s.data.strides(), s.data.storage_offset());
  AutogradMeta& meta = t.unsafe_impl()->ensure_autograd_meta();
  meta.grad_fn = shared_from_this();
  meta.output_nr = static_cast<uint32_t>(which);
  return t;
}

std::vector<Tensor> OpNode::apply(std::vector<Tensor> grads) {
  KILN_CHECK(!released_,
             "{}: trying to backward through the graph a second time (or directly access saved tensors after they "
             "have already been freed). Saved intermediate values of the graph are freed when you call backward() "
             "or autograd::grad(). Specify retain_graph=true if you need to backward through the graph a second time",
             name_);
  KILN_CHECK(op_->backward != nullptr, "{}: op {} has no backward formula in Kiln", name_, op_->name);
  std::vector<Tensor> inputs(inputs_.size()), outputs(outputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) inputs[i] = unpack(inputs_[i], i, !inputs_[i].is_output);
  for (size_t j = 0; j < outputs_.size(); ++j) outputs[j] = unpack(outputs_[j], j, false);
  const BackwardArgs args{*op_, inputs, attrs_, outputs, grads, {needs_grad_.get(), next_edges_.size()}, input_sizes_};
  std::vector<Tensor> result = op_->backward(args);
  result.resize(next_edges_.size());
  for (size_t i = 0; i < result.size(); ++i) {
    Tensor& g = result[i];
    if (!needs_grad_[i] || !g.defined()) {
      g = Tensor();
      continue;
    }
    g = sum_to(g, input_sizes_[i]);
    if (g.dtype() != input_dtypes_[i]) g = g.to(input_dtypes_[i]);
    if (g.device() != input_devices_[i]) g = g.to(input_devices_[i]);
  }
  return result;
}

void OpNode::release_variables() {
  inputs_.clear();
  outputs_.clear();
  inputs_.resize(input_sizes_.size());
  outputs_.resize(num_outputs_);
  released_ = true;
}

// ---- AccumulateGrad -------------------------------------------------------------------------

AccumulateGrad::AccumulateGrad(const Tensor& leaf) : leaf_(leaf.impl_ptr()) {}

Tensor AccumulateGrad::variable() const { return Tensor(leaf_.lock()); }

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor> grads) {
  Tensor leaf = variable();
  if (!leaf.defined() || grads.empty() || !grads[0].defined()) return {};
  Tensor g = std::move(grads[0]);
  AutogradMeta& meta = leaf.unsafe_impl()->ensure_autograd_meta();
  for (const TensorHook& hook : meta.hooks) {
    Tensor replaced = hook(g);
    if (replaced.defined()) g = std::move(replaced);
  }
  if (!meta.grad.defined()) {
    // Keep the gradient itself when nothing else holds it; otherwise a copy, so that an
    // in-place change of .grad() (clip_grad_norm_) cannot reach another tensor.
    // A broadcast gradient (a stride-0 view) is made dense: optimizers write .grad() in place.
    if (is_grad_enabled()) {
      meta.grad = g;  // create_graph: keep the history
    } else {
      const bool owned = g.impl_ptr().use_count() == 1 && g.unsafe_impl()->storage().use_count() == 1;
      meta.grad = owned && g.is_contiguous() ? g : g.clone();
    }
  } else {
    meta.grad = add(meta.grad, g);
  }
  // Post-accumulate hooks see the leaf with its new .grad(). A copy of the list, so that a
  // hook may remove itself (or register another) while they run.
  if (!meta.post_accumulate_grad_hooks.empty()) {
    const auto hooks = meta.post_accumulate_grad_hooks;
    for (const auto& [key, hook] : hooks) hook(leaf);
  }
  return {};
}

}  // namespace kiln::autograd
