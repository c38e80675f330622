// The CPU GEMM's two oneDNN tile kernels (ops/cpu/onednn_matmul.h): the matmul primitive and
// sgemm (the bias added after it, and the older order, summed into the tile filled with the
// bias), each forced in turn, on the same tiles: exact against a float64 reference written here
// (inputs are random multiples of 1/8, so every summation order gives the reference), with a
// bias, alpha, beta, a NaN-filled output under beta = 0, both operand orientations, operands
// sgemm cannot read (the primitive takes them); the same bits on every call and on every
// thread; sgemm's failure as a clear kiln::Error that loses nothing; and the rule that picks
// the kernel when none is forced.
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ops/cpu/gemm_tiled.h"
#include "ops/cpu/onednn_matmul.h"
#include "onednn_tiles.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// A row-major [rows, cols] float matrix of eighths stored either way: element (r, c) at
// r * cols + c, or (transposed storage) at c * rows + r.
struct Stored {
  std::vector<float> data;
  int64_t rows, cols;
  bool transposed;
  double at(int64_t r, int64_t c) const { return data[transposed ? c * rows + r : r * cols + c]; }
  cpu::FloatOperand operand() const {
    return transposed ? cpu::FloatOperand{data.data(), 1, rows} : cpu::FloatOperand{data.data(), cols, 1};
  }
};

Stored stored_eighths(int64_t rows, int64_t cols, bool transposed) {
  const std::vector<double> v = values(random_eighths({rows * cols}, kFloat32));
  return {std::vector<float>(v.begin(), v.end()), rows, cols, transposed};
}

// out (row stride ldo) = alpha * a @ b + (bias ? bias : beta * c), in float64.
std::vector<double> reference(const Stored& a, const Stored& b, double alpha, const std::vector<float>* bias,
                              double beta, const std::vector<float>& c, int64_t ldo) {
  const int64_t M = a.rows, K = a.cols, N = b.cols;
  std::vector<double> r(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += a.at(i, k) * b.at(k, j);
      const double base = bias ? (*bias)[j] : beta == 0.0 ? 0.0 : beta * c[i * ldo + j];
      r[i * N + j] = base + alpha * acc;
    }
  return r;
}

// The tile's M x N values out of an output with row stride ldo.
std::vector<double> tile_values(const std::vector<float>& out, int64_t M, int64_t N, int64_t ldo) {
  std::vector<double> v;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) v.push_back(out[i * ldo + j]);
  return v;
}

}  // namespace

TEST_CASE("the oneDNN tile kernels: primitive and sgemm exact against float64, with bias, alpha, beta and NaN") {
  if (!onednn_tiles()) {
    MESSAGE("SKIPPED: this build's CPU GEMM has no oneDNN tiles (KILN_ONEDNN off or libdnnl missing)");
    return;
  }
  manual_seed(181);
  // A small tile and a larger one, off every block size; the output is a tile of a wider
  // matrix (row stride ldo > N), as gemm_tiled's tiles are.
  for (const auto& [M, K, N] : std::vector<std::array<int64_t, 3>>{{37, 129, 75}, {517, 523, 515}}) {
    const int64_t ldo = N + 9;
    for (int la = 0; la < 2; ++la)
      for (int lb = 0; lb < 2; ++lb) {
        const Stored a = stored_eighths(M, K, la == 1), b = stored_eighths(K, N, lb == 1);
        const std::vector<double> bias_values = values(random_eighths({N}, kFloat32));
        const std::vector<float> bias(bias_values.begin(), bias_values.end());
        const std::vector<double> c_values = values(random_eighths({M * ldo}, kFloat32));
        const std::vector<float> c(c_values.begin(), c_values.end());
        struct Case {
          float alpha, beta;
          bool with_bias;
        };
        for (const Case& cs : {Case{1.0f, 0.0f, true}, Case{1.0f, 0.0f, false}, Case{2.0f, 0.0f, false},
                               Case{0.5f, 1.5f, false}, Case{1.0f, 1.0f, false}})
          for (cpu::OnednnTileKernel kernel : cpu::kOnednnTileKernels) {
            INFO("M K N ", M, " ", K, " ", N, ", a ", la ? "transposed" : "row-major", ", b ",
                 lb ? "transposed" : "row-major", ", alpha ", cs.alpha, " beta ", cs.beta, " bias ", cs.with_bias,
                 ", kernel ", cpu::onednn_tile_kernel_name(kernel));
            const cpu::ScopedOnednnTileKernel forced(kernel);
            // beta = 0 must not read the output: it starts as NaN then.
            std::vector<float> out = cs.beta == 0.0f ? std::vector<float>(c.size(), std::nanf("")) : c;
            cpu::onednn_matmul_tile(out.data(), ldo, a.operand(), b.operand(), M, N, K, cs.alpha, cs.beta,
                                    cs.with_bias ? bias.data() : nullptr);
            check_close(from_vector<double>(tile_values(out, M, N, ldo)).reshape({M, N}),
                        reference(a, b, cs.alpha, cs.with_bias ? &bias : nullptr, cs.beta, c, ldo), {M, N},
                        Tolerance{0, 0});
            // The columns past the tile are untouched.
            bool outside_kept = true;
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = N; j < ldo; ++j) {
                const float want = cs.beta == 0.0f ? std::nanf("") : c[i * ldo + j];
                const float got = out[i * ldo + j];
                if (!(std::isnan(want) ? std::isnan(got) : got == want)) outside_kept = false;
              }
            CHECK(outside_kept);
          }
      }
  }
}

TEST_CASE("the oneDNN tile kernels: operands sgemm cannot read take the primitive; the same bits on every thread") {
  if (!onednn_tiles()) {
    MESSAGE("SKIPPED: this build's CPU GEMM has no oneDNN tiles (KILN_ONEDNN off or libdnnl missing)");
    return;
  }
  manual_seed(182);
  const cpu::ScopedOnednnTileKernel forced(cpu::OnednnTileKernel::Sgemm);
  // a read as every other column of a wider buffer: neither stride is 1, so sgemm cannot take it.
  const int64_t M = 45, K = 70, N = 33;
  const std::vector<double> wide_values = values(random_eighths({M * 2 * K}, kFloat32));
  const std::vector<float> wide(wide_values.begin(), wide_values.end());
  Stored a{std::vector<float>(static_cast<size_t>(M * K)), M, K, false};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) a.data[i * K + k] = wide[i * 2 * K + 2 * k];
  const Stored b = stored_eighths(K, N, true);
  std::vector<float> out(static_cast<size_t>(M * N));
  cpu::onednn_matmul_tile(out.data(), N, {wide.data(), 2 * K, 2}, b.operand(), M, N, K, 1.0f, 0.0f, nullptr);
  check_close(from_vector<double>(tile_values(out, M, N, N)).reshape({M, N}),
              reference(a, b, 1.0, nullptr, 0.0, out, N), {M, N}, Tolerance{0, 0});

  // Continuous positive values (the rounding depends on the summation order; no cancellation,
  // so float32's relative tolerance applies): the same bits on a second call and on another
  // thread, for each kernel, and within the tolerance of float64.
  const int64_t M2 = 530, K2 = 600, N2 = 520;
  const Tensor x = random({M2, K2}, kFloat32, 0.0, 1.0), w = random({N2, K2}, kFloat32, 0.0, 1.0);
  const Tensor bias = random({N2}, kFloat32, 0.0, 1.0);
  const std::vector<double> want = reference_linear(x, w, bias);
  for (cpu::OnednnTileKernel kernel : cpu::kOnednnTileKernels) {
    INFO("kernel ", cpu::onednn_tile_kernel_name(kernel));
    const cpu::ScopedOnednnTileKernel force(kernel);
    std::vector<float> first(static_cast<size_t>(M2 * N2)), second(first.size()), other(first.size());
    const auto run = [&](std::vector<float>& o) {
      cpu::onednn_matmul_tile(o.data(), N2, {x.data_ptr<float>(), K2, 1}, {w.data_ptr<float>(), 1, K2}, M2, N2, K2,
                              1.0f, 0.0f, bias.data_ptr<float>());
    };
    run(first);
    run(second);
    std::thread t([&] { run(other); });
    t.join();
    CHECK(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(first.data(), other.data(), first.size() * sizeof(float)) == 0);
    check_close(from_vector<float>(first).reshape({M2, N2}), want, {M2, N2});
  }
}

TEST_CASE("the oneDNN tile kernels: sgemm failing is a clear error, and nothing is lost") {
  if (!onednn_tiles()) {
    MESSAGE("SKIPPED: this build's CPU GEMM has no oneDNN tiles (KILN_ONEDNN off or libdnnl missing)");
    return;
  }
  manual_seed(183);
  const cpu::ScopedOnednnTileKernel forced(cpu::OnednnTileKernel::Sgemm);
  const int64_t M = 41, K = 77, N = 59;
  const Tensor x = random_eighths({M, K}, kFloat32), w = random_eighths({N, K}, kFloat32);
  const Tensor bias = random_eighths({N}, kFloat32);
  const Tensor x0 = x.clone(), w0 = w.clone(), bias0 = bias.clone();
  Tensor out = full({M, N}, 3.0, kFloat32);
  cpu::onednn_matmul_inject_fault_for_testing(cpu::OnednnFault::Sgemm);
  const std::string message = error_message([&] {
    cpu::onednn_matmul_tile(out.data_ptr<float>(), N, {x.data_ptr<float>(), K, 1}, {w.data_ptr<float>(), 1, K}, M, N,
                            K, 1.0f, 0.0f, bias.data_ptr<float>());
  });
  CHECK(message.find("matmul: oneDNN's sgemm failed") != std::string::npos);
  CHECK(message.find("41x59x77 tile") != std::string::npos);
  CHECK(message.find("strides a 77x1, b 1x77, out 59") != std::string::npos);
  // The inputs are intact, and the next call (through linear, end to end) works.
  CHECK(values(x) == values(x0));
  CHECK(values(w) == values(w0));
  CHECK(values(bias) == values(bias0));
  check_close(linear(x, w, bias), reference_linear(x, w, bias), {M, N}, Tolerance{0, 0});
}

TEST_CASE("the oneDNN tile kernel rule: sgemm only for tiles of 1024 x 1024 x 1024 and more, and only on Intel CPUs") {
  cpu::onednn_matmul_force_kernel_for_testing(std::nullopt);
  for (const auto& [M, N, K] : std::vector<std::array<int64_t, 3>>{
           {64, 4096, 1024}, {64, 1024, 4096}, {512, 512, 512}, {1023, 4096, 4096}, {4096, 1023, 4096},
           {4096, 4096, 1023}, {1, 1, 1}})
    CHECK(cpu::onednn_tile_kernel(M, N, K) == cpu::OnednnTileKernel::Matmul);
#if defined(__x86_64__) || defined(__i386__)
  const bool intel = __builtin_cpu_is("intel");
#else
  const bool intel = false;
#endif
  const bool has_sgemm = onednn_tiles() && intel;
  for (const auto& [M, N, K] :
       std::vector<std::array<int64_t, 3>>{{1024, 1024, 1024}, {1024, 4096, 1024}, {1024, 1024, 4096}})
    CHECK(cpu::onednn_tile_kernel(M, N, K) ==
          (has_sgemm ? cpu::OnednnTileKernel::Sgemm : cpu::OnednnTileKernel::Matmul));
  // Forcing overrides the rule, and nullopt restores it.
  cpu::onednn_matmul_force_kernel_for_testing(cpu::OnednnTileKernel::Sgemm);
  if (onednn_tiles()) CHECK(cpu::onednn_tile_kernel(64, 64, 64) == cpu::OnednnTileKernel::Sgemm);
  cpu::onednn_matmul_force_kernel_for_testing(std::nullopt);
  CHECK(cpu::onednn_tile_kernel(64, 64, 64) == cpu::OnednnTileKernel::Matmul);
}
