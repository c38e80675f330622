// The cuBLASLt context (see cublaslt.h): handles, workspaces and the plan cache behind one
// mutex. A plan is built once per distinct LtGemmDesc: the matmul descriptor, the three
// layouts (C and D share one) and the first algorithm cublasLtMatmulAlgoGetHeuristic offers
// under the preference "at most this workspace, pointers aligned as the description says"
// (and, for 16-bit types, split-K reductions in float, never in the 16-bit output type).
// Descriptions with no algorithm are cached too, so the fallback decision is also a lookup.
// Epilogue pointers (bias, bias gradient, aux matrix) are set on the plan's descriptor before
// each call; their alignments are part of the description, since the heuristic chose the
// algorithm for the first call's pointers.
#include "cublaslt.h"

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../core/cublas_check.h"
#include "../../core/cuda_check.h"
#include "../../tensor/make.h"

namespace kiln::cuda_kernels {

namespace {

// Hopper and newer get the 32 MiB that PyTorch gives cuBLASLt there; older GPUs 4 MiB.
size_t workspace_bytes_for(int device) {
  int major = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
}

struct DescHash {
  size_t operator()(const LtGemmDesc& d) const noexcept {
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) {
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h *= 0x100000001b3ull;
    };
    mix(static_cast<uint64_t>(d.device));
    mix(static_cast<uint64_t>(d.dtype));
    mix(static_cast<uint64_t>(d.compute));
    mix(static_cast<uint64_t>(d.epilogue));
    mix((d.trans_a ? 1u : 0u) | (d.trans_b ? 2u : 0u));
    for (int64_t v : {d.m, d.n, d.k, d.lda, d.ldb, d.ldc, d.aux_ld, d.batch, d.stride_a, d.stride_b, d.stride_c,
                      d.stride_aux})
      mix(static_cast<uint64_t>(v));
    mix((uint64_t{d.align_a} << 48) ^ (uint64_t{d.align_b} << 32) ^ (uint64_t{d.align_c} << 16) ^ d.align_bias);
    mix(d.align_aux);
    return static_cast<size_t>(h);
  }
};

// Descriptors of one description; destroyed with it (destructors never throw).
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (c != nullptr) (void)cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) (void)cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) (void)cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) (void)cublasLtMatmulDescDestroy(op);
  }
};

struct PreferenceHandle {
  cublasLtMatmulPreference_t pref = nullptr;
  PreferenceHandle() { CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref)); }
  PreferenceHandle(const PreferenceHandle&) = delete;
  PreferenceHandle& operator=(const PreferenceHandle&) = delete;
  ~PreferenceHandle() { (void)cublasLtMatmulPreferenceDestroy(pref); }
};

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(T)));
}
template <typename T>
void set_layout(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const T& value) {
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, attr, &value, sizeof(T)));
}
template <typename T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(T)));
}

// The epilogue's pointers, set on the plan's descriptor before every call (and before the
// heuristic runs, which reads their values for their alignment, never the data).
void set_epilogue_pointers(cublasLtMatmulDesc_t desc, cublasLtEpilogue_t epilogue, const LtGemmArgs& args) {
  if (lt_reads_bias(epilogue)) set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, args.bias);
  if (lt_writes_bias_grad(epilogue)) set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, args.bias_grad);
  if (lt_uses_aux(epilogue)) set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, args.aux);
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t dtype, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&layout, dtype, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    // A failing attribute must not leak the layout.
    try {
      set_layout(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(batch));
      set_layout(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
    } catch (...) {
      (void)cublasLtMatrixLayoutDestroy(layout);
      throw;
    }
  }
  return layout;
}

class LtCache {
 public:
  bool matmul(const LtGemmDesc& d, const LtGemmArgs& args, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(d);
    if (it == plans_.end()) [[unlikely]] {
      std::unique_ptr<Plan> plan = build_plan(d, args);
      if (plans_.size() >= kMaxPlans) plans_.clear();  // dynamic shapes: bound the cache, simply
      it = plans_.emplace(d, std::move(plan)).first;
    }
    Plan& plan = *it->second;
    if (!plan.has_algo) return false;
    const LtContext ctx = context_locked(d.device, stream);
    set_epilogue_pointers(plan.op, d.epilogue, args);
    CUBLAS_CHECK(cublasLtMatmul(ctx.handle, plan.op, args.alpha, args.a, plan.a, args.b, plan.b, args.beta, args.c,
                                plan.c, args.c, plan.c, &plan.algo, ctx.workspace, ctx.workspace_bytes, stream));
    return true;
  }

  LtContext context(int device, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    return context_locked(device, stream);
  }

 private:
  static constexpr size_t kMaxPlans = 4096;

  struct DeviceState {
    cublasLtHandle_t handle = nullptr;
    size_t workspace_bytes = 0;
  };

  DeviceState& device_locked(int device) {
    if (device >= static_cast<int>(devices_.size())) devices_.resize(static_cast<size_t>(device) + 1);
    DeviceState& s = devices_[static_cast<size_t>(device)];
    if (s.handle == nullptr) [[unlikely]] {
      s.workspace_bytes = workspace_bytes_for(device);
      CUBLAS_CHECK(cublasLtCreate(&s.handle));
    }
    return s;
  }

  LtContext context_locked(int device, cudaStream_t stream) {
    DeviceState& s = device_locked(device);
    const auto key = std::make_pair(device, reinterpret_cast<uintptr_t>(stream));
    auto it = workspaces_.find(key);
    if (it == workspaces_.end()) [[unlikely]] {
      // Allocated while `stream` is the device's current stream, so the block belongs to it.
      const int64_t words = static_cast<int64_t>(s.workspace_bytes / sizeof(int64_t));
      Tensor ws = new_contiguous({words}, DType::Int64, Device::cuda(device), "cublaslt_workspace");
      it = workspaces_.emplace(key, std::move(ws)).first;
    }
    return LtContext{s.handle, it->second.data_ptr(), s.workspace_bytes};
  }

  std::unique_ptr<Plan> build_plan(const LtGemmDesc& d, const LtGemmArgs& args) {
    const DeviceState& s = device_locked(d.device);
    auto plan = std::make_unique<Plan>();
    const cudaDataType_t scale = d.compute == CUBLAS_COMPUTE_64F ? CUDA_R_64F : CUDA_R_32F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, d.compute, scale));
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(d.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N));
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(d.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N));
    if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(d.epilogue));
      set_epilogue_pointers(plan->op, d.epilogue, args);
      if (lt_uses_aux(d.epilogue)) {
        set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, d.aux_ld);
        if (d.batch > 1) set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, d.stride_aux);
      }
    }
    plan->a = d.trans_a ? make_layout(d.dtype, d.k, d.m, d.lda, d.batch, d.stride_a)
                        : make_layout(d.dtype, d.m, d.k, d.lda, d.batch, d.stride_a);
    plan->b = d.trans_b ? make_layout(d.dtype, d.n, d.k, d.ldb, d.batch, d.stride_b)
                        : make_layout(d.dtype, d.k, d.n, d.ldb, d.batch, d.stride_b);
    plan->c = make_layout(d.dtype, d.m, d.n, d.ldc, d.batch, d.stride_c);

    PreferenceHandle pref;
    set_pref(pref.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(s.workspace_bytes));
    set_pref(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, d.align_a);
    set_pref(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, d.align_b);
    set_pref(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, d.align_c);
    set_pref(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, d.align_c);
    if (d.dtype == CUDA_R_16F || d.dtype == CUDA_R_16BF) {
      // Split-K partial sums stay in float: no reduction rounded to 16 bits in between.
      const uint32_t mask =
          CUBLASLT_REDUCTION_SCHEME_MASK & ~static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
      set_pref(pref.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, mask);
    }

    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(s.handle, plan->op, plan->a, plan->b, plan->c,
                                                                 plan->c, pref.pref, 1, &result, &returned);
    // NOT_SUPPORTED is the heuristic's "nothing fits": an answer, not a failure.
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(status);
    plan->has_algo = status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS &&
                     result.workspaceSize <= s.workspace_bytes;
    if (plan->has_algo) plan->algo = result.algo;
    return plan;
  }

  std::mutex mutex_;
  std::vector<DeviceState> devices_;
  std::map<std::pair<int, uintptr_t>, Tensor> workspaces_;
  std::unordered_map<LtGemmDesc, std::unique_ptr<Plan>, DescHash> plans_;
};

// Leaked on purpose (see cublaslt.h): never destroyed after CUDA or the allocators.
LtCache& cache() {
  static LtCache* c = new LtCache();
  return *c;
}

}  // namespace

bool lt_reads_bias(cublasLtEpilogue_t epilogue) {
  return (static_cast<uint32_t>(epilogue) & CUBLASLT_EPILOGUE_BIAS) != 0;
}

bool lt_uses_aux(cublasLtEpilogue_t epilogue) {
  // The aux bit shared by RELU_AUX, GELU_AUX (and their BIAS forms), DRELU and DGELU.
  return (static_cast<uint32_t>(epilogue) & 128u) != 0;
}

bool lt_writes_bias_grad(cublasLtEpilogue_t epilogue) {
  // The BGRAD bit of DRELU_BGRAD and DGELU_BGRAD, and the two bias-gradient-only epilogues.
  const uint32_t e = static_cast<uint32_t>(epilogue);
  return (e & (16u | CUBLASLT_EPILOGUE_BGRADA | CUBLASLT_EPILOGUE_BGRADB)) != 0;
}

bool lt_matmul(const LtGemmDesc& desc, const LtGemmArgs& args, cudaStream_t stream) {
  // cuBLASLt's rule for the GELU aux matrix (cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD).
  if (lt_uses_aux(desc.epilogue) && (desc.aux_ld % 8 != 0 || desc.aux_ld < desc.m)) return false;
  return cache().matmul(desc, args, stream);
}

LtContext lt_context(int device, cudaStream_t stream) { return cache().context(device, stream); }

}  // namespace kiln::cuda_kernels
