// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. Output block k of a stream depends only on (seed, k), so any
// element of a random tensor can be computed independently, on the CPU or on a GPU thread,
// and both give the same numbers (Note [Random numbers are a function of the index], below).
//
// Element i of a random tensor uses block (base + i / per_block) and lane i % per_block,
// where per_block is 4 for 32-bit-or-smaller outputs and 2 for float64. Box-Muller runs in
// double so the CPU and CUDA results round to the same float. Uniform values use as many
// bits as the output type holds (uniform(b, lane, per, digits)); a value that still rounds
// up to the excluded bound `to` of [from, to) is replaced by `from`, as in PyTorch's CUDA
// kernels, so every device keeps the half-open interval.
#pragma once

#include <cmath>
#include <cstdint>

#include "../core/host_device.h"

// Note [Random numbers are a function of the index]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A random op does not draw from a stateful stream; it reserves a range of counter blocks
// from the Generator (tensor/generator.h: the only state is a seed and an offset) and then
// element i is a pure function of (seed, first_block + i / per_block, i % per_block).
// Why: (1) CPU chunks and CUDA threads compute their elements independently, with no shared
// generator state and no dependence on the number of threads or the launch geometry, so a
// seeded program gives the same numbers on any machine; (2) the CPU and CUDA kernels of
// rand/randn/dropout are the same arithmetic on the same counters and agree bit for bit
// (tests/cuda checks it); (3) advancing the generator is one addition per op, which is also
// what replaying a captured graph needs (advance the offset, recompute).
namespace kiln::philox {

/// Four 32-bit outputs of one Philox block.
struct Block {
  uint32_t x[4];
};

/// Philox4x32-10 on a full 128-bit counter and 64-bit key (the published algorithm; tested
/// against the Random123 known-answer vectors).
KILN_HOST_DEVICE inline Block philox4x32_10(Block counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0 = counter.x[0], c1 = counter.x[1], c2 = counter.x[2], c3 = counter.x[3];
  uint32_t k0 = key0, k1 = key1;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return Block{{c0, c1, c2, c3}};
}

/// Block `counter` of the stream keyed by `seed`: counter in the low 64 bits, seed as key.
KILN_HOST_DEVICE inline Block block(uint64_t seed, uint64_t counter) {
  return philox4x32_10(Block{{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u}},
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

/// A uniform float in [0, 1) from 24 random bits.
KILN_HOST_DEVICE inline float uniform_float(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

/// A uniform double in [0, 1) from 53 random bits taken from two outputs.
KILN_HOST_DEVICE inline double uniform_double(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

/// A uniform double in [0, 1) on the grid of 2^-digits, from the top `digits` (1..32) bits.
/// Every grid value is exact in a type with `digits` significand bits, so rounding to that
/// type cannot reach 1: random 16-bit floats use 11 (float16) or 8 (bfloat16) bits, as
/// PyTorch's CPU generator does. uniform_bits(x, 24) == uniform_float(x).
KILN_HOST_DEVICE inline double uniform_bits(uint32_t bits, int digits) {
  return static_cast<double>(bits >> (32 - digits)) * (1.0 / static_cast<double>(uint64_t{1} << digits));
}

/// Values of element type with `bytes` per element taken from one block.
KILN_HOST_DEVICE constexpr int per_block(int bytes) { return bytes == 8 ? 2 : 4; }

/// Lane `lane` of a block as a uniform value in [0, 1) for an output type with `digits`
/// significand bits (11 float16, 8 bfloat16, 24 float32, 53 float64): the value is exact in
/// that type, so a rand() in any dtype stays below 1.
KILN_HOST_DEVICE inline double uniform(const Block& b, int lane, int values_per_block, int digits) {
  if (values_per_block == 4) return uniform_bits(b.x[lane], digits < 24 ? digits : 24);
  return uniform_double(b.x[2 * lane], b.x[2 * lane + 1]);
}

/// Standard normal value for lane `lane`: Box-Muller over the block's uniforms, in double.
KILN_HOST_DEVICE inline double normal(const Block& b, int lane, int values_per_block) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  double u1, u2;
  bool use_cos;
  if (values_per_block == 4) {
    // Lanes (0,1) and (2,3) form two Box-Muller pairs.
    const int pair = lane / 2;
    u1 = 1.0 - static_cast<double>(uniform_float(b.x[2 * pair]));  // (0, 1]: log is finite
    u2 = static_cast<double>(uniform_float(b.x[2 * pair + 1]));
    use_cos = (lane % 2) == 0;
  } else {
    u1 = 1.0 - uniform_double(b.x[0], b.x[1]);
    u2 = uniform_double(b.x[2], b.x[3]);
    use_cos = lane == 0;
  }
  const double r = std::sqrt(-2.0 * std::log(u1));
  return use_cos ? r * std::cos(kTwoPi * u2) : r * std::sin(kTwoPi * u2);
}

/// Inside a CUDA graph (Note [Random numbers in a CUDA graph], tensor/generator.h) a kernel's
/// seed and base offset come from device memory the graph rewrites before each replay.
KILN_HOST_DEVICE inline void resolve_graph_state(const uint64_t* graph_state, uint64_t& seed, uint64_t& first_block) {
  if (graph_state != nullptr) {
    seed = graph_state[0];
    first_block += graph_state[1];
  }
}

}  // namespace kiln::philox
