// The host half of device-side errors (core/device_error.h) that runs without a GPU: the
// message registry and its formatting, and a check that costs nothing when no kernel has
// recorded anything. Recording and raising on a GPU: tests/cuda/test_cross_entropy_cuda.cpp.
#include "core/device_error.h"

#include "testing.h"

using namespace kiln;

TEST_CASE("device errors: registered messages are filled with the recorded values") {
  const uint32_t a = cuda::register_device_error("op_a: target {0} is out of bounds for {1} classes (at row {2})");
  const uint32_t b = cuda::register_device_error("op_b: value {1} at {0}");
  CHECK(a != 0);
  CHECK(b != 0);
  CHECK(a != b);
  const int64_t args[3] = {12, 10, 3};
  CHECK(cuda::format_device_error(a, args) == "op_a: target 12 is out of bounds for 10 classes (at row 3)");
  // Values may be used in any order, or not at all.
  CHECK(cuda::format_device_error(b, args) == "op_b: value 10 at 12");
  // A kind nobody registered (a corrupted record) still gives a readable message.
  CHECK(cuda::format_device_error(0, args) == "a kernel reported an error of unknown kind 0 (values 12, 10, 3)");
  CHECK(cuda::format_device_error(1u << 30, args).starts_with("a kernel reported an error of unknown kind"));
}

TEST_CASE("device errors: a message fmt cannot fill is refused when registered") {
  CHECK_THROWS_WITH_AS(cuda::register_device_error("bad: {3}"), doctest::Contains("register_device_error: bad message"),
                       InternalError);
  CHECK_THROWS_AS(cuda::register_device_error("bad: {"), InternalError);
}

TEST_CASE("device errors: the check is a no-op when no kernel recorded anything") {
  // No GPU work in this suite: nothing has asked for a record, so nothing is raised, for
  // any device number.
  for (int device : {0, 1, 63, 64, -1}) CHECK_NOTHROW(cuda::check_device_error(device));
}
