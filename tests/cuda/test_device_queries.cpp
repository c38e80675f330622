// CUDA device queries on a machine with a GPU (this suite only runs there).
#include "testing.h"

using namespace kiln;

TEST_CASE("a CUDA build sees the GPU and answers consistently") {
  const int n = cuda::device_count();
  REQUIRE(n >= 1);
  CHECK(cuda::is_available());
  CHECK(cuda::is_built());
  CHECK(cuda::device_count() == n);  // cached, stable answer
  MESSAGE("CUDA build with " << n << " visible GPU(s)");
}
