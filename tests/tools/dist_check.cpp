// dist_check: the collectives checked end to end in the way a user runs them, for the runs a
// doctest binary cannot make: several processes under a launcher (torchrun --no-python,
// mpirun, srun), sizes up to 1 GiB, and the fault cases. The same checks also run in one
// process (--local N, threads over GPUs or, with --device cpu, the Threads backend), which is
// how ctest runs it here.
//
//   torchrun --nproc-per-node 2 --no-python build/tests/dist_check --max-bytes 1073741824
//   torchrun --nproc-per-node 2 --no-python build/tests/dist_check --fault never-join --timeout 20
//   build/tests/dist_check --local 2 --device cpu
//
// Data: rank r's input repeats a row of 1021 random integers in [-30, 30) drawn from seed
// 1000 + r (bool: random bits), so every rank knows every other rank's input without
// communicating, the float64 expectation is exact in every dtype (|sum| <= 30 * ranks <= 256
// is exact even in bfloat16), and results are compared on the device. Prints
// "dist_check: PASS" (rank 0) and exits 0 when every check held.
#include <kiln/kiln.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;
namespace dist = kiln::distributed;

namespace {

constexpr int64_t kPeriod = 1021;

struct Options {
  int local = 0;  // 0: under a launcher
  Device device = Device::cpu();
  bool device_given = false;
  int64_t max_bytes = int64_t{4} << 20;
  std::string fault;  // "", "never-join", "throw", "die"
  double timeout_s = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "dist_check: %s\nusage: dist_check [--local N] [--device cpu|cuda] [--max-bytes B] "
               "[--fault never-join|throw|die] [--timeout SECONDS]\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--local") {
      o.local = std::atoi(value().c_str());
      if (o.local < 1) usage("--local must be at least 1");
    } else if (a == "--device") {
      const std::string d = value();
      if (d != "cpu" && d != "cuda") usage("--device must be cpu or cuda, got \"" + d + "\"");
      o.device = d == "cpu" ? Device::cpu() : Device::cuda(0);
      o.device_given = true;
    } else if (a == "--max-bytes") {
      o.max_bytes = std::atoll(value().c_str());
      if (o.max_bytes < 1) usage("--max-bytes must be positive");
    } else if (a == "--fault") {
      o.fault = value();
      if (o.fault != "never-join" && o.fault != "throw" && o.fault != "die") usage("unknown fault \"" + o.fault + "\"");
    } else if (a == "--timeout") {
      o.timeout_s = std::atof(value().c_str());
      if (!(o.timeout_s > 0)) usage("--timeout must be a positive number of seconds");
    } else {
      usage("unknown argument \"" + a + "\"");
    }
  }
  if (!o.device_given) o.device = cuda::is_available() ? Device::cuda(0) : Device::cpu();
  if (o.fault == "die" && o.local > 0) usage("--fault die needs one process per rank (a launcher), not --local");
  return o;
}

// Rank r's row of the repeating input pattern, as float64 values (a generator of its own:
// ranks may be threads, and Kiln's default generator is shared).
std::vector<double> row_of(int rank, DType dtype) {
  std::mt19937_64 gen(1000 + static_cast<uint64_t>(rank));
  std::uniform_int_distribution<int> pick(dtype == kBool ? 0 : -30, dtype == kBool ? 1 : 29);
  std::vector<double> v(kPeriod);
  for (double& x : v) x = pick(gen);
  return v;
}

// `row` repeated to `length` elements on `device`, as `dtype`.
Tensor repeat_row(const std::vector<double>& row, int64_t length, Device device, DType dtype) {
  const int64_t rows = (length + kPeriod - 1) / kPeriod;
  Tensor base = from_vector(row, {1, kPeriod}).to(device);
  return base.expand({rows, kPeriod}).contiguous().view({rows * kPeriod}).narrow(0, 0, length).contiguous().to(dtype);
}

// The float64 row of reducing every rank's row under `op` (bool: or / and).
std::vector<double> reduced_row(const std::vector<std::vector<double>>& rows, dist::ReduceOp op, DType dtype) {
  std::vector<double> out(kPeriod);
  for (int64_t i = 0; i < kPeriod; ++i) {
    double acc = rows[0][i];
    for (size_t r = 1; r < rows.size(); ++r) {
      const double x = rows[r][i];
      if (op == dist::ReduceOp::Max || (dtype == kBool && op == dist::ReduceOp::Sum))
        acc = std::max(acc, x);
      else if (op == dist::ReduceOp::Min)
        acc = std::min(acc, x);
      else
        acc += x;
    }
    out[i] = op == dist::ReduceOp::Avg ? acc / static_cast<double>(rows.size()) : acc;
  }
  return out;
}

struct Checker {
  int rank = 0;
  int checks = 0;
  int failures = 0;

  // Compares `got` with `expected` (float64, same length, on the device) within `tol`.
  void check(const Tensor& got, const Tensor& expected, double tol, const std::string& what) {
    ++checks;
    const double err = got.numel() == 0 ? 0.0 : (got.to(kFloat64) - expected).abs().max().item<double>();
    if (!(err <= tol)) {
      ++failures;
      std::printf("dist_check: rank %d: FAIL %s: max |error| %g > %g\n", rank, what.c_str(), err, tol);
    }
  }
};

// Every collective for every dtype at sizes from one element to max_bytes (x4 steps).
void check_collectives(const Options& o, Checker& c) {
  const int world = dist::get_world_size();
  const int rank = dist::get_rank();
  const Device dev = dist::default_group().device();
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool}) {
    std::vector<std::vector<double>> rows;
    for (int r = 0; r < world; ++r) rows.push_back(row_of(r, dtype));
    std::vector<int64_t> sizes = {1};
    for (int64_t bytes = 1024; bytes <= o.max_bytes; bytes *= 4)
      sizes.push_back(bytes / static_cast<int64_t>(element_size(dtype)));
    for (int64_t n : sizes) {
      const std::string at = fmt::format("{} numel {} world {}", dtype, n, world);
      for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Avg, dist::ReduceOp::Max, dist::ReduceOp::Min}) {
        if (op == dist::ReduceOp::Avg && !is_floating(dtype)) continue;
        // Avg is the one inexact result: sum / world, rounded (NCCL multiplies by 1 / world first).
        const double tol = op == dist::ReduceOp::Avg ? 64.0 * (dtype == kBFloat16  ? 0x1p-8
                                                               : dtype == kFloat16 ? 0x1p-11
                                                               : dtype == kFloat32 ? 0x1p-24
                                                                                   : 0x1p-53)
                                                     : 0.0;
        const std::vector<double> want = reduced_row(rows, op, dtype);
        Tensor t = repeat_row(rows[rank], n, dev, dtype);
        dist::all_reduce(t, op);
        c.check(t, repeat_row(want, n, dev, kFloat64), tol, fmt::format("all_reduce {} {}", dist::to_string(op), at));
        Tensor big = repeat_row(rows[rank], n * world, dev, dtype);
        Tensor part = empty({n}, TensorOptions(dtype).device(dev));
        dist::reduce_scatter(part, big, op);
        c.check(part, repeat_row(want, n * world, dev, kFloat64).narrow(0, rank * n, n), tol,
                fmt::format("reduce_scatter {} {}", dist::to_string(op), at));
      }
      const int src = world - 1;
      Tensor b = repeat_row(rows[rank], n, dev, dtype);
      dist::broadcast(b, src);
      c.check(b, repeat_row(rows[src], n, dev, kFloat64), 0.0, fmt::format("broadcast from {} {}", src, at));
      Tensor gathered = empty({world * n}, TensorOptions(dtype).device(dev));
      dist::all_gather(gathered, repeat_row(rows[rank], n, dev, dtype));
      for (int r = 0; r < world; ++r)
        c.check(gathered.narrow(0, r * n, n), repeat_row(rows[r], n, dev, kFloat64), 0.0,
                fmt::format("all_gather block {} {}", r, at));
    }
  }
  dist::barrier();
}

// One rank misbehaves; the others must get a kiln::Error naming the collective within the
// timeout (plus a margin for the watchdog's period and the abort).
bool check_fault(const Options& o, int rank, int world) {
  const int culprit = world - 1;
  Tensor t = repeat_row(row_of(rank, kFloat32), 1 << 20, dist::default_group().device(), kFloat32);
  dist::all_reduce(t);  // everyone, once: communicators connected
  dist::barrier();
  if (rank == culprit) {
    if (o.fault == "die") {
      std::printf("dist_check: rank %d exits without calling all_reduce\n", rank);
      std::fflush(stdout);
      std::_Exit(0);
    }
    if (o.fault == "throw") throw std::runtime_error(fmt::format("rank {} throws on purpose", rank));
    // never-join: stay away from the collective for longer than the others wait.
    std::this_thread::sleep_for(std::chrono::duration<double>(dist::default_group().timeout()) * 2);
    return true;
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    dist::all_reduce(t, dist::ReduceOp::Sum, true)->synchronize();
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double limit = std::chrono::duration<double>(dist::default_group().timeout()).count() + 10.0;
    const bool ok = std::string(e.what()).starts_with("all_reduce") && s <= limit;
    std::printf("dist_check: rank %d: fault %s: error after %.1f s (limit %.1f s): %s\n", rank, o.fault.c_str(), s, limit,
                e.what());
    return ok;
  }
  std::printf("dist_check: rank %d: FAIL fault %s: all_reduce returned without an error\n", rank, o.fault.c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::optional<std::chrono::milliseconds> timeout;
  if (o.timeout_s > 0) timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  try {
    if (o.local > 0) {
      std::vector<int> failures(o.local, 0), checks(o.local, 0);
      std::vector<int> fault_ok(o.local, 1);
      try {
        dist::run_local(
            o.local, o.device.type(),
            [&](int rank) {
              Checker c{rank};
              if (o.fault.empty()) {
                check_collectives(o, c);
              } else {
                fault_ok[rank] = check_fault(o, rank, o.local) ? 1 : 0;
              }
              failures[rank] = c.failures;
              checks[rank] = c.checks;
            },
            timeout);
      } catch (const std::exception& e) {
        if (o.fault.empty()) throw;
        std::printf("dist_check: run_local rethrew: %s\n", e.what());
      }
      int failed = 0;
      for (int r = 0; r < o.local; ++r) failed += failures[r] + (fault_ok[r] ? 0 : 1);
      std::printf("dist_check: %d ranks in one process (%s), %d checks per rank, %d failures\n", o.local,
                  o.device.str().c_str(), checks[0], failed);
      std::printf("dist_check: %s\n", failed == 0 ? "PASS" : "FAIL");
      return failed == 0 ? 0 : 1;
    }
    dist::InitOptions init;
    init.backend = o.device.is_cuda() ? dist::Backend::NCCL : dist::Backend::Threads;
    init.timeout = timeout;
    dist::init_process_group(init);
    const int rank = dist::get_rank(), world = dist::get_world_size();
    Checker c{rank};
    bool ok = true;
    if (o.fault.empty())
      check_collectives(o, c);
    else
      ok = check_fault(o, rank, world);
    dist::destroy_process_group();  // after a fault the group is broken and this only releases it
    ok = ok && c.failures == 0;
    std::printf("dist_check: rank %d of %d (%s): %d checks, %d failures\n", rank, world,
                dist::read_launch_env().source.c_str(), c.checks, c.failures);
    if (rank == 0) std::printf("dist_check: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("dist_check: FAIL: %s\n", e.what());
    return 1;
  }
}
