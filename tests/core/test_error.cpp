// kiln::Error and the check macros: message text, source location, internal errors.
#include "testing.h"

using namespace kiln;

TEST_CASE("KILN_CHECK throws kiln::Error with the formatted message") {
  auto fails = [](int v) { KILN_CHECK(v > 0, "op: value must be positive, got {}", v); };
  CHECK_NOTHROW(fails(1));
  CHECK_THROWS_WITH_AS(fails(-3), "op: value must be positive, got -3", Error);
  try {
    fails(-1);
  } catch (const Error& e) {
    CHECK(std::string(e.where()).find("test_error.cpp:") != std::string::npos);
  }
}

TEST_CASE("KILN_INTERNAL_ASSERT throws InternalError naming the condition") {
  auto broken = [](int v) { KILN_INTERNAL_ASSERT(v == 0, "v was {}", v); };
  CHECK_NOTHROW(broken(0));
  CHECK_THROWS_WITH_AS(broken(2), doctest::Contains("(v == 0) failed"), InternalError);
  CHECK_THROWS_WITH_AS(broken(2), doctest::Contains("v was 2"), Error);
  CHECK_THROWS_WITH_AS(broken(2), doctest::Contains("bug in Kiln"), Error);
}

TEST_CASE("using an undefined tensor is an error, not a crash") {
  Tensor t;
  CHECK_FALSE(t.defined());
  CHECK_THROWS_WITH_AS(t.dim(), doctest::Contains("undefined"), Error);
  CHECK_THROWS_WITH_AS(add(t, ones({2})), doctest::Contains("add: argument 'self' is an undefined tensor"), Error);
  CHECK(t.str() == "tensor(undefined)");
}
