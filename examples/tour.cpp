// A walk through Kiln's tensors: factories, dtypes, views that share memory, broadcasting,
// reductions, printing, and the errors bad input gets. Each step prints what it did.
#include <kiln/kiln.h>

using namespace kiln;

int main() {
  try {
    manual_seed(42);

    fmt::print("-- factories\n");
    fmt::print("zeros({{2, 3}})        = {}\n", zeros({2, 3}));
    fmt::print("arange(6)            = {}\n", arange(6));
    fmt::print("eye(3, kFloat64)     = {}\n", eye(3, kFloat64));
    Tensor x = randn({3, 4});
    fmt::print("randn({{3, 4}})        = {}\n", x);

    fmt::print("\n-- views share storage: writing through a view changes the base\n");
    Tensor row = x.select(0, 1);                 // x[1]
    Tensor col = x.transpose(0, 1).select(0, 2);  // x[:, 2]
    fmt::print("x[1]    = {}\nx[:, 2] = {}\n", row, col);
    row.fill_(0);
    fmt::print("after x[1].fill_(0): x = {}\n", x);
    fmt::print("x.t() is_contiguous: {}; x.t().contiguous() is_contiguous: {}\n", x.t().is_contiguous(),
               x.t().contiguous().is_contiguous());
    fmt::print("x.view({{2, 6}})       = {}\n", x.view({2, 6}));

    fmt::print("\n-- broadcasting and type promotion follow PyTorch\n");
    Tensor a = arange(3).view({3, 1});  // int64
    Tensor b = arange(4);               // int64
    fmt::print("a [3,1] + b [4]      = {}\n", a + b);
    fmt::print("int64 / int64        = {}\n", b / 2);
    fmt::print("int64 * 0.5          = {}\n", b * 0.5);
    fmt::print("bfloat16 + float32 0-dim keeps bfloat16: {}\n", (ones({2}, kBFloat16) + full({}, 1.5)).dtype());

    fmt::print("\n-- reductions\n");
    Tensor m = arange(0, 12, 1, kFloat32).view({3, 4});
    fmt::print("m                    = {}\n", m);
    fmt::print("sum(m, {{1}})          = {}\n", sum(m, {1}));
    fmt::print("mean(m, {{0}}, true)   = {}\n", mean(m, {0}, true));
    fmt::print("argmax(m, 1)         = {}\n", argmax(m, 1));
    fmt::print("softmax(m, 1)        = {}\n", softmax(m, 1));

    fmt::print("\n-- dtypes\n");
    fmt::print("m.to(kBFloat16)      = {}\n", m.to(kBFloat16));
    fmt::print("m > 5                = {}\n", m > 5);
    fmt::print("large tensors are summarised:\n{}\n", arange(2000));

    fmt::print("\n-- bad input gets a clear error\n");
    try {
      (void)(randn({2, 3}) + randn({4}));
    } catch (const Error& e) {
      fmt::print("{}\n", e.what());
    }
    try {
      (void)x.t().view({12});
    } catch (const Error& e) {
      fmt::print("{}\n", e.what());
    }
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
