// Standalone check and benchmark of Kiln's sm_90a linear+GELU kernel (ops/cuda/sm90_linear_gelu.cu,
// included directly so every tile variant can be driven), for the GPU machine:
//   check correct <dispatch|v0..vr>     correctness against a float64 CPU reference on random
//                                         data: poisoned outputs, edge shapes, bias/pre on and off,
//                                         bf16/f16/TF32 (dispatch) or one bf16 variant (vN);
//   check sanitize [0,1,...]              a few small calls of every variant, or of those listed
//                                         (run it under compute-sanitizer);
//   check bench [0,1,...]                 CUDA-event medians of the kernel against cuBLASLt's plain
//                                         GEMM, GEMM+bias, GEMM+GELU_BIAS (tanh) and GEMM+bias then a
//                                         separate exact-GELU kernel, rotating weight sets.
// Variants (16-bit outputs through TMA stores; 128x256 cooperative, 128x128 ping-pong tiles;
// gelu_fast's shipped fit unless said: since v8 per type, degree 2 for bf16, 3 for f16):
// v0 the shipped one (v5 of docs/notes/sm90_linear_gelu.md): cooperative, GELU in the
// consumers' registers chunk by chunk just before each half-tile store chunk, 4 stages;
// v1 cooperative, GELU offloaded to the producer warpgroup's spare warps, 3 stages; v2
// cooperative, GELU in the consumers, whole-tile staging, 3 stages; v3 ping-pong, 6 stages;
// v4 = v1 and v5 = v3 in clusters of 2; v6 cooperative, 3 stages, each tile's GELU and out
// stores interleaved with the next tile's wgmma (the CTA's last tile in registers); v7 the
// configuration shipped before v5 (the whole tile's GELU, then its two store chunks, degree-9
// fit); v8 = v0 with the degree-9 fit; v9 = v7 with the shipped fit; (v6 of the notes) va
// ping-pong with 64 x 256 tiles, GELU chunk by chunk before each quarter-tile store, 5 stages;
// vb = va in clusters of 2 (w multicast); vc ping-pong 64 x 256, whole-tile staging (the whole
// tile's GELU, then one store), 4 stages; vd = vc in clusters of 2; ve = va and vf = vb with
// two wgmma groups in flight instead of one; vg = v0 with two wgmma groups in flight; (v7)
// vh = va with each chunk stored by st.global.v4 from the staging buffer instead of a TMA store;
// vi = va with the GELU applied to the staged, T-rounded pre-activation in a rolled chunk loop
// (one copy of the GELU's code), TMA stores (run 10 also had vj = vi with vh's stores: slower,
// and it spills 4 bytes once the edge stores stay in registers, so it is gone); (v8) vj = va and
// vk = v0 with v5-v7's degree-5 fit in its own instruction sequence (the library before v8);
// vl = va without v10's last-tile hand-off (v9's va); (v13) vm = va and vn = v0 with v8-v12's
// eleven-instruction fit, vo = va and vp = v0 with the scaled bfloat16 fit; (v14) vq = va and
// vr = v0 adding the bias after the mainloop (v3-v13) instead of starting the accumulators from it;
// vs = va storing from registers (st.global of column pairs, the path of unaligned outputs) instead of
// staging through shared memory and TMA stores (no last-tile hand-off either);
//   check profile [0,a,...]                in-kernel clock64/globaltimer profile at the two target
//                                         shapes (SM clock, mainloop/epilogue/turn-wait cycles per
//                                         tile) of each variant, full, no GELU, no epilogue;
//   check once <v> <skip>                  two launches of variant v at (4096,1024,4096) (for ncu);
//   check abtest [0,a,...]                 the target shapes, cuBLASLt and the variants taking turns
//                                         (rounds of 10 launches each), so that the power-capped card's
//                                         clock drift falls on all of them alike; medians per contender;
//   check correct full<N>                 the dispatch's case list (all types, edge shapes) through vN;
//   check gelu                            gelu_fast on all 65536 bf16 and f16 inputs against float64.
// scripts/sm90_gpu_check.sh builds and runs it. (The timing modes live in sm90_linear_gelu_timing.cuh.)
#define KILN_SM90_BENCH_HOOKS 1  // epilogue-skipping variants, to split the kernel's time
#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../ops/cuda/sm90_linear_gelu.cu"
#include "gelu_fast_check.cuh"

using kiln::cuda_kernels::Sm90GemmType;
using kiln::cuda_kernels::Sm90LinearGeluArgs;
namespace sm90 = kiln::cuda_kernels::sm90;

namespace {

void check_cuda(cudaError_t s, const char* what, int line) {
  if (s == cudaSuccess) return;
  std::fprintf(stderr, "CUDA error %s at line %d: %s\n", what, line, cudaGetErrorString(s));
  std::exit(2);
}
void check_lt(cublasStatus_t s, const char* what, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "cuBLASLt error %d: %s at line %d\n", static_cast<int>(s), what, line);
  std::exit(2);
}
#define CK(x) check_cuda((x), #x, __LINE__)
#define LT(x) check_lt((x), #x, __LINE__)

constexpr int kNumVariants = 29;
constexpr auto kShippedFit = kiln::cuda_kernels::GeluFit::Shipped;
constexpr auto kNr9 = kiln::cuda_kernels::GeluFit::Nr9;
constexpr auto kDegree5 = kiln::cuda_kernels::GeluFit::Degree5;
constexpr auto kV9Fit = kiln::cuda_kernels::GeluFit::V9;
constexpr auto kScaledFit = kiln::cuda_kernels::GeluFit::Scaled;
using sm90::Epilogue;
using sm90::Schedule;
const sm90::Variant kVariants[kNumVariants] = {{Schedule::Cooperative, 1, Epilogue::Registers},
                                               {Schedule::Cooperative, 1, Epilogue::Offload},
                                               {Schedule::Cooperative, 1, Epilogue::RegistersWholeTile},
                                               {Schedule::Pingpong, 1, Epilogue::Registers},
                                               {Schedule::Cooperative, 2, Epilogue::Offload},
                                               {Schedule::Pingpong, 2, Epilogue::Registers},
                                               {Schedule::Cooperative, 1, Epilogue::Interleaved},
                                               {Schedule::Cooperative, 1, Epilogue::RegistersUnchunked, 16, kNr9},
                                               {Schedule::Cooperative, 1, Epilogue::Registers, 16, kNr9},
                                               {Schedule::Cooperative, 1, Epilogue::RegistersUnchunked},
                                               {Schedule::Pingpong64, 1, Epilogue::Registers},
                                               {Schedule::Pingpong64, 2, Epilogue::Registers},
                                               {Schedule::Pingpong64, 1, Epilogue::RegistersWholeTile},
                                               {Schedule::Pingpong64, 2, Epilogue::RegistersWholeTile},
                                               {Schedule::Pingpong64, 1, Epilogue::Registers, 16, kShippedFit, 2},
                                               {Schedule::Pingpong64, 2, Epilogue::Registers, 16, kShippedFit, 2},
                                               {Schedule::Cooperative, 1, Epilogue::Registers, 16, kShippedFit, 2},
                                               {Schedule::Pingpong64, 1, Epilogue::Registers, 16, kShippedFit, 1, true},
                                               {Schedule::Pingpong64, 1, Epilogue::Registers, 16, kShippedFit, 1, false,
                                                true},
                                               {Schedule::Pingpong64, 1, Epilogue::Registers, 16, kDegree5},
                                               {Schedule::Cooperative, 1, Epilogue::Registers, 16, kDegree5},
                                               {Schedule::Pingpong64, 1, Epilogue::Registers, 16, kShippedFit, 1, false,
                                                false, false},
                                               {Schedule::Pingpong64, 1, Epilogue::Registers, 16, kV9Fit},
                                               {Schedule::Cooperative, 1, Epilogue::Registers, 16, kV9Fit},
                                               {Schedule::Pingpong64, 1, Epilogue::Registers, 16, kScaledFit},
                                               {Schedule::Cooperative, 1, Epilogue::Registers, 16, kScaledFit},
                                               {Schedule::Pingpong64, 1, Epilogue::Registers, 16, kShippedFit, 1, false,
                                                false, true, true},
                                               {Schedule::Cooperative, 1, Epilogue::Registers, 16, kShippedFit, 1, false,
                                                false, true, true},
                                               [] {
                                                 sm90::Variant v{Schedule::Pingpong64, 1, Epilogue::Registers};
                                                 v.force_direct = true;
                                                 return v;
                                               }()};
const char* kVariantNames[kNumVariants] = {"v5: coop 4st chunked GELU",  "coop 3st GELU offloaded",
                                           "coop 3st whole-tile staging", "pp 6st",
                                           "coop c2 3st GELU offloaded",  "pp c2 6st",
                                           "coop 3st GELU interleaved",   "v4: coop 4st unchunked deg-9",
                                           "coop 4st chunked deg-9",      "coop 4st unchunked",
                                           "pp64 5st chunked",            "pp64 c2 5st chunked",
                                           "pp64 4st whole-tile",         "pp64 c2 4st whole-tile",
                                           "pp64 5st chunked 2 in flight", "pp64 c2 5st chunked 2 in flight",
                                           "coop 4st chunked 2 in flight", "pp64 5st direct stores",
                                           "pp64 5st staged GELU",        "v7's va: pp64 5st chunked deg-5",
                                           "v7's v0: coop 4st chunked deg-5", "v9's va: pp64 5st chunked, no handoff",
                                           "v12's va: pp64 5st chunked, v9 fit", "v12's v0: coop 4st chunked, v9 fit",
                                           "va, scaled fit",              "v0, scaled fit",
                                           "v13's va: pp64, bias after the mainloop", "v13's v0: coop, bias after the mainloop",
                                           "va, stores from registers"};
/// A variant's one-character name on the command line: 0-9, then a, b, ... (-1: none).
int variant_index(char ch) {
  const int i = (ch >= '0' && ch <= '9') ? ch - '0' : (ch >= 'a' && ch <= 'z') ? 10 + (ch - 'a') : -1;
  return i < kNumVariants ? i : -1;
}
/// Variants that run at every benchmark shape and dtype (the shipped one, v4's, the v6 candidates).
bool bench_everywhere(int v) { return v == 0 || v == 7 || v >= 10; }

size_t esize(Sm90GemmType t) { return t == Sm90GemmType::TF32 ? 4 : 2; }
const char* tname(Sm90GemmType t) {
  return t == Sm90GemmType::BFloat16 ? "bf16" : t == Sm90GemmType::Float16 ? "f16" : "tf32";
}

// Host values rounded to the storage type, and their device bits.
float round_to(Sm90GemmType t, float v) {
  if (t == Sm90GemmType::BFloat16) return __bfloat162float(__float2bfloat16(v));
  if (t == Sm90GemmType::Float16) return __half2float(__float2half(v));
  return v;
}
void store_bits(Sm90GemmType t, float v, void* dst) {
  if (t == Sm90GemmType::BFloat16) {
    __nv_bfloat16 b = __float2bfloat16(v);
    std::memcpy(dst, &b, 2);
  } else if (t == Sm90GemmType::Float16) {
    __half h = __float2half(v);
    std::memcpy(dst, &h, 2);
  } else {
    std::memcpy(dst, &v, 4);
  }
}
float load_bits(Sm90GemmType t, const void* src) {
  if (t == Sm90GemmType::BFloat16) {
    __nv_bfloat16 b;
    std::memcpy(&b, src, 2);
    return __bfloat162float(b);
  }
  if (t == Sm90GemmType::Float16) {
    __half h;
    std::memcpy(&h, src, 2);
    return __half2float(h);
  }
  float f;
  std::memcpy(&f, src, 4);
  return f;
}

/// A random row-major matrix [rows, ld] (values in the first `cols` columns), rounded to t.
struct HostMatrix {
  int64_t rows = 0, cols = 0, ld = 0;
  std::vector<float> values;        // rounded, [rows, cols]
  std::vector<unsigned char> bits;  // device image, [rows, ld]
};
HostMatrix random_matrix(Sm90GemmType t, int64_t rows, int64_t cols, int64_t ld, float scale, std::mt19937_64& rng) {
  HostMatrix h{rows, cols, ld, std::vector<float>(static_cast<size_t>(rows * cols)),
               std::vector<unsigned char>(static_cast<size_t>(rows * ld) * esize(t), 0)};
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = round_to(t, dist(rng));
      h.values[r * cols + c] = v;
      store_bits(t, v, h.bits.data() + (r * ld + c) * esize(t));
    }
  return h;
}

void* to_device(const std::vector<unsigned char>& bytes) {
  void* p = nullptr;
  CK(cudaMalloc(&p, std::max<size_t>(bytes.size(), 16)));
  CK(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return p;
}

struct Case {
  Sm90GemmType type;
  int64_t m, n, k;
  bool bias, pre;
  int64_t pad_out = 0;  // ldo = n + pad_out; the padding must stay poisoned
};

/// Runs one case through `variant` (-1: the public dispatch) and compares with float64.
bool run_case(const Case& c, int variant, std::mt19937_64& rng, double* worst) {
  const size_t es = esize(c.type);
  const HostMatrix x = random_matrix(c.type, c.m, c.k, c.k, 1.0f, rng);
  const HostMatrix w = random_matrix(c.type, c.n, c.k, c.k, std::sqrt(3.0f / static_cast<float>(c.k)), rng);
  const HostMatrix b = random_matrix(c.type, 1, c.n, c.n, 0.5f, rng);
  void* dx = to_device(x.bits);
  void* dw = to_device(w.bits);
  void* db = c.bias ? to_device(b.bits) : nullptr;
  const int64_t ldo = c.n + c.pad_out;
  const size_t out_bytes = static_cast<size_t>(c.m * ldo) * es;
  void *dout = nullptr, *dpre = nullptr;
  CK(cudaMalloc(&dout, out_bytes));
  CK(cudaMemset(dout, 0xFF, out_bytes));  // NaN in every type: unwritten elements show
  if (c.pre) {
    CK(cudaMalloc(&dpre, out_bytes));
    CK(cudaMemset(dpre, 0xFF, out_bytes));
  }
  Sm90LinearGeluArgs a;
  a.type = c.type;
  a.m = c.m, a.n = c.n, a.k = c.k;
  a.x = dx, a.ldx = c.k, a.w = dw, a.ldw = c.k, a.bias = db;
  a.out = dout, a.ldo = ldo, a.pre = dpre, a.ldp = ldo;
  const bool supported = sm90::kernel_accepts(a);  // the size threshold aside: edge shapes are small
  bool ok = supported;
  if (!supported) std::printf("  NOT SUPPORTED ");
  if (supported) {
    if (variant < 0)
      kiln::cuda_kernels::sm90_linear_gelu(a, nullptr);
    else
      sm90::launch_variant(a, nullptr, kVariants[variant]);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
  }
  std::vector<unsigned char> out(out_bytes), pre(c.pre ? out_bytes : 0);
  CK(cudaMemcpy(out.data(), dout, out_bytes, cudaMemcpyDeviceToHost));
  if (c.pre) CK(cudaMemcpy(pre.data(), dpre, out_bytes, cudaMemcpyDeviceToHost));
  // Every element of [m, n] written (no NaN left), the padding untouched (still NaN).
  int64_t unwritten = 0, padding_written = 0;
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t col = 0; col < ldo; ++col) {
      const size_t off = static_cast<size_t>(r * ldo + col) * es;
      const bool nan_out = std::isnan(load_bits(c.type, out.data() + off));
      const bool nan_pre = c.pre && std::isnan(load_bits(c.type, pre.data() + off));
      if (col < c.n)
        unwritten += (nan_out ? 1 : 0) + (nan_pre ? 1 : 0);
      else
        padding_written += (nan_out ? 0 : 1) + (c.pre && !nan_pre ? 1 : 0);
    }
  // float64 reference on all rows, or on a sample of rows (tile edges included) when large.
  std::vector<int64_t> rows;
  const double work = static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
  if (work <= 4e8) {
    for (int64_t r = 0; r < c.m; ++r) rows.push_back(r);
  } else {
    for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{127}, int64_t{128}, int64_t{255},
                      int64_t{256}, c.m / 2, c.m - 2, c.m - 1})
      if (r >= 0 && r < c.m) rows.push_back(r);
    std::uniform_int_distribution<int64_t> pick(0, c.m - 1);
    while (rows.size() < 48) rows.push_back(pick(rng));
  }
  double err2_out = 0, ref2_out = 0, err2_pre = 0, ref2_pre = 0;
#pragma omp parallel for reduction(+ : err2_out, ref2_out, err2_pre, ref2_pre) schedule(dynamic)
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t r = rows[i];
    for (int64_t col = 0; col < c.n; ++col) {
      double s = c.bias ? b.values[col] : 0.0;
      const float* xr = &x.values[r * c.k];
      const float* wr = &w.values[col * c.k];
      for (int64_t kk = 0; kk < c.k; ++kk) s += static_cast<double>(xr[kk]) * wr[kk];
      const double g = 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0)));
      const size_t off = static_cast<size_t>(r * ldo + col) * es;
      const double got = load_bits(c.type, out.data() + off);
      err2_out += (got - g) * (got - g);
      ref2_out += g * g;
      if (c.pre) {
        const double gp = load_bits(c.type, pre.data() + off);
        err2_pre += (gp - s) * (gp - s);
        ref2_pre += s * s;
      }
    }
  }
  const double rel_out = std::sqrt(err2_out / std::max(ref2_out, 1e-300));
  const double rel_pre = c.pre ? std::sqrt(err2_pre / std::max(ref2_pre, 1e-300)) : 0.0;
  const double tol = c.type == Sm90GemmType::TF32 ? 2e-3 : 1e-2;
  ok = ok && unwritten == 0 && padding_written == 0 && rel_out <= tol && rel_pre <= tol && std::isfinite(rel_out);
  *worst = std::max({*worst, rel_out, rel_pre});
  std::printf(
      "%s %-4s M=%-5lld N=%-5lld K=%-5lld bias=%d pre=%d pad=%lld  rel_out=%.2e rel_pre=%.2e unwritten=%lld "
      "padding_written=%lld rows=%zu\n",
      ok ? "ok  " : "FAIL", tname(c.type), static_cast<long long>(c.m), static_cast<long long>(c.n),
      static_cast<long long>(c.k), c.bias, c.pre, static_cast<long long>(c.pad_out), rel_out, rel_pre,
      static_cast<long long>(unwritten), static_cast<long long>(padding_written), rows.size());
  std::fflush(stdout);
  for (void* p : {dx, dw, db, dout, dpre})
    if (p != nullptr) CK(cudaFree(p));
  return ok;
}

/// Calls supported() must decline (TMA strides, alignment, empty sizes).
int check_declines() {
  int failures = 0;
  void* buf = nullptr;
  CK(cudaMalloc(&buf, 1 << 20));
  auto expect_no = [&](const char* what, Sm90LinearGeluArgs a) {
    const bool s = sm90::kernel_accepts(a);
    std::printf("%s declines %s\n", s ? "FAIL" : "ok  ", what);
    failures += s ? 1 : 0;
  };
  Sm90LinearGeluArgs base;
  base.m = 64, base.n = 64, base.k = 64, base.x = buf, base.ldx = 64, base.w = buf, base.ldw = 64;
  base.out = static_cast<char*>(buf) + 65536, base.ldo = 64;
  std::printf("%s kernel accepts the base call\n", sm90::kernel_accepts(base) ? "ok  " : "FAIL");
  failures += sm90::kernel_accepts(base) ? 0 : 1;
  {
    // The public query adds the size threshold: 256 x 4096 outputs no, 1024 x 4096 yes.
    Sm90LinearGeluArgs small = base, large = base;
    small.m = 256, small.n = 4096, large.m = 1024, large.n = 4096;
    small.ldo = large.ldo = 4096;
    const bool s = kiln::cuda_kernels::sm90_linear_gelu_supported(small);
    const bool l = kiln::cuda_kernels::sm90_linear_gelu_supported(large);
    std::printf("%s supported(): 256 x 4096 %d (want 0), 1024 x 4096 %d (want 1)\n", (!s && l) ? "ok  " : "FAIL", s, l);
    failures += (!s && l) ? 0 : 1;
  }
  Sm90LinearGeluArgs a = base;
  a.k = 7, a.ldx = 7, a.ldw = 7;
  expect_no("bf16 K=7 (row stride 14 bytes)", a);
  a = base, a.type = Sm90GemmType::TF32, a.k = 6, a.ldx = 6, a.ldw = 6;
  expect_no("tf32 K=6 (row stride 24 bytes)", a);
  a = base, a.x = static_cast<char*>(buf) + 2;
  expect_no("x not 16-byte aligned", a);
  a = base, a.w = static_cast<char*>(buf) + 8;
  expect_no("w not 16-byte aligned", a);
  a = base, a.m = 0;
  expect_no("M=0", a);
  a = base, a.k = 0;
  expect_no("K=0", a);
  a = base, a.ldo = 32;
  expect_no("ldo < N", a);
  a = base, a.m = int64_t{1} << 32;
  expect_no("M=2^32", a);
  CK(cudaFree(buf));
  return failures;
}

int correct(const std::string& what) {
  std::mt19937_64 rng(20261117);
  int failures = 0;
  double worst = 0;
  // "dispatch": the public entry; "vN": variant N on the variant list; "fullN": variant N on
  // the dispatch's list (what a switch of the dispatch to N must pass).
  const bool full = what.rfind("full", 0) == 0;
  const int variant = what == "dispatch" ? -1 : variant_index(what.back());
  if (what != "dispatch" && variant < 0) {
    std::printf("RESULT correctness %s: no such variant\n", what.c_str());
    return 1;
  }
  std::printf("== correctness: %s%s\n", variant < 0 ? "public dispatch" : kVariantNames[variant],
              full ? " (dispatch case list)" : "");
  const int64_t edge[] = {1, 7, 127, 1000, 4095, 4097};
  if (variant < 0 || full) {
    if (variant < 0) failures += check_declines();
    for (Sm90GemmType t : {Sm90GemmType::BFloat16, Sm90GemmType::Float16, Sm90GemmType::TF32}) {
      int i = 0;
      for (int64_t m : edge)
        for (int64_t n : edge) {
          const int64_t k = (i % 3 == 0) ? 64 : (i % 3 == 1) ? 136 : 1000;
          failures +=
              run_case({t, m, n, k, i % 2 == 0, i % 4 < 2, (i % 5 == 0) ? 8 : 0}, variant, rng, &worst) ? 0 : 1;
          ++i;
        }
      const int64_t k_small = t == Sm90GemmType::TF32 ? 4 : 8;
      for (Case c : {Case{t, 4095, 4097, 4096, true, true}, Case{t, 1000, 127, 4096, true, false},
                     Case{t, 127, 1000, 4104, false, true}, Case{t, 7, 7, k_small, true, true},
                     Case{t, 1, 1, k_small, false, false}, Case{t, 4097, 4095, k_small, true, true},
                     Case{t, 2048, 2048, 2048, true, true, 8}, Case{t, 4500, 4700, 520, true, false},
                     Case{t, 4500, 4700, 264, false, true, 8}})
        failures += run_case(c, variant, rng, &worst) ? 0 : 1;
    }
  } else {
    const Sm90GemmType t = Sm90GemmType::BFloat16;
    for (Case c :
         {Case{t, 1000, 1000, 1000, true, true}, Case{t, 4097, 4095, 136, true, true, 8},
          Case{t, 127, 7, 64, false, false}, Case{t, 1, 4097, 1000, true, false}, Case{t, 4096, 4096, 512, true, true},
          Case{t, 257, 513, 4096, false, true}, Case{t, 129, 129, 8, true, true}, Case{t, 4097, 4104, 136, true, true},
          Case{t, 127, 8, 64, true, false}, Case{t, 1, 1000, 1000, false, true}, Case{t, 200, 72, 8, true, true}})
      failures += run_case(c, variant, rng, &worst) ? 0 : 1;
    for (Case c : {Case{Sm90GemmType::TF32, 1000, 1000, 1000, true, true},
                   Case{Sm90GemmType::Float16, 1000, 1000, 1000, true, true}})
      failures += run_case(c, variant, rng, &worst) ? 0 : 1;
  }
  std::printf("RESULT correctness %s: %d failures, worst rel. error %.2e\n", what.c_str(), failures, worst);
  return failures == 0 ? 0 : 1;
}

int sanitize(const std::vector<int>& variants) {
  std::mt19937_64 rng(7);
  int failures = 0;
  double worst = 0;
  for (int v : variants) {
    failures += run_case({Sm90GemmType::BFloat16, 200, 304, 200, true, true}, v, rng, &worst) ? 0 : 1;
    failures += run_case({Sm90GemmType::BFloat16, 200, 300, 200, true, true, 8}, v, rng, &worst) ? 0 : 1;
    failures += run_case({Sm90GemmType::TF32, 130, 260, 36, true, false}, v, rng, &worst) ? 0 : 1;
  }
  // More tiles than SMs: the interleaved GELU defers a tile's GELU to the next mainloop; the
  // ping-pong consumers take turns over several tiles each.
  for (int v : variants)
    if (v == 6 || v >= 10)
      failures += run_case({Sm90GemmType::BFloat16, 1100, 4700, 72, true, true}, v, rng, &worst) ? 0 : 1;
  failures += run_case({Sm90GemmType::Float16, 1, 7, 8, false, true}, -1, rng, &worst) ? 0 : 1;
  std::printf("RESULT sanitize-run: %d failures\n", failures);
  return failures == 0 ? 0 : 1;
}

// ---- benchmark: bench, profile, abtest, once ----------------------------------------------

#include "sm90_linear_gelu_timing.cuh"

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "probe") return 0;  // the binary loads on this machine
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, cc %d.%d, %d SMs, L2 %d MB\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  if (mode == "correct" && argc > 2) return correct(argv[2]);
  // A list of variants: their one-character names (0-9, a, b, ...), anything else separates;
  // "none" is the empty list (its letters name variants n, o and e).
  auto variant_list = [&](const char* fallback) {
    std::vector<int> variants;
    const std::string list = argc > 2 ? argv[2] : fallback;
    if (list == "none") return variants;
    for (char ch : list)
      if (variant_index(ch) >= 0) variants.push_back(variant_index(ch));
    return variants;
  };
  if (mode == "sanitize") return sanitize(variant_list("0,1,2,3,4,5,6,7,8,9,a,b,c,d,e,f,g,h,i"));
  if (mode == "bench") return bench(variant_list("0,1,2,3,4,5"));
  if (mode == "gelu") return kiln_bench::gelu_fast_every_value();
  if (mode == "profile") return profile(variant_list("0,a"));
  if (mode == "abtest") return abtest(variant_list("0,a"));
  if (mode == "once" && argc > 3 && variant_index(argv[2][0]) >= 0) return once(variant_index(argv[2][0]), std::atoi(argv[3]));
  std::fprintf(stderr,
               "usage: %s correct <dispatch|v0..v9|va..vr|full0..fullr> | sanitize [0,1,...,r] | gelu | bench "
               "[0,1,...,j] | profile [0,a,...] | once <v> <skip>\n",
               argv[0]);
  return 2;
}
