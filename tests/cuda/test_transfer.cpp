// non_blocking transfers, the pinned host cache and record_stream on a GPU.
//
// The reuse-before-the-copy-ends bug is made certain, not timing-dependent: a Gate holds the
// stream back (a host function waits on it), so every copy queued behind it is still pending
// when the host has queued the next one and freed its staging block. Without the events the
// cache would hand that block to the next copy, whose host pass would overwrite data the DMA
// has not read yet. The pinned cache and the GPU allocator are warmed before a gate closes:
// nothing then calls cudaHostAlloc or cudaMalloc while the stream is held (and no case calls
// cudaFreeHost, which waits for the device, while it is held).
#ifdef KILN_WITH_CUDA

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "allocator/allocator_testing.h"
#include "cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const Device kGpu = Device::cuda(0);

int64_t host_stat(const char* key) { return cuda::host_memory_stats().at(key); }

/// Blocks of the segment holding `p` that still wait for stream events.
int awaiting_in_segment(CachingAllocator& a, const void* p) {
  int n = 0;
  for (const BlockInfo& b : segment_of(a, p).blocks) n += b.state == BlockState::AwaitingFree;
  return n;
}

/// The sizes of the back-to-back copies: tiny, odd, around the small/large pool boundary and
/// across several 8 MiB staging slices.
std::vector<int64_t> copy_sizes() {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 60; ++i) sizes.push_back(1 + (i * 7919) % 20000);
  for (int64_t n : {int64_t{262144}, int64_t{262145}, int64_t{300000}, int64_t{5 << 20} + 3}) sizes.push_back(n);
  return sizes;
}

}  // namespace

TEST_CASE("non_blocking host-to-device: many gated copies through the staging cache, each intact") {
  const Stream stream = Stream::create(kGpu);
  cuda::StreamGuard guard(stream);
  const std::vector<int64_t> sizes = copy_sizes();
  // Sources of different data (pageable; one in three strided, one in five float64 converted
  // to the float32 destination) and their destinations, made before the gate.
  std::vector<Tensor> sources, destinations;
  std::vector<std::vector<float>> expected;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t n = sizes[i];
    Tensor src = i % 5 == 4 ? random({n}, kFloat64, -100, 100) : random({n}, kFloat32, -100, 100);
    if (i % 3 == 1 && n >= 2) src = random({2, n}, kFloat32, -100, 100).t().select(1, 1);  // stride 2
    sources.push_back(src);
    expected.push_back(src.to(kFloat32).to_vector<float>());
    destinations.push_back(empty({n}, TensorOptions(kFloat32).device(kGpu)));
  }
  // Warm the pinned cache with every staging block alive at once, as under the gate. From an
  // empty cache, the gated requests then find exactly the free blocks the warm-up made.
  cuda::host_empty_cache();
  {
    std::vector<Tensor> warm;
    for (int64_t n : sizes) warm.push_back(empty({n}).pin_memory());
  }
  const int64_t host_allocs = host_stat("num_device_alloc");
  {
    Gate gate(stream);
    for (size_t i = 0; i < sizes.size(); ++i) destinations[i].copy_(sources[i], true);
    CHECK_FALSE(stream.query());  // queued behind the gate: the host did not wait for the GPU
    // The sources may change at once: the staged copies took their values already.
    for (Tensor& s : sources) s.fill_(-1.0);
    CHECK(host_stat("active.all.current") >= static_cast<int64_t>(sizes.size()));  // staging blocks await events
    gate.open();
    stream.synchronize();
  }
  CHECK(host_stat("num_device_alloc") == host_allocs);  // every staging block came from the cache
  for (size_t i = 0; i < sizes.size(); ++i) {
    INFO("copy " << i << " of " << sizes[i] << " elements");
    CHECK(destinations[i].cpu().to_vector<float>() == expected[i]);
  }
}

TEST_CASE("non_blocking to(cuda): back-to-back copies without a gate, then one synchronize") {
  const Stream stream = Stream::create(kGpu);
  cuda::StreamGuard guard(stream);
  std::vector<Tensor> sources, results;
  for (int i = 0; i < 200; ++i) sources.push_back(full({1000 + i}, static_cast<double>(i) + 0.25));
  for (const Tensor& s : sources) results.push_back(s.to(kGpu, true));
  // A large one across several staging slices, with values that differ per element.
  const Tensor big = random({int64_t{9} << 20}, kFloat32);  // 36 MiB
  const Tensor big_gpu = big.to(kGpu, true);
  stream.synchronize();
  for (int i = 0; i < 200; ++i) {
    INFO("copy " << i);
    REQUIRE(results[static_cast<size_t>(i)].device() == kGpu);
    CHECK(results[static_cast<size_t>(i)].to_vector<double>() ==
          std::vector<double>(static_cast<size_t>(1000 + i), static_cast<double>(i) + 0.25));
  }
  CHECK(big_gpu.to_vector<float>() == big.to_vector<float>());
}

TEST_CASE("non_blocking from a pinned tensor: a direct DMA, and its block is not reused before it ends") {
  const Stream stream = Stream::create(kGpu);
  cuda::StreamGuard guard(stream);
  constexpr int64_t kN = 100000;
  const Tensor values = random({kN}, kFloat32);
  const std::vector<float> expected = values.to_vector<float>();
  Tensor dst = empty({kN}, TensorOptions(kFloat32).device(kGpu));
  { const Tensor warm[2] = {empty({kN}).pin_memory(), empty({kN}).pin_memory()}; }
  void* old_block = nullptr;
  {
    Gate gate(stream);
    {
      const Tensor pinned = values.pin_memory();
      REQUIRE(pinned.is_pinned());
      old_block = pinned.data_ptr();
      dst.copy_(pinned, true);
    }  // the user drops the pinned source while its DMA waits behind the gate
    CHECK(block_at(pinned_host_allocator().caching_allocator(), old_block).state == BlockState::AwaitingFree);
    const Tensor next = full({kN}, -3.0).pin_memory();  // must not land in the block the DMA reads
    CHECK(next.data_ptr() != old_block);
    gate.open();
    stream.synchronize();
  }
  CHECK(dst.to_vector<float>() == expected);
  // Blocking from pinned memory waits, so the source may change on return.
  Tensor pinned = values.pin_memory();
  Tensor dst2 = empty({kN}, TensorOptions(kFloat32).device(kGpu));
  dst2.copy_(pinned);
  pinned.fill_(7.0);
  CHECK(dst2.to_vector<float>() == expected);
}

TEST_CASE("non_blocking device-to-host: a pinned result, not waited for, right after a synchronize") {
  const Stream stream = Stream::create(kGpu);
  cuda::StreamGuard guard(stream);
  const Tensor host = random({300, 70}, kFloat32);
  const Tensor gpu = host.to(kGpu);
  const std::vector<float> expected = host.to_vector<float>();
  const std::vector<float> expected_t = host.t().contiguous().to_vector<float>();
  (void)gpu.t().contiguous();  // warm the GPU cache for the strided case's dense copy
  { const Tensor warm[3] = {empty({300, 70}).pin_memory(), empty({300, 70}).pin_memory(), empty({300, 70}, kFloat64).pin_memory()}; }
  Tensor out, out_t, out64;
  {
    Gate gate(stream);
    out = gpu.to(Device::cpu(), true);
    out_t = gpu.t().to(Device::cpu(), true);   // strided source: made dense on the GPU first
    out64 = gpu.to(Device::cpu(), kFloat64, true);  // converted on the GPU, then moved
    CHECK(out.is_pinned());
    CHECK(out_t.is_pinned());
    CHECK(out64.is_pinned());
    CHECK_FALSE(stream.query());
    gate.open();
    stream.synchronize();
  }
  CHECK(out.sizes() == Shape{300, 70});
  CHECK(out.to_vector<float>() == expected);
  CHECK(out_t.to_vector<float>() == expected_t);
  const std::vector<double> as64 = out64.to_vector<double>();
  for (size_t i = 0; i < expected.size(); ++i) CHECK(as64[i] == static_cast<double>(expected[i]));
  // Into a pageable destination the copy is complete on return (the driver waits).
  Tensor pageable = empty({300, 70});
  pageable.copy_(gpu, true);
  CHECK(pageable.to_vector<float>() == expected);
  // Into a strided pinned destination: moved, then copied into place before return.
  Tensor strided = empty({70, 300}).pin_memory().t();
  strided.copy_(gpu, true);
  CHECK(strided.to_vector<float>() == expected);
}

TEST_CASE("non_blocking copy_ into strided, broadcast and converted GPU destinations") {
  const Stream stream = Stream::create(kGpu);
  cuda::StreamGuard guard(stream);
  const Tensor row = random({7}, kFloat64);
  Tensor wide = empty({5, 7}, TensorOptions(kFloat32).device(kGpu));
  wide.copy_(row, true);  // broadcast, float64 -> float32
  Tensor tall = empty({7, 5}, TensorOptions(kFloat32).device(kGpu)).t();  // strided destination
  const Tensor block = random({5, 7}, kInt64, -50, 50);
  tall.copy_(block, true);
  const Tensor half = random({64}, kFloat32).to(kGpu, kFloat16, true);
  stream.synchronize();
  const std::vector<double> r = row.to_vector<double>();
  const std::vector<float> w = wide.to_vector<float>();
  for (size_t i = 0; i < 5; ++i)
    for (size_t j = 0; j < 7; ++j) CHECK(w[i * 7 + j] == static_cast<float>(r[j]));
  CHECK(tall.to_vector<double>() == block.to_vector<double>());
  CHECK(half.dtype() == kFloat16);
  CHECK(half.device() == kGpu);
}

TEST_CASE("non_blocking transfers of zero elements, and is_pinned for every kind of host memory") {
  CHECK(empty({0, 3}).to(kGpu, true).numel() == 0);
  CHECK(empty({0, 3}).to(kGpu, true).device() == kGpu);
  const Tensor none = empty({0}, kGpu).to(Device::cpu(), true);
  CHECK(none.numel() == 0);
  CHECK(none.is_pinned());
  Tensor zero_dst = empty({0}, kGpu);
  zero_dst.copy_(empty({0}), true);
  CHECK(empty({4}).pin_memory().is_pinned());
  CHECK_FALSE(empty({4}).is_pinned());
  CHECK_FALSE(ones({4}, kGpu).cpu().is_pinned());  // a blocking copy gives pageable memory
  CHECK(ones({4}, kGpu).to(Device::cpu(), true).is_pinned());
  // Memory the user pinned is pinned too (the driver is asked).
  void* mine = nullptr;
  CUDA_REQUIRE(cudaHostAlloc(&mine, 64, cudaHostAllocDefault));
  {
    const Tensor user = from_blob(mine, {16});
    CHECK(user.is_pinned());
    CHECK(user.pin_memory().data_ptr() == mine);  // already pinned: itself
  }
  CUDA_REQUIRE(cudaFreeHost(mine));
  float pageable[4] = {};
  CHECK_FALSE(from_blob(pageable, {4}).is_pinned());
}

TEST_CASE("record_stream: a CUDA tensor (or a view of it) used on another stream waits for that stream") {
  CachingAllocator& a = caching_allocator(kGpu);
  const Stream side = Stream::create(kGpu);
  constexpr int64_t kN = 1 << 20;  // 4 MiB of float32
  (void)empty({kN}, kGpu);          // a cached block for z below, made before the gate
  Tensor x = randn({kN}, kGpu);
  const std::vector<float> xs = x.to_vector<float>();
  void* x_block = x.data_ptr();
  {
    cuda::StreamGuard on_side(side);
    (void)(x + 1.0);  // the side stream's blocks for y, cached before the gate
  }
  Tensor y;
  {
    Gate gate(side);
    {
      cuda::StreamGuard on_side(side);
      y = x + 1.0;  // queued on the side stream, behind the gate: it reads x later
    }
    x.narrow(0, 10, 5).record_stream(side);  // a view records its storage's block
    x = Tensor();                            // the user drops x while the side stream still needs it
    CHECK(block_at(a, x_block).state == BlockState::AwaitingFree);
    const Tensor z = empty({kN}, kGpu);  // must not be x's block
    CHECK(z.data_ptr() != x_block);
    gate.open();
    side.synchronize();
  }
  const std::vector<float> ys = y.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) REQUIRE(ys[i] == xs[i] + 1.0f);
  (void)empty({1}, kGpu);  // an allocator call processes completed events
  CHECK(awaiting_in_segment(a, x_block) == 0);

  // Errors, and what PyTorch leaves alone.
  const Tensor g = ones({4}, kGpu);
  CHECK_THROWS_WITH_AS(g.record_stream(Stream(Device::cuda(1), 0)),
                       doctest::Contains("record_stream: the tensor is on cuda:0 but the stream on cuda:1"), Error);
  empty({0}, kGpu).record_stream(side);  // no memory: nothing to do
  void* raw = nullptr;
  CUDA_REQUIRE(cudaMalloc(&raw, 64));
  from_blob(raw, {16}, TensorOptions(kFloat32).device(kGpu)).record_stream(side);  // not Kiln's: skipped
  CUDA_REQUIRE(cudaFree(raw));
}

TEST_CASE("record_stream: a pinned CPU tensor takes any GPU's stream, and its block waits for it") {
  const Stream side = Stream::create(kGpu);
  CachingAllocator& cache = pinned_host_allocator().caching_allocator();
  { const Tensor warm[2] = {empty({5000}).pin_memory(), empty({5000}).pin_memory()}; }
  void* block = nullptr;
  {
    Gate gate(side);
    {
      const Tensor p = empty({5000}).pin_memory();
      block = p.data_ptr();
      p.narrow(0, 100, 10).record_stream(side);
    }
    CHECK(block_at(cache, block).state == BlockState::AwaitingFree);
    const Tensor q = empty({5000}).pin_memory();
    CHECK(q.data_ptr() != block);
    gate.open();
    side.synchronize();
  }
  (void)empty({1}).pin_memory();  // an allocator call processes completed events
  CHECK(awaiting_in_segment(cache, block) == 0);
}

TEST_CASE("pinned host cache: statistics, summary and host_empty_cache on the real cache") {
  const int64_t allocations = host_stat("allocation.all.current");
  {
    const Tensor a = empty({1000}).pin_memory(), b = empty({3, 1 << 20}).pin_memory();
    CHECK(host_stat("allocation.all.current") == allocations + 2);
    CHECK(host_stat("reserved_bytes.all.current") >= 4000 + (12 << 20));
    CHECK(cuda::host_memory_summary().find("Kiln pinned host memory summary") != std::string::npos);
    cudaPointerAttributes attributes{};
    CUDA_REQUIRE(cudaPointerGetAttributes(&attributes, b.data_ptr()));
    CHECK(attributes.type == cudaMemoryTypeHost);  // really page-locked
  }
  CHECK(host_stat("allocation.all.current") == allocations);
  // With no pinned tensor left anywhere in this process, every segment can go back.
  if (allocations == 0) {
    cuda::host_empty_cache();
    CHECK(host_stat("reserved_bytes.all.current") == 0);
    CHECK(cuda::host_memory_snapshot().segments.empty());
  }
}

TEST_CASE("GPU to GPU copies (two GPUs): both directions, and non_blocking the same") {
  if (cuda::device_count() < 2) {
    MESSAGE("one GPU visible: the GPU-to-GPU case needs two");
    return;
  }
  const Device other = Device::cuda(1);
  const Tensor host = random({513, 9}, kFloat32);
  const Tensor on0 = host.to(kGpu);
  const Tensor on1 = on0.to(other, true);
  CHECK(on1.device() == other);
  Tensor back = empty({9, 513}, kGpu).t();
  back.copy_(on1.to(kFloat64));
  CHECK(back.to_vector<float>() == host.to_vector<float>());
  CHECK(on1.cpu().to_vector<float>() == host.to_vector<float>());
}

#endif  // KILN_WITH_CUDA
