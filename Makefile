# Kiln's front door. `make demo` and `make test` install missing build dependencies
# (scripts/setup.sh), configure, build and run; both are idempotent and incremental.
#
#   make demo                 build and run the article's examples (linear_mlp, profile_linear)
#   make test                 build and run every test through ctest
#   make bench                build and run the benchmarks (on the CPU device)
#   make gpu-check            on a GPU machine: build, test, sanitize, benchmark (scripts/gpu_check.sh)
#   make BUILD_DIR=... CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=90" test
BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
GENERATOR := $(if $(shell command -v ninja 2>/dev/null),Ninja,Unix Makefiles)

.PHONY: all setup configure build demo test bench gpu-check clean

all: build

setup:
	@bash scripts/setup.sh

# Configure once; later builds re-run CMake by themselves when a CMakeLists.txt changes.
$(BUILD_DIR)/CMakeCache.txt:
	@cmake -S . -B $(BUILD_DIR) -G "$(GENERATOR)" -DKILN_NATIVE=ON $(CMAKE_ARGS)

configure: setup $(BUILD_DIR)/CMakeCache.txt

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	@$(BUILD_DIR)/examples/linear_mlp
	@$(BUILD_DIR)/examples/profile_linear --trace $(BUILD_DIR)/profile_linear_trace.json

# ctest lists a skipped suite without its output; print the CUDA suite's reason after it.
test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)
	@grep -h "tests skipped:" $(BUILD_DIR)/Testing/Temporary/LastTest.log 2>/dev/null || true

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
	@rm -rf $(BUILD_DIR)
