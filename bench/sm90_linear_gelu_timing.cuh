// The timing half of the sm_90a linear+GELU harness (bench/sm90_linear_gelu_check.cu, which
// includes this file inside its anonymous namespace, after the variant table and the correctness
// checks it shares with it): CUDA-event medians against cuBLASLt at every benchmark shape
// (`bench`), the in-kernel clock profile (`profile`), the interleaved target-shape comparison
// (`abtest`, the power-capped card's clock drift spread over every contender alike) and the
// two-launch mode for ncu (`once`). Split from the checks to keep each file one concern.
#pragma once

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

template <typename T>
__global__ void gelu_inplace_kernel(T* p, int64_t n) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i + 8 <= n) {
    uint4 v = *reinterpret_cast<uint4*>(p + i);
    T* e = reinterpret_cast<T*>(&v);
#pragma unroll
    for (int j = 0; j < 8; ++j) e[j] = static_cast<T>(kiln::cuda_kernels::gelu_fast<T>(static_cast<float>(e[j])));
    *reinterpret_cast<uint4*>(p + i) = v;
  } else {
    for (int64_t j = i; j < n; ++j) p[j] = static_cast<T>(kiln::cuda_kernels::gelu_fast<T>(static_cast<float>(p[j])));
  }
}
__global__ void gelu_inplace_f32(float* p, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = 0.5f * p[i] * (1.0f + erff(p[i] * 0.70710678f));
}

/// Median per-call GPU time (µs) of `call(i)` over `reps` launches, queued behind a spin kernel.
template <typename F>
double median_us(F call, int reps, cudaStream_t s) {
  for (int i = 0; i < 5; ++i) call(i);
  CK(cudaStreamSynchronize(s));
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  spin_kernel<<<1, 1, 0, s>>>(4'000'000);
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(ev[2 * i], s));
    call(i);
    CK(cudaEventRecord(ev[2 * i + 1], s));
  }
  CK(cudaStreamSynchronize(s));
  std::vector<float> t(reps);
  for (int i = 0; i < reps; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  for (auto& e : ev) CK(cudaEventDestroy(e));
  std::sort(t.begin(), t.end());
  return 1000.0 * t[reps / 2];
}

struct LtGemm {
  cublasLtHandle_t h = nullptr;
  void* ws = nullptr;
  size_t ws_bytes = 64 << 20;
  LtGemm() {
    LT(cublasLtCreate(&h));
    CK(cudaMalloc(&ws, ws_bytes));
  }
  /// D [m, n] row-major = epilogue(x [m, k] w [n, k]^T (+ bias)), as the column-major
  /// D^T [n, m] = op(w) x^T.
  struct Plan {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
  };
  Plan plan(Sm90GemmType t, int64_t m, int64_t n, int64_t k, cublasLtEpilogue_t epi, const void* bias) {
    Plan p{};
    const cudaDataType_t dt = t == Sm90GemmType::BFloat16  ? CUDA_R_16BF
                              : t == Sm90GemmType::Float16 ? CUDA_R_16F
                                                           : CUDA_R_32F;
    const cublasComputeType_t ct = t == Sm90GemmType::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    LT(cublasLtMatmulDescCreate(&p.op, ct, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias != nullptr)
      LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    LT(cublasLtMatrixLayoutCreate(&p.la, dt, k, n, k));
    LT(cublasLtMatrixLayoutCreate(&p.lb, dt, k, m, k));
    LT(cublasLtMatrixLayoutCreate(&p.lc, dt, n, m, n));
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                            sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(h, p.op, p.la, p.lb, p.lc, p.lc, pref, 1, &r, &found));
    if (found == 0) {
      std::fprintf(stderr, "cuBLASLt: no algorithm\n");
      std::exit(2);
    }
    p.algo = r.algo;
    LT(cublasLtMatmulPreferenceDestroy(pref));
    return p;
  }
  void run(const Plan& p, const void* w, const void* x, void* d, cudaStream_t s) {
    const float alpha = 1.0f, beta = 0.0f;
    LT(cublasLtMatmul(h, p.op, &alpha, w, p.la, x, p.lb, &beta, d, p.lc, d, p.lc, &p.algo, ws, ws_bytes, s));
  }
};

int bench(const std::vector<int>& variants) {
  LtGemm lt;
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  struct Shape {
    int64_t m, k, n;
    Sm90GemmType t;
  };
  const Shape shapes[] = {{4096, 1024, 4096, Sm90GemmType::BFloat16}, {8192, 4096, 16384, Sm90GemmType::BFloat16},
                          {64, 1024, 4096, Sm90GemmType::BFloat16},   {256, 1024, 4096, Sm90GemmType::BFloat16},
                          {1024, 1024, 4096, Sm90GemmType::BFloat16}, {2048, 1024, 4096, Sm90GemmType::BFloat16},
                          {1024, 4096, 4096, Sm90GemmType::BFloat16}, {4096, 4096, 1024, Sm90GemmType::BFloat16},
                          {4096, 1024, 4096, Sm90GemmType::Float16},  {4096, 1024, 4096, Sm90GemmType::TF32},
                          {8192, 4096, 16384, Sm90GemmType::TF32}};
  std::vector<std::string> table;
  // SM90_BENCH_SHAPES=targets: the two target shapes only.
  const char* only = std::getenv("SM90_BENCH_SHAPES");
  const bool targets_only = only != nullptr && std::string(only) == "targets";
  for (const Shape& sh : shapes) {
    if (targets_only && !(sh.t == Sm90GemmType::BFloat16 && (sh.m == 8192 || (sh.m == 4096 && sh.k == 1024))))
      continue;
    const size_t es = esize(sh.t);
    const size_t xw_bytes = static_cast<size_t>((sh.m + sh.n) * sh.k) * es;
    const int sets = static_cast<int>(std::clamp<size_t>((256u << 20) / xw_bytes + 1, 4, 16));
    std::vector<void*> xs(sets), ws(sets);
    std::mt19937_64 rng(99);
    std::vector<unsigned char> host(static_cast<size_t>(std::max(sh.m, sh.n) * sh.k) * es);
    for (int i = 0; i < sets; ++i) {
      for (size_t j = 0; j < host.size(); j += es)
        store_bits(sh.t, std::uniform_real_distribution<float>(-1, 1)(rng) * 0.05f, &host[j]);
      CK(cudaMalloc(&xs[i], static_cast<size_t>(sh.m * sh.k) * es));
      CK(cudaMalloc(&ws[i], static_cast<size_t>(sh.n * sh.k) * es));
      CK(cudaMemcpy(xs[i], host.data(), static_cast<size_t>(sh.m * sh.k) * es, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(ws[i], host.data(), static_cast<size_t>(sh.n * sh.k) * es, cudaMemcpyHostToDevice));
    }
    void *bias = nullptr, *out = nullptr, *pre = nullptr;
    CK(cudaMalloc(&bias, static_cast<size_t>(sh.n) * es));
    CK(cudaMemcpy(bias, host.data(), static_cast<size_t>(sh.n) * es, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&out, static_cast<size_t>(sh.m * sh.n) * es));
    CK(cudaMalloc(&pre, static_cast<size_t>(sh.m * sh.n) * es));
    const double flops = 2.0 * static_cast<double>(sh.m) * static_cast<double>(sh.n) * static_cast<double>(sh.k);
    const int reps = flops > 1e11 ? 60 : 200;
    char label[96];
    std::snprintf(label, sizeof label, "%s M=%lld K=%lld N=%lld (%d sets)", tname(sh.t), static_cast<long long>(sh.m),
                  static_cast<long long>(sh.k), static_cast<long long>(sh.n), sets);
    auto row = [&](const char* what, double us, double base) {
      char line[200];
      std::snprintf(line, sizeof line, "%-40s %-28s %9.2f us %7.1f TFLOP/s  x%.3f vs Lt+bias", label, what, us,
                    flops / us * 1e-6, us / base);
      table.push_back(line);
      std::printf("%s\n", line);
      std::fflush(stdout);
    };
    const auto plain = lt.plan(sh.t, sh.m, sh.n, sh.k, CUBLASLT_EPILOGUE_DEFAULT, nullptr);
    const auto with_bias = lt.plan(sh.t, sh.m, sh.n, sh.k, CUBLASLT_EPILOGUE_BIAS, bias);
    const double t_plain = median_us([&](int i) { lt.run(plain, ws[i % sets], xs[i % sets], out, s); }, reps, s);
    const double t_bias = median_us([&](int i) { lt.run(with_bias, ws[i % sets], xs[i % sets], out, s); }, reps, s);
    row("cuBLASLt GEMM", t_plain, t_bias);
    row("cuBLASLt GEMM+bias", t_bias, t_bias);
    if (sh.t != Sm90GemmType::TF32) {
      const auto gelu_tanh = lt.plan(sh.t, sh.m, sh.n, sh.k, CUBLASLT_EPILOGUE_GELU_BIAS, bias);
      row("cuBLASLt GEMM+GELU_BIAS(tanh)",
          median_us([&](int i) { lt.run(gelu_tanh, ws[i % sets], xs[i % sets], out, s); }, reps, s), t_bias);
    }
    const int64_t count = sh.m * sh.n;
    auto gelu_after = [&](int i) {
      lt.run(with_bias, ws[i % sets], xs[i % sets], out, s);
      if (sh.t == Sm90GemmType::BFloat16)
        gelu_inplace_kernel<<<static_cast<unsigned>((count / 8 + 255) / 256 + 1), 256, 0, s>>>(
            static_cast<__nv_bfloat16*>(out), count);
      else if (sh.t == Sm90GemmType::Float16)
        gelu_inplace_kernel<<<static_cast<unsigned>((count / 8 + 255) / 256 + 1), 256, 0, s>>>(
            static_cast<__half*>(out), count);
      else
        gelu_inplace_f32<<<static_cast<unsigned>((count + 255) / 256), 256, 0, s>>>(static_cast<float*>(out), count);
    };
    row("cuBLASLt GEMM+bias, GELU kernel", median_us(gelu_after, reps, s), t_bias);
    Sm90LinearGeluArgs a;
    a.type = sh.t, a.m = sh.m, a.n = sh.n, a.k = sh.k, a.ldx = sh.k, a.ldw = sh.k, a.bias = bias, a.out = out,
    a.ldo = sh.n;
    auto ours = [&](const sm90::Variant* v, bool with_pre) {
      return [&, v, with_pre](int i) {
        Sm90LinearGeluArgs b = a;
        b.x = xs[i % sets], b.w = ws[i % sets];
        if (with_pre) b.pre = pre, b.ldp = sh.n;
        if (v == nullptr)
          kiln::cuda_kernels::sm90_linear_gelu(b, s);
        else
          sm90::launch_variant(b, s, *v);
      };
    };
    a.x = xs[0], a.w = ws[0];
    if (!sm90::kernel_accepts(a)) {
      std::printf("%s: not supported\n", label);
      continue;
    }
    row(kiln::cuda_kernels::sm90_linear_gelu_supported(a) ? "Kiln sm90 (dispatch)" : "Kiln sm90 (below threshold)",
        median_us(ours(nullptr, false), reps, s), t_bias);
    row("Kiln sm90 (dispatch) +pre", median_us(ours(nullptr, true), reps, s), t_bias);
    for (int v : variants) {
      if (sh.t != Sm90GemmType::BFloat16 && !bench_everywhere(v)) continue;
      row(kVariantNames[v], median_us(ours(&kVariants[v], false), reps, s), t_bias);
    }
    const bool target = sh.t == Sm90GemmType::BFloat16 && (sh.m == 8192 || (sh.m == 4096 && sh.k == 1024));
    if (target)
      for (int v : variants) {
        if (!bench_everywhere(v)) continue;
        for (int skip : {1, 2}) {
          sm90::Variant var = kVariants[v];
          var.bench_skip = skip;
          char name[64];
          std::snprintf(name, sizeof name, "%s %s", kVariantNames[v], skip == 1 ? "no GELU" : "no epilogue");
          row(name, median_us(ours(&var, false), reps, s), t_bias);
        }
        sm90::Variant var = kVariants[v];
        char name[64];
        std::snprintf(name, sizeof name, "%s +pre", kVariantNames[v]);
        row(name, median_us(ours(&var, true), reps, s), t_bias);
      }
    if (sh.m == 8192 && sh.t == Sm90GemmType::BFloat16)
      for (int v : variants) {
        if (v != 0 && v < 10) continue;
        for (int g : {8, 32}) {
          sm90::Variant var = kVariants[v];
          var.group_m = g;
          char name[64];
          std::snprintf(name, sizeof name, "%s group %d", kVariantNames[v], g);
          row(name, median_us(ours(&var, false), reps, s), t_bias);
        }
      }
    for (int i = 0; i < sets; ++i) CK(cudaFree(xs[i])), CK(cudaFree(ws[i]));
    for (void* p : {bias, out, pre}) CK(cudaFree(p));
  }
  std::printf("\n==== summary (median of CUDA-event times; ratios against cuBLASLt GEMM+bias) ====\n");
  for (const auto& l : table) std::printf("%s\n", l.c_str());
  return 0;
}

/// Rotating input sets of one benchmark shape (bf16), bias and output.
struct ShapeBuffers {
  int64_t m = 0, k = 0, n = 0;
  int sets = 0;
  std::vector<void*> xs, ws;
  void *bias = nullptr, *out = nullptr;
  ShapeBuffers(int64_t m_, int64_t k_, int64_t n_) : m(m_), k(k_), n(n_) {
    const size_t es = 2;
    const size_t xw_bytes = static_cast<size_t>((m + n) * k) * es;
    sets = static_cast<int>(std::clamp<size_t>((256u << 20) / xw_bytes + 1, 2, 8));
    std::mt19937_64 rng(5);
    std::vector<unsigned char> host(static_cast<size_t>(std::max(m, n) * k) * es);
    for (size_t j = 0; j < host.size(); j += es)
      store_bits(Sm90GemmType::BFloat16, std::uniform_real_distribution<float>(-1, 1)(rng) * 0.05f, &host[j]);
    for (int i = 0; i < sets; ++i) {
      // Each set a rotation of the same random values (distinct bytes per set, one RNG pass).
      const size_t shift = static_cast<size_t>(i) * 4096 * es % host.size();
      std::vector<unsigned char> h(host.begin() + static_cast<std::ptrdiff_t>(shift), host.end());
      h.insert(h.end(), host.begin(), host.begin() + static_cast<std::ptrdiff_t>(shift));
      void *x = nullptr, *w = nullptr;
      CK(cudaMalloc(&x, static_cast<size_t>(m * k) * es));
      CK(cudaMalloc(&w, static_cast<size_t>(n * k) * es));
      CK(cudaMemcpy(x, h.data(), static_cast<size_t>(m * k) * es, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(w, h.data(), static_cast<size_t>(n * k) * es, cudaMemcpyHostToDevice));
      xs.push_back(x), ws.push_back(w);
    }
    CK(cudaMalloc(&bias, static_cast<size_t>(n) * es));
    CK(cudaMemcpy(bias, host.data(), static_cast<size_t>(n) * es, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&out, static_cast<size_t>(m * n) * es));
  }
  ~ShapeBuffers() {
    for (void* p : xs) (void)cudaFree(p);
    for (void* p : ws) (void)cudaFree(p);
    (void)cudaFree(bias), (void)cudaFree(out);
  }
  Sm90LinearGeluArgs args(int i) const {
    Sm90LinearGeluArgs a;
    a.type = Sm90GemmType::BFloat16, a.m = m, a.n = n, a.k = k, a.ldx = k, a.ldw = k, a.bias = bias, a.out = out;
    a.ldo = n, a.x = xs[i % sets], a.w = ws[i % sets];
    return a;
  }
};

/// Median of x (0 when empty).
inline double median_of(std::vector<double> x) {
  if (x.empty()) return 0.0;
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

/// CTA `cta`'s bench_timing counters (sm90::kTimingSlots of them) in the copy `h`.
inline const unsigned long long* cta_timing(const std::vector<unsigned long long>& h, int cta) {
  return &h[static_cast<size_t>(cta) * sm90::kTimingSlots];
}

/// Tiles CTA `cta`'s two consumers finished (timing slots 7 and 13).
inline unsigned long long cta_tiles(const std::vector<unsigned long long>& h, int cta) {
  const unsigned long long* t = cta_timing(h, cta);
  return t[7] + t[13];
}

/// The last tile's epilogue in the CTAs with the most tiles (they set the kernel's time): per
/// tail slot (sm90::kTailSlots says which is which), the median cycles after the owner's last
/// mainloop (slot 0), "-" where nothing stamped it.
struct TailLine {
  unsigned long long tiles = 0;  ///< the most tiles any CTA ran
  std::string cells;             ///< " slot:cycles" per slot
};
inline TailLine tail_line(const std::vector<unsigned long long>& h, const std::vector<unsigned long long>& ht,
                          int sms) {
  unsigned long long most = 0;
  for (int cta = 0; cta < sms; ++cta) most = std::max(most, cta_tiles(h, cta));
  std::string line;
  for (int slot = 1; slot < sm90::kTailSlots; ++slot) {
    std::vector<double> d;
    for (int cta = 0; cta < sms; ++cta) {
      const unsigned long long* q = &ht[static_cast<size_t>(cta) * sm90::kTailSlots];
      if (cta_tiles(h, cta) != most || q[0] == 0 || q[slot] == 0) continue;
      d.push_back(static_cast<double>(static_cast<long long>(q[slot] - q[0])));
    }
    char cell[32];
    if (d.empty()) std::snprintf(cell, sizeof cell, " %d:-", slot);
    else std::snprintf(cell, sizeof cell, " %d:%.0f", slot, median_of(d));
    line += cell;
  }
  return {most, line};
}

/// The in-kernel profile (KernelParams::bench_timing) of each variant at the two target shapes:
/// after 30 launches in a row (the card in its steady state under this load), one instrumented
/// launch; per CTA the SM clock (clock64 over globaltimer) and, per consumer tile, the cycles of
/// the mainloop (turn granted to last wgmma done), the epilogue and the wait for the turn; then
/// (v11, KernelParams::bench_tail) the stamps inside the last tile's epilogue as TAIL lines.
int profile(const std::vector<int>& variants) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned long long* timing = nullptr;
  const size_t slots = static_cast<size_t>(sms) * sm90::kTimingSlots;
  CK(cudaMalloc(&timing, slots * sizeof(unsigned long long)));
  std::vector<unsigned long long> h(slots);
  // v11: stamps inside the last tile's epilogue (sm90::kTailSlots per CTA).
  unsigned long long* tail = nullptr;
  const size_t tail_slots = static_cast<size_t>(sms) * sm90::kTailSlots;
  CK(cudaMalloc(&tail, tail_slots * sizeof(unsigned long long)));
  std::vector<unsigned long long> ht(tail_slots);
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{4096, 1024, 4096}, {8192, 4096, 16384}}) {
    ShapeBuffers b(m, k, n);
    const int warm = m == 8192 ? 12 : 40;
    for (int v : variants) {
      for (int skip : {0, 1, 2, 3, 4, 5}) {
        sm90::Variant var = kVariants[v];
        var.bench_skip = skip;
        const char* modes[] = {"full", "no GELU", "no epilogue", "tanh GELU", "no stores", "bias only"};
        const char* mode = modes[skip];
        for (int i = 0; i < warm; ++i) sm90::launch_variant(b.args(i), s, var);
        CK(cudaMemsetAsync(timing, 0, slots * sizeof(unsigned long long), s));
        CK(cudaMemsetAsync(tail, 0, tail_slots * sizeof(unsigned long long), s));
        var.bench_timing = timing;
        var.bench_tail = tail;
        CK(cudaEventRecord(e0, s));
        sm90::launch_variant(b.args(warm), s, var);
        CK(cudaEventRecord(e1, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaGetLastError());
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        CK(cudaMemcpy(h.data(), timing, slots * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(ht.data(), tail, tail_slots * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        std::vector<double> mhz, total;
        double mainloop = 0, epi = 0, turn = 0, tiles = 0;
        for (int cta = 0; cta < sms; ++cta) {
          const unsigned long long* t = cta_timing(h, cta);
          if (t[0] == 0 || cta_tiles(h, cta) == 0) continue;
          const unsigned long long end_clk = std::max(t[5], t[11]), end_ns = std::max(t[6], t[12]);
          total.push_back(static_cast<double>(end_clk - t[0]));
          mhz.push_back(static_cast<double>(end_clk - t[0]) / static_cast<double>(end_ns - t[1]) * 1000.0);
          for (int c = 0; c < 2; ++c) {
            mainloop += static_cast<double>(t[2 + 6 * c]), epi += static_cast<double>(t[3 + 6 * c]);
            turn += static_cast<double>(t[4 + 6 * c]), tiles += static_cast<double>(t[7 + 6 * c]);
          }
        }
        const double kmax = *std::max_element(total.begin(), total.end());
        std::printf(
            "PROFILE M=%lld K=%lld N=%lld %-30s %-11s %8.2f us  SM clock median %6.0f MHz (min %6.0f)  CTA cycles "
            "median %8.0f max %8.0f  per consumer tile: mainloop %7.0f  epilogue %6.0f  turn wait %7.0f cycles "
            "(%.1f tiles per consumer)\n",
            static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n), kVariantNames[v],
            mode, 1000.0 * ms, median_of(mhz),
            *std::min_element(mhz.begin(), mhz.end()), median_of(total), kmax, mainloop / tiles, epi / tiles, turn / tiles,
            tiles / (2.0 * static_cast<double>(total.size())));
        const TailLine tail = tail_line(h, ht, sms);
        std::printf("TAIL M=%lld K=%lld N=%lld %-30s %-11s cycles after the last mainloop (median over %llu-tile CTAs):%s\n",
                    static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n), kVariantNames[v],
                    mode, tail.tiles, tail.cells.c_str());
        std::fflush(stdout);
      }
    }
  }
  CK(cudaFree(timing));
  CK(cudaFree(tail));
  return 0;
}

/// The bf16 shapes abtest runs: the two targets, or those of ABTEST_SHAPES ("MxKxN,MxKxN,...").
std::vector<std::tuple<int64_t, int64_t, int64_t>> abtest_shapes() {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes;
  const char* list = std::getenv("ABTEST_SHAPES");
  for (const char* p = list; p != nullptr && *p != '\0';) {
    long long m = 0, k = 0, n = 0;
    int used = 0;
    if (std::sscanf(p, "%lldx%lldx%lld%n", &m, &k, &n, &used) != 3 || m <= 0 || k <= 0 || n <= 0) {
      std::fprintf(stderr, "ABTEST_SHAPES: want MxKxN[,MxKxN...], got '%s'\n", p);
      std::exit(2);
    }
    shapes.emplace_back(m, k, n);
    p += used;
    if (*p == ',') ++p;
  }
  if (shapes.empty()) shapes = {{4096, 1024, 4096}, {8192, 4096, 16384}};
  return shapes;
}

/// The target shapes (or ABTEST_SHAPES) with cuBLASLt (plain, +bias), the dispatch and
/// `variants` taking turns: rounds of 10 timed launches per contender, so that the clock of the
/// power-capped card, which drifts over a run, weighs on every contender alike; the median of
/// each one's launches.
int abtest(const std::vector<int>& variants) {
  LtGemm lt;
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  for (auto [m, k, n] : abtest_shapes()) {
    ShapeBuffers b(m, k, n);
    const auto plain = lt.plan(Sm90GemmType::BFloat16, m, n, k, CUBLASLT_EPILOGUE_DEFAULT, nullptr);
    const auto with_bias = lt.plan(Sm90GemmType::BFloat16, m, n, k, CUBLASLT_EPILOGUE_BIAS, b.bias);
    std::vector<std::string> names = {"cuBLASLt GEMM", "cuBLASLt GEMM+bias", "Kiln sm90 (dispatch)"};
    for (int v : variants) names.push_back(kVariantNames[v]);
    std::vector<std::vector<float>> times(names.size());
    const int rounds = m * n * k >= (int64_t{1} << 38) ? 8 : 20, per_round = 10;
    std::vector<cudaEvent_t> ev(2 * per_round);
    for (auto& e : ev) CK(cudaEventCreate(&e));
    int counter = 0;
    for (int r = 0; r < rounds; ++r) {
      for (size_t c = 0; c < names.size(); ++c) {
        auto call = [&](int i) {
          if (c == 0) lt.run(plain, b.ws[i % b.sets], b.xs[i % b.sets], b.out, s);
          else if (c == 1) lt.run(with_bias, b.ws[i % b.sets], b.xs[i % b.sets], b.out, s);
          else if (c == 2) kiln::cuda_kernels::sm90_linear_gelu(b.args(i), s);
          else sm90::launch_variant(b.args(i), s, kVariants[variants[c - 3]]);
        };
        call(counter++);  // one untimed launch: the previous contender's tail out of the way
        for (int i = 0; i < per_round; ++i) {
          CK(cudaEventRecord(ev[2 * i], s));
          call(counter++);
          CK(cudaEventRecord(ev[2 * i + 1], s));
        }
        CK(cudaStreamSynchronize(s));
        for (int i = 0; i < per_round; ++i) {
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
          times[c].push_back(1000.0f * ms);
        }
      }
    }
    CK(cudaGetLastError());
    for (auto& e : ev) CK(cudaEventDestroy(e));
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    std::vector<double> med(names.size());
    for (size_t c = 0; c < names.size(); ++c) {
      std::sort(times[c].begin(), times[c].end());
      med[c] = times[c][times[c].size() / 2];
    }
    for (size_t c = 0; c < names.size(); ++c)
      std::printf("ABTEST M=%lld K=%lld N=%lld %-30s %9.2f us (p10 %9.2f, p90 %9.2f) %6.1f TFLOP/s  x%.3f vs Lt+bias  "
                  "%.3f of Lt plain's TFLOP/s\n",
                  static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n), names[c].c_str(),
                  med[c], times[c][times[c].size() / 10], times[c][times[c].size() * 9 / 10], flops / med[c] * 1e-6,
                  med[c] / med[1], med[0] / med[c]);
    std::fflush(stdout);
  }
  return 0;
}

/// Two launches of one variant at (4096, 1024, 4096) (ncu profiles the second).
int once(int v, int skip) {
  ShapeBuffers b(4096, 1024, 4096);
  sm90::Variant var = kVariants[v];
  var.bench_skip = skip;
  for (int i = 0; i < 2; ++i) sm90::launch_variant(b.args(i), nullptr, var);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  return 0;
}
