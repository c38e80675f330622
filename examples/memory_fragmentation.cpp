// The article's closing tip, made visible: when the memory a program holds is far above
// what its tensors need, the caching allocator is fragmenting. This example runs a workload
// with interleaved lifetimes of mixed sizes, prints memory_summary() before and after, names
// the non-releasable bytes, shows what KILN_ALLOC_CONF's max_split_size_mb and empty_cache()
// change, and writes the memory map as an SVG picture: to --svg PATH, else to
// memory_map.svg in the folder the example was built in (build/examples/ by default), never
// into the source tree or wherever the program happens to be started.
//
//   memory_fragmentation [--device cpu|cuda] [--svg PATH]
#include <kiln/kiln.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#ifdef KILN_WITH_CUDA
#include "allocator/cuda_segment_source.h"
#endif
#include "allocator/host_segment_source.h"

// Set by examples/CMakeLists.txt to this example's build folder; a copy built elsewhere
// writes to the current folder.
#ifndef KILN_EXAMPLE_OUTPUT_DIR
#define KILN_EXAMPLE_OUTPUT_DIR "."
#endif

using namespace kiln;

namespace {

constexpr int64_t kMiB = 1024 * 1024;

// The workload, through any allocate/free pair:
//   1. a batch's four 96 MiB activations are used and freed;
//   2. the next batch holds four 80 MiB activations at once, and after each one keeps a
//      10 MiB result (say, outputs kept for the evaluation at the end of the epoch);
//   3. the activations are freed and a 96 MiB buffer is wanted again;
//   4. half the kept results are dropped.
// By default step 2 splits each cached 96 MiB block (80 MiB for the activation, 16 MiB
// free) and each kept result lands in such a rest, pinning all four segments: step 3 finds
// no whole 96 MiB block and must grow the reserve, and the free pieces are non-releasable.
void workload(const std::function<void*(size_t)>& alloc, const std::function<void(void*)>& release) {
  std::vector<void*> batch;
  for (int i = 0; i < 4; ++i) batch.push_back(alloc(96 * kMiB));
  for (void* p : batch) release(p);
  std::vector<void*> activations, kept;
  for (int i = 0; i < 4; ++i) {
    activations.push_back(alloc(80 * kMiB));
    kept.push_back(alloc(10 * kMiB));
  }
  for (void* p : activations) release(p);
  void* again = alloc(96 * kMiB);
  release(again);
  for (size_t i = 0; i < kept.size(); i += 2) release(kept[i]);
}

std::unique_ptr<SegmentSource> source_for([[maybe_unused]] Device device) {
#ifdef KILN_WITH_CUDA
  if (device.is_cuda()) return std::make_unique<CudaSegmentSource>(device.index());
#endif
  return std::make_unique<HostSegmentSource>();
}

void print_line(const char* what, const MemoryStats& s) {
  fmt::print("{:<34} reserved {:>10}  allocated {:>10}  non-releasable {:>10}  peak reserved {:>10}\n", what,
             format_bytes(static_cast<uint64_t>(s.reserved_bytes[StatPool::All].current)),
             format_bytes(static_cast<uint64_t>(s.allocated_bytes[StatPool::All].current)),
             format_bytes(static_cast<uint64_t>(s.inactive_split_bytes[StatPool::All].current)),
             format_bytes(static_cast<uint64_t>(s.reserved_bytes[StatPool::All].peak)));
}

}  // namespace

int main(int argc, char** argv) {
  Device device = cuda::is_available() ? Device::cuda(0) : Device::cpu();
  std::string svg = std::string(KILN_EXAMPLE_OUTPUT_DIR) + "/memory_map.svg";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device = std::strcmp(argv[++i], "cuda") == 0 ? Device::cuda(0) : Device::cpu();
    } else if (std::strcmp(argv[i], "--svg") == 0 && i + 1 < argc) {
      svg = argv[++i];
    }
  }
  try {
    fmt::print("memory_fragmentation on {}\n\nBefore the workload:\n{}\n", device.str(), memory_summary(device, true));

    // The workload on real tensors, through the device's own allocator.
    std::vector<Tensor> live;
    auto tensor_alloc = [&](size_t bytes) -> void* {
      live.push_back(empty({static_cast<int64_t>(bytes / 4)}, device));
      return live.back().data_ptr();
    };
    auto tensor_free = [&](void* p) {
      std::erase_if(live, [p](const Tensor& t) { return t.data_ptr() == p; });
    };
    workload(tensor_alloc, tensor_free);
    const MemorySnapshot after = memory_snapshot(device);
    fmt::print("After the workload ({} tensors still alive, {} of them):\n{}\n", live.size(),
               format_bytes(static_cast<uint64_t>(after.stats.allocated_bytes[StatPool::All].current)),
               format_memory_summary(after));
    fmt::print("The non-releasable memory ({}) is free space inside segments that also hold live tensors: the\n"
               "allocator cannot return it to the device, and it only serves requests that fit the pieces.\n\n",
               format_bytes(static_cast<uint64_t>(after.stats.inactive_split_bytes[StatPool::All].current)));
    write_memory_map(svg, device);
    fmt::print("Memory map written to {} (one bar per segment, blocks coloured by state).\n\n", svg);

    // The same workload through two fresh allocators: the default configuration and
    // KILN_ALLOC_CONF=max_split_size_mb:64 (blocks of 64 MiB and more are never split).
    fmt::print("The same workload through fresh allocators:\n");
    AllocatorConfig limited;
    limited.max_split_size = 64 * kMiB;
    for (const auto& [label, config] : {std::pair{"default", AllocatorConfig{}},
                                        std::pair{"max_split_size_mb:64", limited}}) {
      CachingAllocator a(source_for(device), config);
      workload([&](size_t b) { return a.allocate(b, 0, "workload"); }, [&](void* p) { a.free(p); });
      print_line(label, a.stats());
      a.empty_cache();
      print_line("  ... after empty_cache()", a.stats());
      // Free what the workload kept, so the allocator can be destroyed cleanly.
      for (const SegmentInfo& seg : a.snapshot().segments)
        for (const BlockInfo& b : seg.blocks)
          if (b.state == BlockState::Active) a.free(reinterpret_cast<void*>(b.address));
    }
    fmt::print("\nWith max_split_size_mb:64, blocks of 64 MiB and more are never split: each 80 MiB activation\n"
               "takes a whole 96 MiB block, the small results get a segment of their own, and the second 96 MiB\n"
               "request reuses a cached block instead of growing the reserve.\n\n");

    live.clear();
    empty_cache(device);
    fmt::print("After freeing every tensor and empty_cache():\n{}", memory_summary(device, true));
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
