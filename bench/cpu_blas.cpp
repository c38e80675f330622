// Which library should do Kiln's CPU GEMM? Times linear's product out[M, N] = x[M, K] @
// w[N, K]^T in float32 with Kiln (linear with a bias, and mm without), Eigen called directly
// on the same buffers, and the BLAS libraries Debian packages (OpenBLAS, BLIS, oneDNN's
// sgemm), side by side at the same thread count (OMP_NUM_THREADS, or --threads). The
// libraries are opened at run time (dlopen), so this benchmark builds and runs without them
// and reports the ones that are missing; Kiln itself never links them. Each library's result
// is compared with Kiln's, and each is run twice to see whether it repeats its own bits.
// --cblas PATH adds any other library that exports cblas_sgemm (e.g. PyTorch's libtorch_cpu.so,
// whose MKL is the GEMM PyTorch's CPU linear runs), so it is timed in the same process.
// "onednn +bias" is oneDNN's sgemm as a bias-carrying tile would run it: the bias written
// into the output first, then sgemm with beta = 1. "kiln linear" runs Kiln's rule for the
// oneDNN tile kernel (ops/cpu/onednn_matmul.h); "kiln linear prim", "kiln linear sgemm" and
// "kiln linear sgemm 1st" force the matmul primitive, sgemm (the bias added after it) and sgemm
// summing into the tile filled with the bias on every tile.
//
//   cpu_blas [--shapes 64x1024x4096,1024x1024x4096] [--threads n] [--repeats 9] [--cblas PATH ...]
#include <dlfcn.h>
#include <kiln/kiln.h>

#include <Eigen/Core>
#include <cstring>
#include <iterator>
#include <sstream>

#include "bench/bench_util.h"
#include "ops/cpu/gemm_tiled.h"
#include "ops/cpu/onednn_matmul.h"

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace kiln;

namespace {

// CBLAS enum values (cblas.h): row-major 101, no transpose 111, transpose 112.
using CblasSgemm = void (*)(int order, int transa, int transb, int m, int n, int k, float alpha, const float* a,
                            int lda, const float* b, int ldb, float beta, float* c, int ldc);
using SetThreads = void (*)(int);
// dnnl_sgemm (dnnl.h): row-major, transposes as 'N'/'T', returns a dnnl_status_t (0 = success).
using DnnlSgemm = int (*)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// One BLAS opened at run time: its out = x @ w^T, or null when the library is not installed.
struct Library {
  std::string name;
  std::function<void(const float* x, const float* w, float* out, int64_t m, int64_t k, int64_t n)> gemm;
};

void* open_first(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

// A library named on the command line that exports cblas_sgemm (and maybe MKL's thread setter).
void add_cblas(std::vector<Library>& libs, const std::string& path, int threads) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  auto sgemm = h ? reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm")) : nullptr;
  if (!sgemm) {
    fmt::print("--cblas {}: {}\n", path, h ? "no cblas_sgemm in it" : dlerror());
    return;
  }
  if (auto set = reinterpret_cast<SetThreads>(dlsym(h, "MKL_Set_Num_Threads"))) set(threads);
  const std::string base = path.substr(path.find_last_of('/') + 1);
  libs.push_back({"cblas " + base.substr(0, base.find('.')),
                  [sgemm](const float* x, const float* w, float* out, int64_t m, int64_t k, int64_t n) {
                    sgemm(101, 111, 112, int(m), int(n), int(k), 1.0f, x, int(k), w, int(k), 0.0f, out, int(n));
                  }});
}

std::vector<Library> open_libraries(int threads, const std::vector<std::string>& extra_cblas) {
  std::vector<Library> libs;
  for (const std::string& path : extra_cblas) add_cblas(libs, path, threads);
  if (void* h = open_first({"libopenblas.so.0", "libopenblas.so"})) {
    auto sgemm = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
    if (auto set = reinterpret_cast<SetThreads>(dlsym(h, "openblas_set_num_threads"))) set(threads);
    if (auto core = reinterpret_cast<const char* (*)()>(dlsym(h, "openblas_get_corename")))
      fmt::print("OpenBLAS kernels: {}\n", core());
    if (sgemm)
      libs.push_back({"openblas", [sgemm](const float* x, const float* w, float* out, int64_t m, int64_t k, int64_t n) {
                        sgemm(101, 111, 112, int(m), int(n), int(k), 1.0f, x, int(k), w, int(k), 0.0f, out, int(n));
                      }});
  } else {
    fmt::print("OpenBLAS: not installed (apt-get install libopenblas-dev)\n");
  }
  if (void* h = open_first({"libblis.so.4", "libblis.so"})) {
    auto sgemm = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
    if (auto set = reinterpret_cast<SetThreads>(dlsym(h, "bli_thread_set_num_threads"))) set(threads);
    auto arch_id = reinterpret_cast<int (*)()>(dlsym(h, "bli_arch_query_id"));
    auto arch_name = reinterpret_cast<const char* (*)(int)>(dlsym(h, "bli_arch_string"));
    if (arch_id && arch_name) fmt::print("BLIS kernels: {}\n", arch_name(arch_id()));
    if (sgemm)
      libs.push_back({"blis", [sgemm](const float* x, const float* w, float* out, int64_t m, int64_t k, int64_t n) {
                        sgemm(101, 111, 112, int(m), int(n), int(k), 1.0f, x, int(k), w, int(k), 0.0f, out, int(n));
                      }});
  } else {
    fmt::print("BLIS: not installed (apt-get install libblis-dev)\n");
  }
  if (void* h = open_first({"libdnnl.so.2", "libdnnl.so.3", "libdnnl.so"})) {
    if (auto sgemm = reinterpret_cast<DnnlSgemm>(dlsym(h, "dnnl_sgemm"))) {
      libs.push_back({"onednn", [sgemm](const float* x, const float* w, float* out, int64_t m, int64_t k, int64_t n) {
                        sgemm('N', 'T', m, n, k, 1.0f, x, k, w, k, 0.0f, out, n);
                      }});
      libs.push_back({"onednn +bias", [sgemm](const float* x, const float* w, float* out, int64_t m, int64_t k,
                                              int64_t n) {
                        // zeros stand in for the bias rows (the same stores), so the result still
                        // compares with Kiln's mm
                        for (int64_t i = 0; i < m; ++i) std::fill(out + i * n, out + (i + 1) * n, 0.0f);
                        sgemm('N', 'T', m, n, k, 1.0f, x, k, w, k, 1.0f, out, n);
                      }});
      // Kiln's tile grid with oneDNN's kernel: threads take whole tiles, oneDNN runs
      // sequentially inside each (it does not nest inside an OpenMP region).
      libs.push_back({"onednn tiled", [sgemm](const float* x, const float* w, float* out, int64_t m, int64_t k,
                                              int64_t n) {
                        const cpu::TileGrid g = cpu::gemm_tile_grid<float>(m, n, k, omp_get_max_threads());
                        const int64_t tiles = g.rows.count * g.cols.count;
#pragma omp parallel for schedule(static)
                        for (int64_t t = 0; t < tiles; ++t) {
                          const int64_t r = t / g.cols.count, c = t % g.cols.count;
                          const int64_t i0 = g.rows.begin(r), j0 = g.cols.begin(c);
                          sgemm('N', 'T', g.rows.begin(r + 1) - i0, g.cols.begin(c + 1) - j0, k, 1.0f, x + i0 * k, k,
                                w + j0 * k, k, 0.0f, out + i0 * n + j0, n);
                        }
                      }});
    }
  } else {
    fmt::print("oneDNN: not installed (apt-get install libdnnl-dev)\n");
  }
  return libs;
}

double max_abs_diff(const float* a, const float* b, int64_t n) {
  double d = 0;
  for (int64_t i = 0; i < n; ++i) d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::array<int64_t, 3>> shapes = {{64, 1024, 4096}, {1024, 1024, 4096}};
  int repeats = 9;
  int threads = 1;
  std::vector<std::string> extra_cblas;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--shapes") == 0 && i + 1 < argc) {
      shapes.clear();
      std::stringstream ss(argv[++i]);
      for (std::string tok; std::getline(ss, tok, ',');) {
        std::array<int64_t, 3> s{};
        KILN_CHECK(std::sscanf(tok.c_str(), "%ldx%ldx%ld", &s[0], &s[1], &s[2]) == 3,
                   "cpu_blas: --shapes wants MxKxN[,MxKxN...], got '{}'", tok);
        shapes.push_back(s);
      }
    } else if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::stoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::stoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--cblas") == 0 && i + 1 < argc) {
      extra_cblas.push_back(argv[++i]);
    }
  }
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
  fmt::print("cpu_blas: float32 out[M, N] = x[M, K] @ w[N, K]^T, {}, {} thread(s)\n", bench::machine_description(),
             threads);
  fmt::print("Kiln's CPU GEMM: {}\n", cpu::gemm_backend());
  const std::vector<Library> libs = open_libraries(threads, extra_cblas);
  fmt::print("median ms of {} rounds after one warm-up, the variants taking turns; GFLOP/s = 2MNK / time;\n"
             "'repeats' says whether a second call gave the same bits; diff = max |x - Kiln mm|\n\n",
             repeats);
  manual_seed(0);
  for (const auto& [m, k, n] : shapes) {
    const Tensor x = randn({m, k}), w = randn({n, k}), bias = randn({n});
    const Tensor wt = w.t();
    Tensor lin, prod;
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const RowMajor> ex(x.data_ptr<float>(), m, k), ew(w.data_ptr<float>(), n, k);
    RowMajor eout(m, n);
    bench::Turns turns;
    turns.add("kiln linear", 1, [&] { lin = linear(x, w, bias); });
    // Each oneDNN tile kernel forced, labelled short for the table (cpu::kOnednnTileKernels' order).
    constexpr int kForced = static_cast<int>(std::size(cpu::kOnednnTileKernels));
    Tensor lin_forced[kForced];
    const char* forced_names[kForced] = {"kiln linear prim", "kiln linear sgemm", "kiln linear sgemm 1st"};
    const auto forced_linear = [&](int f) {
      const cpu::ScopedOnednnTileKernel forced(cpu::kOnednnTileKernels[f]);
      return linear(x, w, bias);
    };
    for (int f = 0; f < kForced; ++f) turns.add(forced_names[f], 1, [&, f] { lin_forced[f] = forced_linear(f); });
    turns.add("kiln mm", 1, [&] { prod = mm(x, wt); });
    turns.add("eigen", 1, [&] { eout.noalias() = ex * ew.transpose(); });
    std::vector<std::vector<float>> outs(libs.size(), std::vector<float>(static_cast<size_t>(m * n)));
    for (size_t l = 0; l < libs.size(); ++l)
      turns.add(libs[l].name, 1, [&, l] { libs[l].gemm(x.data_ptr<float>(), w.data_ptr<float>(), outs[l].data(), m, k, n); });
    turns.run(repeats);
    const double flops = 2.0 * static_cast<double>(m) * n * k;
    fmt::print("M={} K={} N={}\n{:>18}  {:>9}  {:>9}  {:>8}  {:>9}\n", m, k, n, "variant", "ms", "GFLOP/s", "repeats",
               "diff");
    const float* ref = prod.data_ptr<float>();
    // diff: got against `against` (default: Kiln's mm).
    auto row = [&](const std::string& name, const float* got, bool repeats_bits, const float* against = nullptr) {
      const double s = turns.median_ns(name) * 1e-9;
      fmt::print("{:>18}  {:>9.3f}  {:>9.1f}  {:>8}  {:>9.2e}\n", name, s * 1e3, flops / s / 1e9,
                 repeats_bits ? "yes" : "NO", got ? max_abs_diff(got, against ? against : ref, m * n) : 0.0);
    };
    {
      const Tensor again = linear(x, w, bias);
      row("kiln linear", nullptr, std::memcmp(again.data_ptr(), lin.data_ptr(), size_t(m * n) * 4) == 0);
      for (int f = 0; f < kForced; ++f) {  // diff against Kiln's own linear (all carry the bias)
        const Tensor forced_again = forced_linear(f);
        row(forced_names[f], lin_forced[f].data_ptr<float>(),
            std::memcmp(forced_again.data_ptr(), lin_forced[f].data_ptr(), size_t(m * n) * 4) == 0,
            lin.data_ptr<float>());
      }
      const Tensor again_mm = mm(x, wt);
      row("kiln mm", nullptr, std::memcmp(again_mm.data_ptr(), ref, size_t(m * n) * 4) == 0);
      RowMajor e2(m, n);
      e2.noalias() = ex * ew.transpose();
      row("eigen", eout.data(), std::memcmp(e2.data(), eout.data(), size_t(m * n) * 4) == 0);
    }
    for (size_t l = 0; l < libs.size(); ++l) {
      std::vector<float> again(static_cast<size_t>(m * n));
      libs[l].gemm(x.data_ptr<float>(), w.data_ptr<float>(), again.data(), m, k, n);
      row(libs[l].name, outs[l].data(), again == outs[l]);
    }
    fmt::print("\n");
  }
  return 0;
}
