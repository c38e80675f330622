// The main of the CUDA suite: without a GPU (or in a CPU-only build) it says why the CUDA
// tests are skipped and exits with 77, which ctest reports as "Skipped", so the skip is
// visible in every `make test` run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (!kiln::cuda::is_built()) {
    std::printf("CUDA tests skipped: this is a CPU-only build of Kiln (no nvcc found at configure time, or KILN_CUDA=OFF)\n");
    return 77;
  }
  if (!kiln::cuda::is_available()) {
    std::printf("CUDA tests skipped: Kiln was built with CUDA but no GPU is visible on this machine\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
