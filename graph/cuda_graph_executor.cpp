// The CUDA Graph executor (CompileOptions::cuda_graph): runs a function of tensors (the
// interpreter over a graph, or a user's training step) as one CUDA graph.
//
// Call by call:
// - the first `warmup_calls` calls run the function eagerly on the graph's capture stream
//   (after the caller's stream), so one-time set-up — cuBLASLt plans and workspaces for that
//   stream, an optimizer's state, device-error records — happens outside the capture;
// - the next call copies its inputs into static input buffers (allocated then, outside the
//   private pool), captures the function on them (graph/cuda_graph.h) and replays it once;
// - every later call copies its inputs into the static buffers (nothing to copy when the
//   caller passes the static buffers themselves, static_inputs()) and replays.
// The outputs are the capture's static output tensors: the next call overwrites them, as with
// torch.cuda.CUDAGraph (clone() what must survive it). A call with other shapes, dtypes or
// devices is refused by Executable's input check: capture again for other shapes.
#include <functional>
#include <memory>

#include "../ops/grad_mode.h"
#include "cuda_graph.h"
#include "executor.h"

namespace kiln::graph {

namespace {

class CudaGraphExecutor final : public ExecutorImpl {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

  CudaGraphExecutor(Fn fn, Device device, int warmup_calls, bool no_grad)
      : fn_(std::move(fn)), graph_(device), warmup_left_(warmup_calls), no_grad_(no_grad) {
    KILN_CHECK(warmup_calls >= 0, "graph::compile: warmup_calls must be >= 0, got {}", warmup_calls);
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    AutoGradMode grad_mode(no_grad_ ? false : is_grad_enabled());
    const Device device = graph_.device();
    const Stream caller = cuda::current_stream(device);
    if (warmup_left_ > 0) {
      --warmup_left_;
      Event ready(device);
      ready.record(caller);
      ready.block(graph_.capture_stream());
      std::vector<Tensor> out;
      {
        cuda::StreamGuard on_capture_stream(graph_.capture_stream());
        out = fn_(inputs);
      }
      Event done(device);
      done.record(graph_.capture_stream());
      done.block(caller);
      for (const Tensor& t : out)
        if (t.defined() && t.is_cuda()) t.record_stream(caller);
      return out;
    }
    if (!graph_.captured()) {
      // (Again after a failed capture: the buffers are made anew.)
      static_inputs_.clear();
      static_outputs_.clear();
      static_inputs_.reserve(inputs.size());
      for (const Tensor& t : inputs) static_inputs_.push_back(t.clone());  // contiguous, caller's stream
      graph_.capture([&] { static_outputs_ = fn_(static_inputs_); });
    } else {
      for (size_t i = 0; i < inputs.size(); ++i)
        if (!inputs[i].is_same(static_inputs_[i])) static_inputs_[i].copy_(inputs[i]);
    }
    graph_.replay();
    return static_outputs_;
  }

  const std::vector<Tensor>* static_inputs() const override { return &static_inputs_; }
  const CudaGraph* cuda_graph() const override { return &graph_; }

 private:
  Fn fn_;
  CudaGraph graph_;
  int warmup_left_;
  bool no_grad_;
  std::vector<Tensor> static_inputs_, static_outputs_;
};

// The device every input is on (the graph's one CUDA device).
Device single_cuda_device(const std::vector<Device>& devices, const char* who) {
  KILN_CHECK(!devices.empty(), "{}: cuda_graph = true needs at least one CUDA tensor input", who);
  for (size_t i = 0; i < devices.size(); ++i)
    KILN_CHECK(devices[i].is_cuda() && devices[i] == devices[0],
               "{}: cuda_graph = true needs every input on one CUDA device; input {} is on {}{}", who, i,
               devices[i].str(), i > 0 ? fmt::format(", input 0 on {}", devices[0].str()) : std::string());
  return devices[0];
}

}  // namespace

std::unique_ptr<ExecutorImpl> make_cuda_graph_executor(const Graph& graph, const CompileOptions& options) {
  std::vector<Device> devices;
  for (const Value* v : graph.inputs()) devices.push_back(v->device());
  const Device device = single_cuda_device(devices, "graph::compile");
  // The interpreter over the graph is the function captured; a forward graph records no
  // autograd history (a replay could not extend it): train through compile(step, ...).
  std::shared_ptr<ExecutorImpl> interpreter = make_interpreter(graph, options);
  return std::make_unique<CudaGraphExecutor>(
      [interpreter](const std::vector<Tensor>& in) { return interpreter->run(in); }, device, options.warmup_calls,
      /*no_grad=*/true);
}

std::unique_ptr<ExecutorImpl> make_cuda_graph_step_executor(StepFunction step,
                                                            const std::vector<Tensor>& example_inputs,
                                                            const CompileOptions& options) {
  std::vector<Device> devices;
  for (const Tensor& t : example_inputs) devices.push_back(t.device());
  const Device device = single_cuda_device(devices, "graph::compile(step)");
  return std::make_unique<CudaGraphExecutor>(std::move(step), device, options.warmup_calls, /*no_grad=*/false);
}

}  // namespace kiln::graph
