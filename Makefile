# Kiln's front door. `make demo`, `make test`, `make sanitize` and `make tsan` install missing
# build dependencies (scripts/setup.sh), configure, build and run; all are idempotent and
# incremental.
#
#   make demo                 build the library and the examples it runs (linear_mlp,
#                             profile_linear, fused_mlp, a short train_fashion_mnist), then run
#                             them (on the GPU when one is visible)
#   make test                 build everything (tests, examples, benchmarks) and run every test
#   make sanitize             CPU-only build under AddressSanitizer + UBSan (build-sanitize/),
#                             every test through ctest
#   make tsan                 CPU-only build without OpenMP under ThreadSanitizer (build-tsan/),
#                             the tests that start threads
#   make bench                build and run the benchmarks (on the CPU device)
#   make gpu-check            on a GPU machine: build, test, sanitize, benchmark (scripts/gpu_check.sh)
#   make BUILD_DIR=... CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=90" test
#   make CMAKE_ARGS=-DKILN_CUDA=OFF demo     CPU-only (the CUDA backend is built when nvcc is found)
BUILD_DIR ?= build
SANITIZE_DIR ?= build-sanitize
TSAN_DIR ?= build-tsan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
# A test that hangs fails after this many seconds, with its output, instead of stalling CI.
CTEST_TIMEOUT ?= 900
GENERATOR := $(if $(shell command -v ninja 2>/dev/null),Ninja,Unix Makefiles)
# The sanitizer builds: CPU-only (the CUDA runtime does not run under ASan/TSan), no
# benchmarks, -O1 with line tables (-g1) so reports name file and line: -O2 -g made the
# sanitized library 2.5x slower to compile (binary_cpu.cpp 114 s against 45 s on the VM),
# and CI builds it on two cores.
SANITIZER_CMAKE_ARGS := -DKILN_CUDA=OFF -DKILN_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  '-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG' -DKILN_NATIVE=ON

.PHONY: all setup configure build demo test sanitize tsan bench gpu-check clean

all: build

setup:
	@bash scripts/setup.sh

# Configure once; later builds re-run CMake by themselves when a CMakeLists.txt changes.
$(BUILD_DIR)/CMakeCache.txt:
	@echo "make: configuring $(BUILD_DIR)/; the first build compiles from scratch (README.md, 'What the first build costs')"
	@cmake -S . -B $(BUILD_DIR) -G "$(GENERATOR)" -DKILN_NATIVE=ON $(CMAKE_ARGS)

configure: setup $(BUILD_DIR)/CMakeCache.txt

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Only what the demo runs: the library and its examples (not the tests and benchmarks).
demo: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target linear_mlp profile_linear fused_mlp train_fashion_mnist
	@$(BUILD_DIR)/examples/linear_mlp
	@$(BUILD_DIR)/examples/profile_linear --trace $(BUILD_DIR)/profile_linear_trace.json
	@$(BUILD_DIR)/examples/fused_mlp --dot-dir $(BUILD_DIR)
	@# A short training run (1 epoch of 12,000 images) when the Fashion-MNIST files are here
	@# (scripts/setup.sh installs Debian's dataset-fashion-mnist; without it the demo says so).
	@if [ -e /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ] || [ -e data/fashion-mnist/t10k-labels-idx1-ubyte.gz ]; then \
	  $(BUILD_DIR)/examples/train_fashion_mnist --epochs 1 --limit 12000 --checkpoint $(BUILD_DIR)/fashion_mnist.safetensors; \
	else echo "make demo: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist): train_fashion_mnist skipped"; fi

# ctest lists a skipped suite without its output; print the CUDA suite's reason after it.
test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure --timeout $(CTEST_TIMEOUT) -j $(JOBS)
	@grep -h "tests skipped:" $(BUILD_DIR)/Testing/Temporary/LastTest.log 2>/dev/null || true

$(SANITIZE_DIR)/CMakeCache.txt:
	@cmake -S . -B $(SANITIZE_DIR) -G "$(GENERATOR)" $(SANITIZER_CMAKE_ARGS) -DKILN_SANITIZE=address,undefined $(CMAKE_ARGS)

# The sanitizer options each test runs with are set in tests/CMakeLists.txt.
sanitize: setup $(SANITIZE_DIR)/CMakeCache.txt
	@cmake --build $(SANITIZE_DIR) -j $(JOBS)
	@cd $(SANITIZE_DIR) && ctest --output-on-failure --timeout $(CTEST_TIMEOUT) -j $(JOBS)

# ThreadSanitizer needs OpenMP off: libgomp is not instrumented, so its barriers look like races.
$(TSAN_DIR)/CMakeCache.txt:
	@cmake -S . -B $(TSAN_DIR) -G "$(GENERATOR)" $(SANITIZER_CMAKE_ARGS) -DKILN_SANITIZE=thread -DKILN_OPENMP=OFF \
	  -DKILN_BUILD_EXAMPLES=OFF $(CMAKE_ARGS)

tsan: setup $(TSAN_DIR)/CMakeCache.txt
	@cmake --build $(TSAN_DIR) -j $(JOBS) --target test_threads
	@cd $(TSAN_DIR) && ctest --output-on-failure --timeout $(CTEST_TIMEOUT) -j $(JOBS)

bench: build
	@$(BUILD_DIR)/bench/dispatch_overhead
	@$(BUILD_DIR)/bench/cpu_gemm
	@$(BUILD_DIR)/bench/alloc_latency
	@$(BUILD_DIR)/bench/alloc_trace_replay bench/traces/*.trace
	@$(BUILD_DIR)/bench/profiler_overhead

# On a machine with an NVIDIA GPU: CUDA build, every test, compute-sanitizer, benchmarks
# side by side with LibTorch/PyTorch, one summary table (scripts/gpu_check.sh).
gpu-check: setup
	@bash scripts/gpu_check.sh

clean:
	@rm -rf $(BUILD_DIR) $(SANITIZE_DIR) $(TSAN_DIR)
