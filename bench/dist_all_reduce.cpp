// all_reduce bus bandwidth, Kiln's dist::all_reduce against a bare NCCL loop in the same run
// (the ceiling: the same GPUs, buffers, stream and NCCL library, no Kiln in between), at
// 1 KiB ... 1 GiB. Bus bandwidth as nccl-tests defines it: size / time * 2 (n - 1) / n.
// Issue 16's target: Kiln >= 0.95x the bare loop from 16 MiB up.
//
//   torchrun --nproc-per-node 2 --no-python build/bench/dist_all_reduce      # one process per GPU
//   build/bench/dist_all_reduce --local 2                                     # one thread per GPU
//   build/bench/dist_all_reduce --local 1 --max-bytes 268435456              # one GPU (NCCL's copy path)
//
// Options: --dtype float32|bfloat16 (default float32), --max-bytes B (default 1 GiB),
// --iters N (timed iterations at the smallest size; fewer for large sizes).
// bench/torch_ddp_all_reduce.py measures PyTorch's side under torchrun with the same sizes.
#include <cuda_runtime_api.h>
#include <kiln/kiln.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

using namespace kiln;
namespace dist = kiln::distributed;

namespace {

#define BENCH_CUDA(call)                                                                          \
  do {                                                                                            \
    const cudaError_t s_ = (call);                                                                \
    if (s_ != cudaSuccess) throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(s_)); \
  } while (0)
#define BENCH_NCCL(call)                                                                          \
  do {                                                                                            \
    const ncclResult_t r_ = (call);                                                               \
    if (r_ != ncclSuccess) throw std::runtime_error(std::string(#call) + ": " + ncclGetErrorString(r_)); \
  } while (0)

struct Options {
  int local = 0;  // 0: under a launcher
  DType dtype = kFloat32;
  int64_t max_bytes = int64_t{1} << 30;
  int iters = 200;
};

struct Row {
  int64_t bytes = 0;
  double kiln_us = 0, nccl_us = 0;
};

// Milliseconds per call of `body` on `stream`, over `iters` calls after `warmup`.
template <typename F>
double time_ms(cudaStream_t stream, int warmup, int iters, F&& body) {
  for (int i = 0; i < warmup; ++i) body();
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  BENCH_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) body();
  BENCH_CUDA(cudaEventRecord(stop, stream));
  BENCH_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  return ms / iters;
}

ncclDataType_t nccl_type(DType t) { return t == kBFloat16 ? ncclBfloat16 : ncclFloat32; }

// The sweep on one rank: Kiln's all_reduce, then the bare loop on `bare`, per size.
std::vector<Row> sweep(const Options& o, ncclComm_t bare) {
  const Device dev = dist::default_group().device();
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(cuda::current_stream(dev).id());
  std::vector<Row> rows;
  for (int64_t bytes = 1024; bytes <= o.max_bytes; bytes *= 2) {
    const int64_t n = bytes / static_cast<int64_t>(element_size(o.dtype));
    Tensor t = randn({n}, TensorOptions(kFloat32).device(dev)).to(o.dtype);
    const int iters = static_cast<int>(std::clamp<int64_t>(o.iters * 1024 * 1024 / std::max<int64_t>(bytes, 1 << 20), 5, o.iters));
    Row row;
    row.bytes = bytes;
    dist::barrier();
    row.kiln_us = 1000.0 * time_ms(stream, 5, iters, [&] { dist::all_reduce(t); });
    dist::barrier();
    void* data = t.data_ptr();
    row.nccl_us = 1000.0 * time_ms(stream, 5, iters, [&] {
      BENCH_NCCL(ncclAllReduce(data, data, static_cast<size_t>(n), nccl_type(o.dtype), ncclSum, bare, stream));
    });
    rows.push_back(row);
  }
  return rows;
}

void print(const Options& o, int world, const std::vector<Row>& rows, const char* how) {
  const double factor = world > 1 ? 2.0 * (world - 1) / world : 1.0;
  std::printf("dist_all_reduce: %d ranks (%s), %s, NCCL %d.%d.%d, bus bandwidth = size / time * %.3f\n", world, how,
              std::string(dtype_name(o.dtype)).c_str(), NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, factor);
  std::printf("%12s %12s %12s %14s %14s %8s\n", "size", "kiln us", "nccl us", "kiln busbw GB/s", "nccl busbw GB/s",
              "ratio");
  for (const Row& r : rows) {
    const double kb = r.bytes / (r.kiln_us * 1e3) * factor, nb = r.bytes / (r.nccl_us * 1e3) * factor;
    std::printf("%12lld %12.2f %12.2f %14.2f %14.2f %8.3f%s\n", static_cast<long long>(r.bytes), r.kiln_us, r.nccl_us,
                kb, nb, kb / nb, r.bytes >= (int64_t{16} << 20) && kb / nb < 0.95 ? "  < 0.95" : "");
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) throw std::runtime_error(a + " needs a value");
    ++i;
    if (a == "--local") o.local = std::atoi(v);
    else if (a == "--dtype") o.dtype = std::string(v) == "bfloat16" ? kBFloat16 : kFloat32;
    else if (a == "--max-bytes") o.max_bytes = std::atoll(v);
    else if (a == "--iters") o.iters = std::max(1, std::atoi(v));
    else throw std::runtime_error("unknown argument " + a);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (!cuda::is_available() || !dist::is_nccl_available()) {
      std::printf("dist_all_reduce: skipped: needs a GPU and a build with NCCL\n");
      return 0;
    }
    if (o.local > 0) {
      ncclUniqueId id;
      BENCH_NCCL(ncclGetUniqueId(&id));
      std::vector<Row> rows0;
      std::mutex m;
      dist::run_local(o.local, DeviceType::CUDA, [&](int rank) {
        ncclComm_t bare;
        BENCH_NCCL(ncclCommInitRank(&bare, o.local, id, rank));
        std::vector<Row> rows = sweep(o, bare);
        BENCH_NCCL(ncclCommDestroy(bare));
        if (rank == 0) {
          std::lock_guard lock(m);
          rows0 = std::move(rows);
        }
      });
      print(o, o.local, rows0, "threads of one process");
      return 0;
    }
    dist::init_process_group();
    const dist::LaunchEnv env = dist::read_launch_env();
    // The bare communicator: bootstrapped like Kiln's, on the next port.
    if (env.world_size > 1)
      ::setenv("NCCL_COMM_ID", fmt::format("{}:{}", env.master_addr, env.master_port + 2).c_str(), 1);
    ncclUniqueId id;
    BENCH_NCCL(ncclGetUniqueId(&id));
    ncclComm_t bare;
    BENCH_NCCL(ncclCommInitRank(&bare, env.world_size, id, env.rank));
    const std::vector<Row> rows = sweep(o, bare);
    BENCH_NCCL(ncclCommDestroy(bare));
    if (env.rank == 0) print(o, env.world_size, rows, fmt::format("{} processes", env.source).c_str());
    dist::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_all_reduce: %s\n", e.what());
    return 1;
  }
}
