// oneDNN matmul primitives for the CPU GEMM's float tiles (onednn_matmul.h says why), built
// once per tile shape and layout and kept in a process-wide cache; and oneDNN's sgemm for the
// large tiles of Intel CPUs (beta = 0, then the bias added to the tile).
//
// Each primitive is made for one thread (the OpenMP thread setting is 1 while it is built and
// while it runs: oneDNN reads it for its work split), uses a scratchpad the calling thread
// owns (scratchpad_mode::user, so concurrent tiles share nothing inside oneDNN), and takes
// the bias, beta and alpha as its own operations: the bias as the primitive's bias, beta * out
// as a sum post-op, alpha as an output scale. A bias with alpha != 1 is the caller's to write
// into the tile first (oneDNN would scale it with the product).
#include "onednn_matmul.h"

#ifdef KILN_WITH_ONEDNN

#include <Eigen/Core>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "../../core/error.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kiln::cpu {

namespace {

// What makes two tiles need different primitives: sizes, strides, and which of bias, sum and
// output scale the primitive applies (with their values).
struct Key {
  int64_t mt, nt, K, a_rs, a_cs, b_rs, b_cs, ldo;
  uint32_t alpha_bits, sum_bits;  // sum_bits: the sum post-op's scale; has_sum says whether there is one
  bool has_bias, has_sum;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 1469598103934665603ull;
    const auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (int64_t v : {k.mt, k.nt, k.K, k.a_rs, k.a_cs, k.b_rs, k.b_cs, k.ldo}) mix(static_cast<uint64_t>(v));
    mix(k.alpha_bits);
    mix(k.sum_bits);
    mix((k.has_bias ? 2u : 0u) | (k.has_sum ? 1u : 0u));
    return h;
  }
};

struct Entry {
  dnnl::matmul primitive;
  dnnl::memory::desc src, weights, bias, dst;
  size_t scratchpad_bytes = 0;
};

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// OpenMP's thread setting of 1 on this thread for a scope (oneDNN sizes its work split by it).
class OneThread {
 public:
  OneThread() {
#ifdef _OPENMP
    saved_ = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
  }
  ~OneThread() {
#ifdef _OPENMP
    omp_set_num_threads(saved_);
#endif
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int saved_ = 1;
};

// Faults injected by onednn_matmul_inject_fault_for_testing, each taken by one event.
std::atomic<int> injected_build_faults{0}, injected_scratchpad_faults{0}, injected_sgemm_faults{0};

bool take_fault(std::atomic<int>& pending) {
  int n = pending.load(std::memory_order_relaxed);
  while (n > 0)
    if (pending.compare_exchange_weak(n, n - 1)) return true;
  return false;
}

std::shared_ptr<const Entry> build(const Key& k) {
  if (take_fault(injected_build_faults)) throw dnnl::error(dnnl_unimplemented, "fault injected for testing");
  using dt = dnnl::memory::data_type;
  auto entry = std::make_shared<Entry>();
  entry->src = dnnl::memory::desc({k.mt, k.K}, dt::f32, dnnl::memory::dims{k.a_rs, k.a_cs});
  entry->weights = dnnl::memory::desc({k.K, k.nt}, dt::f32, dnnl::memory::dims{k.b_rs, k.b_cs});
  entry->dst = dnnl::memory::desc({k.mt, k.nt}, dt::f32, dnnl::memory::dims{k.ldo, 1});
  if (k.has_bias) entry->bias = dnnl::memory::desc({1, k.nt}, dt::f32, dnnl::memory::dims{k.nt, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  float alpha, sum_scale;
  std::memcpy(&alpha, &k.alpha_bits, sizeof alpha);
  std::memcpy(&sum_scale, &k.sum_bits, sizeof sum_scale);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (k.has_sum) {
    dnnl::post_ops ops;
    ops.append_sum(sum_scale);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::desc desc = k.has_bias ? dnnl::matmul::desc(entry->src, entry->weights, entry->bias, entry->dst)
                                             : dnnl::matmul::desc(entry->src, entry->weights, entry->dst);
  const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
  entry->primitive = dnnl::matmul(pd);
  entry->scratchpad_bytes = pd.scratchpad_desc().get_size();
  return entry;
}

// The process-wide cache. Built outside the lock (a first build generates code: ~ms); two
// threads may build the same key once each, and the first stored wins.
class Cache {
 public:
  std::shared_ptr<const Entry> get(const Key& k) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = map_.find(k); it != map_.end()) return it->second;
    }
    std::shared_ptr<const Entry> built = build(k);
    std::lock_guard lock(mutex_);
    // Bounded: a program that multiplies ever-new shapes starts over rather than growing.
    if (map_.size() >= kCapacity) map_.clear();
    return map_.emplace(k, std::move(built)).first->second;
  }
  int64_t size() {
    std::lock_guard lock(mutex_);
    return static_cast<int64_t>(map_.size());
  }

 private:
  static constexpr size_t kCapacity = 1024;
  std::mutex mutex_;
  std::unordered_map<Key, std::shared_ptr<const Entry>, KeyHash> map_;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tiles may run while statics are torn down
  return *c;
}

// This thread's scratchpad, 64-byte aligned, grown to the largest primitive it ran.
struct ScratchpadBuffer {
  void* data = nullptr;
  size_t size = 0;
  ~ScratchpadBuffer() { std::free(data); }
};
thread_local ScratchpadBuffer scratchpad_buffer;

void* scratchpad(size_t bytes) {
  ScratchpadBuffer& buffer = scratchpad_buffer;
  if (bytes > buffer.size) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* grown = take_fault(injected_scratchpad_faults) ? nullptr : std::aligned_alloc(64, rounded);
    KILN_CHECK(grown != nullptr, "matmul: could not allocate oneDNN's {}-byte scratchpad", rounded);
    std::free(buffer.data);
    buffer.data = grown;
    buffer.size = rounded;
  }
  return buffer.data;
}

// The forced kernel (onednn_matmul_force_kernel_for_testing): -1 none, else the enum's value.
std::atomic<int> forced_kernel{-1};

bool intel_cpu() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool intel = __builtin_cpu_is("intel");
  return intel;
#else
  return false;
#endif
}

// How dnnl_sgemm reads a row-major operand of rows x cols: 'N' with the row stride as its
// leading dimension, or 'T' (stored column-major) with the column stride; 0 when it cannot.
struct SgemmOperand {
  char trans;
  int64_t ld;
};
SgemmOperand sgemm_operand(const FloatOperand& m, int64_t rows, int64_t cols) {
  if (m.col_stride == 1 && m.row_stride >= std::max<int64_t>(cols, 1)) return {'N', m.row_stride};
  if (m.row_stride == 1 && m.col_stride >= std::max<int64_t>(rows, 1)) return {'T', m.col_stride};
  return {0, 0};
}

// out = alpha * a @ b + (bias ? bias : beta * out) through dnnl_sgemm on one thread (the
// caller's OneThread). A bias is added to the tile after sgemm with beta = 0, or with
// `bias_first` written into the tile before and summed into with beta = 1 (the older order,
// other bits: the bias enters the sum first instead of last).
void sgemm_tile(float* out, int64_t ldo, const FloatOperand& a, SgemmOperand sa, const FloatOperand& b,
                SgemmOperand sb, int64_t mt, int64_t nt, int64_t K, float alpha, float beta, const float* bias,
                bool bias_first) {
  if (bias) {
    if (bias_first)
      for (int64_t i = 0; i < mt; ++i) std::copy(bias, bias + nt, out + i * ldo);
    beta = bias_first ? 1.0f : 0.0f;
  }
  const dnnl_status_t status = take_fault(injected_sgemm_faults)
                                   ? dnnl_runtime_error
                                   : dnnl_sgemm(sa.trans, sb.trans, mt, nt, K, alpha, a.data, sa.ld, b.data, sb.ld,
                                                beta, out, ldo);
  KILN_CHECK(status == dnnl_success,
             "matmul: oneDNN's sgemm failed (status {}) on a {}x{}x{} tile (strides a {}x{}, b {}x{}, out {})",
             static_cast<int>(status), mt, nt, K, a.row_stride, a.col_stride, b.row_stride, b.col_stride, ldo);
  if (bias && !bias_first) {
    using Row = Eigen::Array<float, 1, Eigen::Dynamic>;
    const Eigen::Map<const Row> row_of_bias(bias, nt);
    for (int64_t i = 0; i < mt; ++i) Eigen::Map<Row>(out + i * ldo, nt) += row_of_bias;
  }
}

}  // namespace

OnednnTileKernel onednn_tile_kernel(int64_t mt, int64_t nt, int64_t K) {
  const int forced = forced_kernel.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<OnednnTileKernel>(forced);
  // Measured on two H200 hosts' Xeons (BENCHMARKS.md 9, 2026-12-04, one thread, in one
  // process): sgemm 6% faster than the primitive at linear (1024,4096,1024), 0-7% at
  // (1024,1024,4096), 8% at 2048^3; within -0.5..+2.5% of it with an edge of 512; 30-40%
  // slower at 64 rows. (On the AMD development VM it was even at 1024 rows, slower at 64.)
  constexpr int64_t kMinEdge = 1024;
  return intel_cpu() && mt >= kMinEdge && nt >= kMinEdge && K >= kMinEdge ? OnednnTileKernel::Sgemm
                                                                         : OnednnTileKernel::Matmul;
}

void onednn_matmul_tile(float* out, int64_t ldo, const FloatOperand& a, const FloatOperand& b, int64_t mt,
                        int64_t nt, int64_t K, float alpha, float beta, const float* bias) {
  KILN_INTERNAL_ASSERT(mt >= 1 && nt >= 1 && K >= 1, "onednn_matmul_tile: empty tile {}x{}x{}", mt, nt, K);
  KILN_INTERNAL_ASSERT(!bias || alpha == 1.0f, "onednn_matmul_tile: a bias with alpha {}", alpha);
  if (const OnednnTileKernel kernel = onednn_tile_kernel(mt, nt, K); kernel != OnednnTileKernel::Matmul) {
    const SgemmOperand sa = sgemm_operand(a, mt, K), sb = sgemm_operand(b, K, nt);
    if (sa.trans != 0 && sb.trans != 0) {
      OneThread one_thread;
      sgemm_tile(out, ldo, a, sa, b, sb, mt, nt, K, alpha, beta, bias, kernel == OnednnTileKernel::SgemmBiasFirst);
      return;
    }
  }
  Key k{mt, nt, K, a.row_stride, a.col_stride, b.row_stride, b.col_stride, ldo, bits_of(alpha), 0, false, false};
  if (bias) {
    k.has_bias = true;
  } else if (beta != 0.0f) {
    k.has_sum = true;
    k.sum_bits = bits_of(beta);
  }
  try {
    OneThread one_thread;
    const std::shared_ptr<const Entry> e = cache().get(k);
    const dnnl::engine& engine = cpu_engine();
    thread_local dnnl::stream stream(engine);  // a CPU stream holds no work between calls
    dnnl::memory src(e->src, engine, const_cast<float*>(a.data));
    dnnl::memory weights(e->weights, engine, const_cast<float*>(b.data));
    dnnl::memory dst(e->dst, engine, out);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
    if (e->scratchpad_bytes > 0) {
      const dnnl::memory::desc pad({static_cast<int64_t>(e->scratchpad_bytes)}, dnnl::memory::data_type::u8,
                                   dnnl::memory::format_tag::a);
      args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(pad, engine, scratchpad(e->scratchpad_bytes)));
    }
    if (k.has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e->bias, engine, const_cast<float*>(bias)));
    e->primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& err) {
    KILN_FAIL("matmul: oneDNN's matmul failed ({}, status {}) on a {}x{}x{} tile (strides a {}x{}, b {}x{}, out {})",
              err.what(), static_cast<int>(err.status), mt, nt, K, a.row_stride, a.col_stride, b.row_stride,
              b.col_stride, ldo);
  }
}

int64_t onednn_matmul_cached_primitives() { return cache().size(); }

int64_t onednn_matmul_thread_scratchpad_bytes() { return static_cast<int64_t>(scratchpad_buffer.size); }

void onednn_matmul_inject_fault_for_testing(OnednnFault fault) {
  switch (fault) {
    case OnednnFault::PrimitiveBuild: ++injected_build_faults; return;
    case OnednnFault::Scratchpad: ++injected_scratchpad_faults; return;
    case OnednnFault::Sgemm: ++injected_sgemm_faults; return;
  }
}

void onednn_matmul_force_kernel_for_testing(std::optional<OnednnTileKernel> kernel) {
  forced_kernel.store(kernel ? static_cast<int>(*kernel) : -1, std::memory_order_relaxed);
}

}  // namespace kiln::cpu

#else  // without oneDNN: nothing calls the tile, and the cache is empty

#include "../../core/error.h"

namespace kiln::cpu {
void onednn_matmul_tile(float*, int64_t, const FloatOperand&, const FloatOperand&, int64_t, int64_t, int64_t, float,
                        float, const float*) {
  KILN_FAIL("matmul: this build has no oneDNN tiles (KILN_ONEDNN off or libdnnl missing)");
}
OnednnTileKernel onednn_tile_kernel(int64_t, int64_t, int64_t) { return OnednnTileKernel::Matmul; }
void onednn_matmul_force_kernel_for_testing(std::optional<OnednnTileKernel>) {}
int64_t onednn_matmul_cached_primitives() { return 0; }
int64_t onednn_matmul_thread_scratchpad_bytes() { return 0; }
void onednn_matmul_inject_fault_for_testing(OnednnFault) {}
}  // namespace kiln::cpu

#endif
