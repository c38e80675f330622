// A probe, not Kiln's GEMM: float32 GEMM tiles on Intel AMX's bfloat16 unit through a
// three-part split, timed against Kiln's own one-thread linear (oneDNN's sgemm on these
// shapes on Intel), to see whether AMX can take issue 17's one-thread 1024-row rows clearly
// under MKL. Measured on eight H200 hosts (BENCHMARKS.md 9, 2026-12-04, twenty-first
// session): it cannot there; the kernel took 1.3-3.1 times sgemm's time. Kept so the figures
// can be rerun on other CPUs (Granite Rapids, a host without a hypervisor).
//
// The method. A float32 x in [2^-50, 2^51) (or zero) is exactly x0 + x1 + x2, three bfloat16
// values of 8 significant bits (x0 = bf16(x), x1 = bf16(x - x0), x2 = x - x0 - x1), and
//   a b = a0 b0 + (a0 b1 + a1 b0) + (a0 b2 + a1 b1 + a2 b0) + (terms below 2^-23 |a b|),
// float32's unit roundoff being 2^-24. The kernel computes those six products with AMX's
// TDPBF16PS (bfloat16 products are exact in float32) into two accumulators per 16 x 16 output
// tile: "hi" takes a0 b0 only, "lo" the five small ones, so the large sum is rounded once per
// product as in a float32 FMA GEMM; every 128 of K both are added into the output (which
// holds the bias first). Both operands are split and packed whole first (AMX's tile layouts:
// A as 16 x 32 bfloat16 tiles, B in pairs of k per row), then the output goes by in 256 x 256
// blocks, 16 x 32 at a time (four tiles in registers, two A parts, one B part for two tiles).
// Outside the exact range the tile says so and a float32 kernel would run instead.
//
// What it measured (one thread): a 16 x 16 x 32 bfloat16 tile product at 8-40 ns by host (the
// unit's rate in these VMs, tiles in L1), so six of them cost 50-240 ns against AVX-512
// float32's 86-150 ns for the same 8192 multiply-adds; splitting and packing both operands
// about 20% of sgemm's time; the output's adds after each 128 of K ~0.3 ns per element.
// Accuracy: the split's largest error against float64 was 0.3-0.6 times sgemm's on the same data.
//
//   amx_split_probe [--repeats 9]     timings and accuracy on this CPU (says so when it has no AMX)
//   amx_split_probe --check           the split against float64 only (CTest runs this)
//
// Both modes first check the split against float64 on small products, in scalar code with
// the same layout and order (any CPU: the packing and blocking stay exercised) and on AMX.
#include <kiln/kiln.h>

#include "bench/bench_util.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define KILN_PROBE_X86 1
#define KILN_AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))
#endif

namespace {

// A strided float operand: element (r, c) is data[r * row_stride + c * col_stride].
struct FloatOperand {
  const float* data;
  int64_t row_stride, col_stride;
};

constexpr int64_t kTileValues = 512;  // bfloat16 values in a 16 x 64-byte tile

constexpr int64_t kStepK = 32;        // k per k-step (a tile row holds 32 bfloat16)
constexpr int64_t kRowsPerBlock = 16;  // output rows per amx::block
constexpr int64_t kColsPerBlock = 32;  // output columns per amx::block (two tiles)
constexpr int64_t kStepsPerChunk = 4;       // k-steps summed in the tiles before they go to the output
constexpr int64_t kRowBlocksPerPanel = 16;  // 256 rows of output per L2 block
constexpr int64_t kColBlocksPerPanel = 8;   // 256 columns

uint32_t bits_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// The split is exact for zero and for 2^-50 <= |x| < 2^51 (biased exponents 77..177).
constexpr uint32_t kMinBiasedExponent = 127 - 50, kMaxBiasedExponent = 127 + 50;

// x rounded to bfloat16, to nearest even (x finite).
uint16_t bf16_nearest(uint32_t u) { return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16); }
float float_of_bf16(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }

int64_t round_up(int64_t n, int64_t unit) { return (n + unit - 1) / unit * unit; }

// Splits 32 consecutive floats into their three parts; returns whether all were in range.
// (Plain loops over fixed 32: the compiler vectorises them.)
bool split32(const float* src, uint16_t* p0, uint16_t* p1, uint16_t* p2) {
  uint32_t bad = 0;
  for (int i = 0; i < 32; ++i) {
    const uint32_t u = bits_of(src[i]);
    const uint32_t e = (u >> 23) & 0xFF;
    bad |= static_cast<uint32_t>((u & 0x7FFFFFFFu) != 0 && (e < kMinBiasedExponent || e > kMaxBiasedExponent));
    const uint16_t h0 = bf16_nearest(u);
    const float r1 = src[i] - float_of_bf16(h0);
    const uint16_t h1 = bf16_nearest(bits_of(r1));
    const float r2 = r1 - float_of_bf16(h1);
    p0[i] = h0;
    p1[i] = h1;
    p2[i] = bf16_nearest(bits_of(r2));
  }
  return bad == 0;
}

// Gathers up to 32 values of an operand (element i at src[i * stride], `count` of them, the
// rest zeros) into a contiguous run for split32.
void gather32(const float* src, int64_t stride, int64_t count, float* run) {
  for (int64_t i = 0; i < 32; ++i) run[i] = i < count ? src[i * stride] : 0.0f;
}

// Packs a (rows x K) into A panels: per 16-row strip, per k-step, three 16 x 32 tiles.
// Rows and k past the operand are zeros. Returns whether every element was in range.
bool pack_a(const FloatOperand& a, int64_t rows, int64_t K, uint16_t* dst) {
  const int64_t strips = round_up(rows, kRowsPerBlock) / kRowsPerBlock, steps = round_up(K, kStepK) / kStepK;
  bool exact = true;
  alignas(64) float run[32];
  for (int64_t s = 0; s < strips; ++s)
    for (int64_t t = 0; t < steps; ++t) {
      uint16_t* tiles = dst + (s * steps + t) * 3 * kTileValues;
      const int64_t k0 = t * kStepK, count = std::min(kStepK, K - k0);
      for (int64_t r = 0; r < kRowsPerBlock; ++r) {
        const int64_t i = s * kRowsPerBlock + r;
        // (a pointer into the operand only for its own rows)
        const float* src = i < rows ? a.data + i * a.row_stride + k0 * a.col_stride : nullptr;
        if (i >= rows) std::fill(run, run + 32, 0.0f);
        else if (a.col_stride != 1 || count < kStepK) gather32(src, a.col_stride, count, run);
        uint16_t* row = tiles + r * kStepK;
        exact &= split32(i < rows && a.col_stride == 1 && count == kStepK ? src : run, row, row + kTileValues,
                         row + 2 * kTileValues);
      }
    }
  return exact;
}

// Packs b (K x cols) into B panels: per 32-column strip, per k-step, six tiles (b0c0 b0c1
// b1c0 b1c1 b2c0 b2c1), row r of a tile holding k = 2r and 2r + 1 for each of its 16 columns.
bool pack_b(const FloatOperand& b, int64_t K, int64_t cols, uint16_t* dst) {
  const int64_t strips = round_up(cols, kColsPerBlock) / kColsPerBlock, steps = round_up(K, kStepK) / kStepK;
  bool exact = true;
  alignas(64) float run[32];
  alignas(64) uint16_t parts[3][32];
  for (int64_t s = 0; s < strips; ++s)
    for (int64_t t = 0; t < steps; ++t) {
      uint16_t* tiles = dst + (s * steps + t) * 6 * kTileValues;
      const int64_t k0 = t * kStepK, kcount = std::min(kStepK, K - k0);
      const int64_t j0 = s * kColsPerBlock, jcount = std::min(kColsPerBlock, cols - j0);
      if (b.col_stride == 1) {
        // Rows of b are contiguous: split 32 columns of row k, then interleave k pairs.
        for (int64_t kk = 0; kk < kStepK; ++kk) {
          const float* src = kk < kcount ? b.data + (k0 + kk) * b.row_stride + j0 : nullptr;
          if (kk >= kcount) std::fill(run, run + 32, 0.0f);
          else if (jcount < kColsPerBlock) gather32(src, 1, jcount, run);
          exact &= split32(kk < kcount && jcount == kColsPerBlock ? src : run, parts[0], parts[1], parts[2]);
          for (int q = 0; q < 3; ++q)
            for (int64_t c = 0; c < kColsPerBlock; ++c)
              tiles[(q * 2 + c / 16) * kTileValues + (kk / 2) * 32 + (c % 16) * 2 + kk % 2] = parts[q][c];
        }
        continue;
      }
      // Columns of b (k running along them): split 32 k of column j, then store the k pairs
      // down the tile's rows.
      for (int64_t c = 0; c < kColsPerBlock; ++c) {
        const float* src = c < jcount ? b.data + k0 * b.row_stride + (j0 + c) * b.col_stride : nullptr;
        if (c >= jcount) std::fill(run, run + 32, 0.0f);
        else if (b.row_stride != 1 || kcount < kStepK) gather32(src, b.row_stride, kcount, run);
        exact &= split32(c < jcount && b.row_stride == 1 && kcount == kStepK ? src : run, parts[0], parts[1],
                         parts[2]);
        for (int q = 0; q < 3; ++q) {
          uint16_t* column = tiles + (q * 2 + c / 16) * kTileValues + (c % 16) * 2;
          for (int64_t r = 0; r < 16; ++r) std::memcpy(column + r * 32, &parts[q][2 * r], 2 * sizeof(uint16_t));
        }
      }
    }
  return exact;
}

// amx::block in scalar code: the same products into the same accumulators in the same order
// (within a product, k in order; no flushing of subnormals, which the split's range avoids).
void emulated_block(const uint16_t* a, const uint16_t* b, int64_t ksteps, float* out) {
  std::fill(out, out + 4 * 256, 0.0f);
  // (accumulator, A part, B part) in amx::block's order.
  constexpr int kProducts[6][3] = {{0, 0, 0}, {1, 1, 0}, {1, 2, 0}, {1, 0, 1}, {1, 1, 1}, {1, 0, 2}};
  for (int64_t s = 0; s < ksteps; ++s, a += 3 * kTileValues, b += 6 * kTileValues)
    for (const auto& [acc, pa, pb] : kProducts)
      for (int c = 0; c < 2; ++c) {
        const uint16_t* at = a + pa * kTileValues;
        const uint16_t* bt = b + (pb * 2 + c) * kTileValues;
        float* ct = out + (acc * 2 + c) * 256;
        for (int m = 0; m < 16; ++m)
          for (int n = 0; n < 16; ++n) {
            float sum = ct[m * 16 + n];
            for (int r = 0; r < 16; ++r) {
              sum += float_of_bf16(at[m * 32 + 2 * r]) * float_of_bf16(bt[r * 32 + 2 * n]);
              sum += float_of_bf16(at[m * 32 + 2 * r + 1]) * float_of_bf16(bt[r * 32 + 2 * n + 1]);
            }
            ct[m * 16 + n] = sum;
          }
      }
}

// out rows [i0, i0 + rows), columns [j0, j0 + cols) += hi + lo of a block's four tiles.
void add_block(float* out, int64_t ldo, int64_t rows, int64_t cols, const float* tiles) {
  if (rows == kRowsPerBlock && cols == kColsPerBlock) {
    for (int64_t r = 0; r < kRowsPerBlock; ++r)
      for (int64_t t = 0; t < 2; ++t) {
        float* dst = out + r * ldo + t * 16;
        const float* hi = tiles + t * 256 + r * 16;
        const float* lo = tiles + (2 + t) * 256 + r * 16;
        for (int n = 0; n < 16; ++n) dst[n] += hi[n] + lo[n];
      }
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * ldo + c] += tiles[(c / 16) * 256 + r * 16 + c % 16] + tiles[(2 + c / 16) * 256 + r * 16 + c % 16];
}

// A 64-byte aligned buffer (tile rows are 64 bytes), grown to the largest size asked.
class PackBuffer {
 public:
  ~PackBuffer() { std::free(data_); }
  uint16_t* get(size_t values) {
    if (values > size_) {
      const size_t bytes = (values * sizeof(uint16_t) + 63) / 64 * 64;
      void* grown = std::aligned_alloc(64, bytes);
      if (grown == nullptr) throw std::bad_alloc();
      std::free(data_);
      data_ = static_cast<uint16_t*>(grown);
      size_ = bytes / sizeof(uint16_t);
    }
    return data_;
  }
  uint16_t* data() { return data_; }

 private:
  uint16_t* data_ = nullptr;
  size_t size_ = 0;
};

// The packed operands, per thread, grown to the largest tile it ran.
thread_local PackBuffer packed_a, packed_b;

#ifdef KILN_PROBE_X86
// The AMX instructions. Tile registers: tmm0/tmm1 hi for column tiles 0 and 1, tmm2/tmm3 lo,
// tmm4/tmm5 parts of A, tmm6/tmm7 one part of B for both column tiles. Per k-step ten tile
// loads and twelve products.
namespace amx {
namespace {
// The 64-byte operand of ldtilecfg (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};
}  // namespace

KILN_AMX_TARGET void configure() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

KILN_AMX_TARGET void release() { _tile_release(); }

KILN_AMX_TARGET void block(const uint16_t* a, const uint16_t* b, int64_t ksteps, float* out) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  constexpr int64_t T = kTileValues;
  for (int64_t s = 0; s < ksteps; ++s, a += 3 * T, b += 6 * T) {
    _tile_loadd(4, a, 64);          // a0
    _tile_loadd(6, b, 64);          // b0, column tile 0
    _tile_loadd(7, b + T, 64);      // b0, column tile 1
    _tile_dpbf16ps(0, 4, 6);        // hi += a0 b0
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, a + T, 64);      // a1
    _tile_dpbf16ps(2, 5, 6);        // lo += a1 b0
    _tile_dpbf16ps(3, 5, 7);
    _tile_loadd(5, a + 2 * T, 64);  // a2
    _tile_dpbf16ps(2, 5, 6);        // lo += a2 b0
    _tile_dpbf16ps(3, 5, 7);
    _tile_loadd(6, b + 2 * T, 64);  // b1
    _tile_loadd(7, b + 3 * T, 64);
    _tile_dpbf16ps(2, 4, 6);        // lo += a0 b1
    _tile_dpbf16ps(3, 4, 7);
    _tile_loadd(5, a + T, 64);      // a1 again
    _tile_dpbf16ps(2, 5, 6);        // lo += a1 b1
    _tile_dpbf16ps(3, 5, 7);
    _tile_loadd(6, b + 4 * T, 64);  // b2
    _tile_loadd(7, b + 5 * T, 64);
    _tile_dpbf16ps(2, 4, 6);        // lo += a0 b2
    _tile_dpbf16ps(3, 4, 7);
  }
  _tile_stored(0, out, 64);
  _tile_stored(1, out + 256, 64);
  _tile_stored(2, out + 512, 64);
  _tile_stored(3, out + 768, 64);
}

}  // namespace amx
#else
namespace amx {
void configure() { std::abort(); }
void release() { std::abort(); }
void block(const uint16_t*, const uint16_t*, int64_t, float*) { std::abort(); }
}  // namespace amx
#endif

enum class AmxExecution { Hardware, Emulated };

bool amx_available() {
#ifdef KILN_PROBE_X86
  static const bool available = [] {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool tile = (edx >> 24) & 1u, bf16 = (edx >> 22) & 1u;
    if (!tile || !bf16) return false;
    // Linux hands out AMX's 8 KiB of tile state only to processes that ask (5.16 and later).
    constexpr long kArchRequestXcompPerm = 0x1023, kXfeatureTileData = 18;
    if (syscall(SYS_arch_prctl, kArchRequestXcompPerm, kXfeatureTileData) != 0) return false;
    if (!__get_cpuid_count(1, 0, &eax, &ebx, &ecx, &edx) || !((ecx >> 27) & 1u)) return false;  // OSXSAVE
    uint32_t xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    return ((xcr0_lo >> 17) & 3u) == 3u;  // XTILECFG and XTILEDATA enabled
  }();
  return available;
#else
  return false;
#endif
}

// out (mt x nt, row stride ldo) = a @ b + bias broadcast over the rows through the split, or
// false (out untouched) when an element is outside the split's exact range.
bool amx_split_gemm_tile(float* out, int64_t ldo, const FloatOperand& a, const FloatOperand& b, int64_t mt,
                         int64_t nt, int64_t K, const float* bias, AmxExecution execution) {
  if (mt <= 0 || nt <= 0 || K <= 0 || K >= (int64_t{1} << 24)) return false;
  const int64_t row_strips = round_up(mt, kRowsPerBlock) / kRowsPerBlock;
  const int64_t col_strips = round_up(nt, kColsPerBlock) / kColsPerBlock;
  const int64_t steps = round_up(K, kStepK) / kStepK;
  uint16_t* pa = packed_a.get(static_cast<size_t>(row_strips * steps * 3 * kTileValues));
  uint16_t* pb = packed_b.get(static_cast<size_t>(col_strips * steps * 6 * kTileValues));
  if (!pack_a(a, mt, K, pa) || !pack_b(b, K, nt, pb)) return false;

  for (int64_t i = 0; i < mt; ++i) std::copy(bias, bias + nt, out + i * ldo);
  const bool hardware = execution == AmxExecution::Hardware;
  if (hardware) amx::configure();
  alignas(64) float tiles[4 * 256];
  for (int64_t jc = 0; jc < col_strips; jc += kColBlocksPerPanel)
    for (int64_t ic = 0; ic < row_strips; ic += kRowBlocksPerPanel)
      for (int64_t t0 = 0; t0 < steps; t0 += kStepsPerChunk) {
        const int64_t chunk = std::min(kStepsPerChunk, steps - t0);
        for (int64_t js = jc; js < std::min(jc + kColBlocksPerPanel, col_strips); ++js) {
          const uint16_t* bp = pb + (js * steps + t0) * 6 * kTileValues;
          for (int64_t is = ic; is < std::min(ic + kRowBlocksPerPanel, row_strips); ++is) {
            const uint16_t* ap = pa + (is * steps + t0) * 3 * kTileValues;
            if (hardware) amx::block(ap, bp, chunk, tiles);
            else emulated_block(ap, bp, chunk, tiles);
            const int64_t i0 = is * kRowsPerBlock, j0 = js * kColsPerBlock;
            add_block(out + i0 * ldo + j0, ldo, std::min(kRowsPerBlock, mt - i0), std::min(kColsPerBlock, nt - j0),
                      tiles);
          }
        }
      }
  if (hardware) amx::release();
  return true;
}

// A float32 tensor of normal values times `scale`, from std's generator seeded with `seed`.
kiln::Tensor normal_tensor(const kiln::Shape& sizes, float scale, unsigned seed) {
  kiln::Tensor t = kiln::empty(sizes);
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = scale * normal(gen);
  return t;
}

// The largest |out - exact| / sum |a b| (bias included) over sampled outputs, in float64;
// b is (N, K) row-major (a linear's weight), read as its transpose.
double max_relative_error(const float* out, const float* a, const float* w, const float* bias, int64_t M, int64_t K,
                          int64_t N, int64_t row_step, int64_t col_step) {
  double worst = 0;
  for (int64_t i = 0; i < M; i += row_step)
    for (int64_t j = 0; j < N; j += col_step) {
      double sum = bias[j], scale = std::abs(bias[j]);
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(a[i * K + k]) * w[j * K + k];
        sum += p;
        scale += std::abs(p);
      }
      worst = std::max(worst, std::abs(out[i * N + j] - sum) / scale);
    }
  return worst;
}

// The split (in scalar code, or on AMX) against float64 on products off every block size,
// both orientations of b: a layout error would be O(1), the split's own below 2^-22.
bool split_check(AmxExecution execution) {
  bool ok = true;
  for (const auto& [M, K, N] : std::vector<std::array<int64_t, 3>>{{37, 129, 75}, {70, 300, 90}}) {
    const kiln::Tensor x = normal_tensor({M, K}, 1.0f, 4), w = normal_tensor({N, K}, 1.0f, 5),
                       bias = normal_tensor({N}, 1.0f, 6);
    const kiln::Tensor wt = w.t().contiguous();  // (K, N) row-major: b read along its rows
    for (bool rows : {false, true}) {
      std::vector<float> out(static_cast<size_t>(M * N), std::nanf(""));
      const FloatOperand b = rows ? FloatOperand{wt.data_ptr<float>(), N, 1} : FloatOperand{w.data_ptr<float>(), 1, K};
      const bool exact = amx_split_gemm_tile(out.data(), N, {x.data_ptr<float>(), K, 1}, b, M, N, K,
                                             bias.data_ptr<float>(), execution);
      const double err = max_relative_error(out.data(), x.data_ptr<float>(), w.data_ptr<float>(),
                                            bias.data_ptr<float>(), M, K, N, 1, 1);
      const bool pass = exact && err < std::ldexp(1.0, -22);
      ok &= pass;
      std::printf("%s (%ld,%ld,%ld) b %s: max error %.3g of sum |a b|: %s\n",
                  execution == AmxExecution::Emulated ? "emulated" : "AMX", static_cast<long>(M),
                  static_cast<long>(K), static_cast<long>(N), rows ? "rows" : "columns", err, pass ? "ok" : "FAILED");
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 9;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) repeats = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--check") == 0) check_only = true;
  }
  if (!split_check(AmxExecution::Emulated)) return 1;
  if (!amx_available()) {
    std::printf("no AMX on this CPU (or the OS refused it): timings skipped\nRESULT amx_split_probe checked\n");
    return 0;
  }
  if (!split_check(AmxExecution::Hardware)) return 1;
  if (check_only) {
    std::printf("RESULT amx_split_probe checked\n");
    return 0;
  }
  std::printf("AMX available; Kiln's linear on %s threads (OMP_NUM_THREADS), the split on one\n",
              std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "all");

  // The unit's rate: one block's twelve products over four k-steps, panels in L1.
  {
    kiln::bench::Turns turns;
    uint16_t* a = static_cast<uint16_t*>(std::aligned_alloc(64, 4 * 3 * 1024));
    uint16_t* b = static_cast<uint16_t*>(std::aligned_alloc(64, 4 * 6 * 1024));
    std::fill(a, a + 4 * 3 * 512, uint16_t{0x3f80});
    std::fill(b, b + 4 * 6 * 512, uint16_t{0x3f80});
    alignas(64) float tiles[1024];
    amx::configure();
    turns.add("block", 10000, [&] { amx::block(a, b, 4, tiles); });
    turns.run(5);
    amx::release();
    std::printf("tile product (16x16x32 bfloat16) in a block, panels in L1: %.2f ns\n", turns.median_ns("block") / 48.0);
    std::free(a);
    std::free(b);
  }

  const int64_t shapes[][3] = {{1024, 4096, 1024}, {1024, 1024, 4096}, {2048, 2048, 2048}, {64, 1024, 4096}};
  std::printf("%-20s %10s %10s %7s %9s %11s %11s\n", "(M,K,N)", "split ms", "linear ms", "ratio", "pack ms",
              "err split", "err linear");
  for (const auto& s : shapes) {
    const int64_t M = s[0], K = s[1], N = s[2];
    // Normal values from std's generator: Kiln's randn (Box-Muller in double) gives about
    // 1e-16 where its angle falls on a quarter turn exactly, a few times in millions of
    // values; outside the split's range, they would time the fallback's check instead.
    const kiln::Tensor x = normal_tensor({M, K}, 1.0f, 1), w = normal_tensor({N, K}, 0.03f, 2),
                       bias = normal_tensor({N}, 1.0f, 3);
    std::vector<float> out(static_cast<size_t>(M * N));
    const FloatOperand a{x.data_ptr<float>(), K, 1}, b{w.data_ptr<float>(), 1, K};
    char shape[64];
    std::snprintf(shape, sizeof shape, "(%ld,%ld,%ld)", static_cast<long>(M), static_cast<long>(K), static_cast<long>(N));
    if (!amx_split_gemm_tile(out.data(), N, a, b, M, N, K, bias.data_ptr<float>(), AmxExecution::Hardware)) {
      std::printf("%-20s an input outside the split's range: not timed\n", shape);
      continue;
    }
    kiln::Tensor y;
    kiln::bench::Turns turns;  // one call per batch, the three taking turns
    turns.add("split", 1, [&] {
      amx_split_gemm_tile(out.data(), N, a, b, M, N, K, bias.data_ptr<float>(), AmxExecution::Hardware);
    });
    turns.add("linear", 1, [&] { y = kiln::linear(x, w, bias); });
    turns.add("pack", 1, [&] {
      pack_a(a, M, K, packed_a.data());
      pack_b(b, K, N, packed_b.data());
    });
    turns.run(repeats);
    const double split_ms = turns.median_ns("split") * 1e-6, linear_ms = turns.median_ns("linear") * 1e-6;
    const int64_t row_step = std::max<int64_t>(1, M / 37);
    const double es = max_relative_error(out.data(), x.data_ptr<float>(), w.data_ptr<float>(), bias.data_ptr<float>(),
                                         M, K, N, row_step, 7);
    const double el = max_relative_error(y.data_ptr<float>(), x.data_ptr<float>(), w.data_ptr<float>(),
                                         bias.data_ptr<float>(), M, K, N, row_step, 7);
    std::printf("%-20s %10.3f %10.3f %7.3f %9.3f %11.3g %11.3g\n", shape, split_ms, linear_ms, split_ms / linear_ms,
                turns.median_ns("pack") * 1e-6, es, el);
  }
  return 0;
}
