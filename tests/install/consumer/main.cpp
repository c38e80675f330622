// Out-of-tree consumer: uses the umbrella header and checks a result it can compute itself,
// and includes the one public header the umbrella does not (the host segment source).
#include <kiln/allocator/host_segment_source.h>
#include <kiln/kiln.h>

#include <cmath>
#include <type_traits>

int main() {
  using namespace kiln;
  nn::Linear layer(3, 2);
  Tensor x = ones({4, 3});
  Tensor y = layer(x);
  // Every row is weight.sum(1) + bias.
  const std::vector<float> w = layer.weight.to_vector<float>(), b = layer.bias.to_vector<float>();
  const std::vector<float> got = y.to_vector<float>();
  for (int r = 0; r < 4; ++r)
    for (int o = 0; o < 2; ++o) {
      const float want = w[o * 3] + w[o * 3 + 1] + w[o * 3 + 2] + b[o];
      if (std::abs(got[r * 2 + o] - want) > 1e-5f) {
        fmt::print(stderr, "consumer: mismatch at ({}, {}): {} vs {}\n", r, o, got[r * 2 + o], want);
        return 1;
      }
    }
  static_assert(std::is_base_of_v<SegmentSource, HostSegmentSource>);
  fmt::print("consumer: {} from an installed Kiln\n", y.sizes());
  return 0;
}
