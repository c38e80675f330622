// The article's MLP block (Linear 1024->4096, GELU, Linear 4096->1024) three ways: eager,
// captured with linear+GELU fused (graph::fuse_linear_gelu, run by the interpreter), and the
// same fused graph replayed as one CUDA graph. It prints the captured graph before and after
// the passes (Kiln's default pipeline plus a user pass of its own; tabular, and DOT files),
// checks every variant against eager, shows one profiled run of each (two kernels per
// linear+GELU eagerly, one fused where the GPU path has one), and times them.
//
//   fused_mlp [--device cpu|cuda] [--dtype float32|tf32|bfloat16|all] [--batch N ...]
//             [--iterations N] [--dot-dir DIR]
//
// On the GPU: batches 64 and 4096, float32, TF32 and bfloat16, latencies from CUDA events
// (median of --iterations after a warm-up). On the CPU (no GPU, or --device cpu): batch 64
// in float32, wall-clock medians; `make demo` runs it so.
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

using namespace kiln;

namespace {

struct Args {
  std::string device;  // "" = cuda when available
  std::vector<std::string> dtypes;
  std::vector<int64_t> batches;
  int iterations = 0;
  std::string dot_dir = ".";
};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "fused_mlp: " << message << "\n"
            << "usage: fused_mlp [--device cpu|cuda] [--dtype float32|tf32|bfloat16|all] [--batch N ...] "
               "[--iterations N] [--dot-dir DIR]\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--device") {
      a.device = value();
      if (a.device != "cpu" && a.device != "cuda")
        usage_error("--device must be cpu or cuda, got \"" + a.device + "\"");
    } else if (arg == "--dtype") {
      const std::string d = value();
      if (d == "all") {
        a.dtypes = {"float32", "tf32", "bfloat16"};
      } else if (d == "float32" || d == "tf32" || d == "bfloat16") {
        a.dtypes.push_back(d);
      } else {
        usage_error("--dtype must be float32, tf32, bfloat16 or all, got \"" + d + "\"");
      }
    } else if (arg == "--batch") {
      const std::string b = value();
      char* end = nullptr;
      const long long n = std::strtoll(b.c_str(), &end, 10);
      if (end == b.c_str() || *end != '\0' || n <= 0)
        usage_error("--batch must be a positive integer, got \"" + b + "\"");
      a.batches.push_back(n);
    } else if (arg == "--iterations") {
      const std::string n = value();
      a.iterations = std::atoi(n.c_str());
      if (a.iterations <= 0) usage_error("--iterations must be a positive integer, got \"" + n + "\"");
    } else if (arg == "--dot-dir") {
      a.dot_dir = value();
    } else {
      usage_error("unknown argument \"" + arg + "\"");
    }
  }
  return a;
}

// Median latency in microseconds of `fn` over `iterations` runs after `warmup` runs.
template <typename Fn>
double median_us(Device device, int warmup, int iterations, Fn&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> times;
  if (device.is_cuda()) {
    const Stream stream = cuda::current_stream(device);
    std::vector<Event> starts, ends;
    for (int i = 0; i < iterations; ++i) {
      starts.emplace_back(device, true);
      ends.emplace_back(device, true);
    }
    for (int i = 0; i < iterations; ++i) {
      starts[static_cast<size_t>(i)].record(stream);
      fn();
      ends[static_cast<size_t>(i)].record(stream);
    }
    cuda::synchronize(device);
    for (int i = 0; i < iterations; ++i)
      times.push_back(1000.0 * starts[static_cast<size_t>(i)].elapsed_ms(ends[static_cast<size_t>(i)]));
  } else {
    for (int i = 0; i < iterations; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// ||a - b|| / ||b||, in float64.
double rel_error(const Tensor& a, const Tensor& b) {
  const Tensor da = a.to(kFloat64).cpu(), db = b.to(kFloat64).cpu();
  const Tensor diff = da - db;
  return std::sqrt((diff * diff).sum().item<double>() / (db * db).sum().item<double>());
}

void print_profile(const std::string& title, Device device, const std::function<void()>& fn) {
  fn();  // warm
  if (device.is_cuda()) cuda::synchronize(device);
  profiler::Profiler prof;
  {
    profiler::ProfileGuard recording(prof);
    fn();
    if (device.is_cuda()) cuda::synchronize(device);
  }
  std::cout << "--- profile: " << title << "\n"
            << prof.key_averages().table({.sort_by = device.is_cuda() ? "cuda_time_total" : "cpu_time_total",
                                          .row_limit = 12})
            << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    const bool gpu = args.device == "cuda" || (args.device.empty() && cuda::is_available());
    if (args.device == "cuda" && !cuda::is_available()) usage_error("--device cuda, but no GPU is visible");
    const Device device = gpu ? Device::cuda(0) : Device::cpu();
    const std::vector<std::string> dtypes =
        !args.dtypes.empty() ? args.dtypes : gpu ? std::vector<std::string>{"float32", "tf32", "bfloat16"}
                                                 : std::vector<std::string>{"float32"};
    const std::vector<int64_t> batches =
        !args.batches.empty() ? args.batches : gpu ? std::vector<int64_t>{64, 4096} : std::vector<int64_t>{64};
    const int iterations = args.iterations > 0 ? args.iterations : gpu ? 200 : 5;
    const int warmup = gpu ? 20 : 1;
    std::cout << "fused_mlp: MLP 1024 -> 4096 (GELU) -> 1024 on " << device.str() << "\n\n";

    struct Row {
      std::string dtype;
      int64_t batch;
      double eager, fused, graph;
    };
    std::vector<Row> rows;
    bool printed_graphs = false;
    for (const std::string& dt : dtypes) {
      const DType dtype = dt == "bfloat16" ? kBFloat16 : kFloat32;
      set_allow_tf32(dt == "tf32");
      for (int64_t batch : batches) {
        manual_seed(0);
        nn::MLP mlp({.sizes = {1024, 4096, 1024}, .activation = nn::Activation::GELU});
        mlp.to(device, dtype);
        mlp.eval();
        NoGradGuard no_grad;
        const Tensor x = randn({batch, 1024}, TensorOptions().device(device).dtype(dtype));

        graph::Graph g = graph::capture(mlp, {x});
        if (!printed_graphs) {
          std::cout << "Captured graph:\n" << g.str() << "\n";
          std::ofstream(args.dot_dir + "/fused_mlp_before.dot") << graph::to_dot(g);
        }
        // Kiln's pipeline (fuse_linear_gelu, dead-code elimination) plus a pass of our own: a
        // user pass is any function over the graph; this one only reads it (returns false:
        // nothing changed) and reports the GEMMs left, i.e. the nodes whose op record has
        // the Gemm fusion role.
        graph::Graph fused = g;
        std::vector<graph::Pass> passes = graph::default_passes();
        passes.push_back({"report_gemms", [&](graph::Graph& graph) {
                            if (printed_graphs) return false;
                            for (const graph::Node* n : graph.nodes())
                              if (n->op().fusion == FusionRole::Gemm)
                                std::cout << "  report_gemms: node " << n->name() << " runs " << n->op().name << "\n";
                            return false;
                          }});
        graph::run_passes(fused, passes);
        size_t rewrites = 0;
        for (const graph::Node* n : fused.nodes()) rewrites += std::string_view(n->op().name) == "fused_linear_gelu";
        if (!printed_graphs) {
          std::cout << "After the passes (fuse_linear_gelu: " << rewrites << " rewrite" << (rewrites == 1 ? "" : "s")
                    << "):\n"
                    << fused.str() << "\n"
                    << "DOT files: " << args.dot_dir << "/fused_mlp_before.dot, " << args.dot_dir
                    << "/fused_mlp_after.dot\n\n";
          std::ofstream(args.dot_dir + "/fused_mlp_after.dot") << graph::to_dot(fused);
          printed_graphs = true;
        }
        graph::Executable run_fused = graph::compile(fused);

        // Correctness against eager, then profiles and timings.
        const Tensor eager_out = mlp(x);
        const double tol = dtype == kBFloat16 ? 2e-2 : dt == "tf32" ? 5e-3 : 1e-5;
        auto check = [&](const std::string& what, const Tensor& out) {
          const double err = rel_error(out, eager_out);
          std::cout << "  " << what << " vs eager: rel. error " << err << (err <= tol ? "" : "  ** TOO LARGE **")
                    << "\n";
          if (!(err <= tol)) throw Error(fmt::format("fused_mlp: {} differs from eager by {} (> {})", what, err, tol));
        };
        std::cout << "[" << dt << ", batch " << batch << "]\n";
        check("fused (interpreter)", run_fused({x})[0]);
        double graph_us = std::nan("");
        std::optional<graph::Executable> run_graph;
        if (gpu) {
          run_graph.emplace(graph::compile(fused, {.cuda_graph = true}));
          (void)(*run_graph)({x});  // warm-up call (eager), then capture
          check("fused + CUDA graph", (*run_graph)({x})[0].clone());
        }
        if (batch == batches.front() && dt == dtypes.back()) {
          print_profile("eager (" + dt + ", batch " + std::to_string(batch) + ")", device, [&] { (void)mlp(x); });
          print_profile("fused (" + dt + ", batch " + std::to_string(batch) + ")", device,
                        [&] { (void)run_fused({x}); });
          if (gpu)
            print_profile("fused + CUDA graph (" + dt + ", batch " + std::to_string(batch) + ")", device,
                          [&] { (void)(*run_graph)({x}); });
        }
        const double eager_us = median_us(device, warmup, iterations, [&] { (void)mlp(x); });
        const double fused_us = median_us(device, warmup, iterations, [&] { (void)run_fused({x}); });
        if (gpu) graph_us = median_us(device, warmup, iterations, [&] { (void)(*run_graph)({x}); });
        rows.push_back({dt, batch, eager_us, fused_us, graph_us});
      }
    }
    set_allow_tf32(false);

    std::cout << "\nLatency of one MLP block forward (median of " << iterations << " runs"
              << (gpu ? ", CUDA events" : ", wall clock") << "):\n"
              << fmt::format("{:<10} {:>6} {:>12} {:>12} {:>16} {:>9} {:>9}\n", "dtype", "batch", "eager us",
                             "fused us", "fused+graph us", "fused x", "graph x");
    for (const Row& r : rows)
      std::cout << fmt::format("{:<10} {:>6} {:>12.1f} {:>12.1f} {:>16.1f} {:>9.2f} {:>9.2f}\n", r.dtype, r.batch,
                               r.eager, r.fused, r.graph, r.eager / r.fused, r.eager / r.graph);
    std::cout << "(x: eager time / variant time; above 1 is faster than eager)\n";
    return 0;
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
