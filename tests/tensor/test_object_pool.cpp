// The per-thread free lists behind Shape, TensorImpl and StorageImpl (tensor/object_pool.h).
#include <kiln/kiln.h>

#include <thread>
#include <vector>

#include "tensor/object_pool.h"
#include "testing.h"

using namespace kiln;

TEST_CASE("object pool: freed memory is handed out again for the same size class only") {
  void* a = detail::pool_allocate(40);
  detail::pool_deallocate(a, 40);
  void* b = detail::pool_allocate(48);  // same 16-byte class (33..48 bytes)
  CHECK(b == a);
  void* c = detail::pool_allocate(24);  // another class: fresh memory
  CHECK(c != a);
  detail::pool_deallocate(b, 48);
  detail::pool_deallocate(c, 24);
  // Beyond the largest class the heap serves every request.
  void* big = detail::pool_allocate(detail::kPoolMaxBytes + 8);
  detail::pool_deallocate(big, detail::kPoolMaxBytes + 8);
}

TEST_CASE("object pool: memory freed on another thread, and shapes of any rank") {
  std::vector<Tensor> made;
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) made.push_back(full({2, 3}, static_cast<float>(i)));
  });
  producer.join();  // its lists are gone; the tensors it made are freed here
  for (size_t i = 0; i < made.size(); ++i)
    CHECK(made[i].to_vector<float>() == std::vector<float>(6, static_cast<float>(i)));
  made.clear();
  // A shape longer than the pool's largest class (32 dims) comes from the heap.
  Shape dims(40, 1);
  dims[3] = 5;
  const Tensor t = ones(dims);
  CHECK(t.dim() == 40);
  CHECK(t.numel() == 5);
  CHECK(t.to_vector<float>() == std::vector<float>(5, 1.0f));
  const Tensor v = t.view({5});
  CHECK(v.sizes() == Shape{5});
}
