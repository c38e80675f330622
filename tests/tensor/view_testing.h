// Helpers for the view tests: a view is checked against its base through an index map the
// test writes by hand (view index -> base index), never through another view op. Values are
// compared with the base's to_vector<double>(), and a fill_ through the view must change
// exactly the mapped base elements.
#pragma once

#include <functional>
#include <set>

#include "testing.h"

namespace kiln::testing {

/// Maps a multi-index of the view to the multi-index of the base element it aliases.
using IndexMap = std::function<std::vector<int64_t>(const std::vector<int64_t>&)>;

/// A value no random test input holds, exactly representable in every dtype.
inline constexpr double kSentinel = 7.25;
/// The same for integer dtypes (random integer inputs lie in [-50, 50)).
inline constexpr double kIntSentinel = 77.0;

/// Random values in every dtype (integers in [-50, 50), bool mixed).
inline Tensor random_input(const Shape& shape, DType dtype) {
  return is_floating(dtype) ? random(shape, dtype) : random(shape, dtype, -50.0, 50.0);
}

/// Checks that `view` aliases `base`, has `want_sizes`, holds base[map(i)] at every index i,
/// and that view.fill_(sentinel) writes exactly those base elements (base is modified).
inline void check_view_of(Tensor base, Tensor view, const Shape& want_sizes, const IndexMap& map) {
  REQUIRE(view.sizes() == want_sizes);
  CHECK(view.is_alias_of(base));
  CHECK(view.dtype() == base.dtype());
  const std::vector<double> before = base.to_vector<double>();
  const std::vector<double> got = view.to_vector<double>();
  REQUIRE(static_cast<int64_t>(got.size()) == shape_numel(want_sizes));
  std::set<int64_t> touched;
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
    const int64_t src = ravel(map(unravel(i, want_sizes)), base.sizes());
    touched.insert(src);
    if (got[i] != before[src]) {
      FAIL_CHECK("view element " << i << " (index " << shape_str(unravel(i, want_sizes)) << ") is " << got[i]
                                 << ", base element " << src << " is " << before[src]);
      return;
    }
  }
  const double sentinel = base.dtype() == kBool ? 1.0 : is_floating(base.dtype()) ? kSentinel : kIntSentinel;
  view.fill_(sentinel);
  const std::vector<double> after = base.to_vector<double>();
  for (int64_t k = 0; k < static_cast<int64_t>(after.size()); ++k) {
    const double want = touched.count(k) ? sentinel : before[k];
    if (after[k] != want) {
      FAIL_CHECK("after fill_ through the view, base element " << k << " is " << after[k] << ", expected " << want);
      return;
    }
  }
}

}  // namespace kiln::testing
