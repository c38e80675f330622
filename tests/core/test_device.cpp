// Device naming and the CUDA presence queries that hold on every machine; the checks that
// need a GPU are in tests/cuda/ (skipped visibly without one).
#include "testing.h"

using namespace kiln;

TEST_CASE("devices print as PyTorch spells them") {
  CHECK(Device::cpu().str() == "cpu");
  CHECK(Device::cuda(0).str() == "cuda:0");
  CHECK(Device::cuda(3).str() == "cuda:3");
  CHECK(fmt::format("{}", Device::cuda(1)) == "cuda:1");
  CHECK(Device::cuda(1) == Device::cuda(1));
  CHECK_FALSE(Device::cuda(0) == Device::cuda(1));
  CHECK_FALSE(Device::cpu() == Device::cuda(0));
  CHECK(Device::cuda(2).index() == 2);
  CHECK(Device::cpu().is_cpu());
  CHECK(Device::cuda().is_cuda());
  CHECK_THROWS_WITH_AS(Device::cuda(40000), doctest::Contains("Device::cuda: device index must be in [0, 32767]"),
                       Error);
}

TEST_CASE("CUDA queries agree with each other on every machine") {
  const int n = cuda::device_count();
  CHECK(n >= 0);
  CHECK(cuda::is_available() == (n > 0));
  if (!cuda::is_built()) CHECK(n == 0);  // a CPU-only build never reports a GPU
}
