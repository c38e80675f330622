// Which cuBLASLt algorithm is fastest for a linear layer's GEMM, against the heuristic's first
// choice (what Kiln's plan cache takes): y[M,N] = x[M,K] w[N,K]^T + b in bf16 with fp32
// accumulation, the BIAS epilogue, the weights hot in L2 (as in a loop over one MLP block).
// For each shape it asks the heuristic for up to 32 algorithms, times each (CUDA events
// around 50 back-to-back calls, median of 15 repeats) and prints them fastest first, with the
// heuristic's rank and whether it splits K. A standalone probe for deciding whether a
// measured choice (autotuning) is worth building into the plan cache.
//
//   nvcc -O2 -std=c++17 -o cublaslt_algos bench/cublaslt_algos.cu -lcublasLt && ./cublaslt_algos
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    auto s_ = (x);                                                              \
    if (static_cast<int>(s_) != 0) {                                            \
      std::fprintf(stderr, "%s failed: %d (line %d)\n", #x, (int)s_, __LINE__); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    p[i] = __float2bfloat16(((h & 0xffff) / 65536.0f - 0.5f) * 0.1f);
  }
}

int main() {
  const int shapes[][3] = {{64, 1024, 4096}, {64, 4096, 1024}, {4096, 1024, 4096}, {4096, 4096, 1024}};
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  const size_t ws_bytes = 32u << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  for (const auto& s : shapes) {
    const int M = s[0], K = s[1], N = s[2];
    __nv_bfloat16 *x, *w, *b, *y;
    CK(cudaMalloc(&x, (size_t)M * K * 2));
    CK(cudaMalloc(&w, (size_t)N * K * 2));
    CK(cudaMalloc(&b, (size_t)N * 2));
    CK(cudaMalloc(&y, (size_t)M * N * 2));
    fill<<<(M * K + 255) / 256, 256>>>(x, (size_t)M * K, 1);
    fill<<<(N * K + 255) / 256, 256>>>(w, (size_t)N * K, 2);
    fill<<<(N + 255) / 256, 256>>>(b, N, 3);
    cublasLtMatmulDesc_t op;
    CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof(b)));
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, N, K));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, M, K));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = ws_bytes;
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
    cublasLtMatmulHeuristicResult_t res[32];
    int n = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 32, res, &n));
    const float alpha = 1, beta = 0;
    struct Row {
      int rank;
      float us;
      int splitk;
      size_t ws;
    };
    std::vector<Row> rows;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < n; ++i) {
      if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
      auto run = [&] {
        return cublasLtMatmul(lt, op, &alpha, w, la, x, lb, &beta, y, lc, y, lc, &res[i].algo, ws, ws_bytes, stream);
      };
      if (run() != CUBLAS_STATUS_SUCCESS) continue;
      std::vector<float> t;
      for (int r = 0; r < 15; ++r) {
        CK(cudaEventRecord(e0, stream));
        for (int k = 0; k < 50; ++k) run();
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000 / 50);
      }
      std::sort(t.begin(), t.end());
      int splitk = 0;
      size_t wr = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &wr);
      rows.push_back({i, t[t.size() / 2], splitk, res[i].workspaceSize});
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.us < b.us; });
    const Row* first = nullptr;
    for (const Row& r : rows)
      if (r.rank == 0) first = &r;
    std::printf("bf16 linear M=%d K=%d N=%d: %d algorithms; heuristic's first %.2f us, fastest %.2f us (rank %d)\n", M,
                K, N, n, first ? first->us : -1.f, rows.empty() ? -1.f : rows[0].us, rows.empty() ? -1 : rows[0].rank);
    for (size_t i = 0; i < rows.size() && i < 6; ++i)
      std::printf("  rank %2d  %8.2f us  splitK %d  workspace %zu\n", rows[i].rank, rows[i].us, rows[i].splitk,
                  rows[i].ws);
    cudaFree(x);
    cudaFree(w);
    cudaFree(b);
    cudaFree(y);
  }
  return 0;
}
