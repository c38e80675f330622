// The memcpy rows of transfers under the ops that issued them, as PyTorch's table puts
// "Memcpy HtoD" under aten::copy_ < aten::_to_copy < aten::to, and the item's DtoH under
// aten::_local_scalar_dense < aten::item: x.to(cuda), y.cpu(), y.item(), their non_blocking
// forms, and copy_ from the host.
#ifdef KILN_WITH_CUDA

#include <cstdlib>
#include <string>
#include <vector>

#include "profiler/profiler.h"
#include "cuda/profiler_testing.h"
#include "testing.h"

using namespace kiln;
using kiln::testing::traced;
using profiler::EventKind;
using profiler::ProfileEvent;
using profiler::Profiler;

namespace {

const Device kGpu = Device::cuda(0);

// The names from the op that launched `e` up through its parents.
std::vector<std::string> launcher_chain(const std::vector<ProfileEvent>& events, const ProfileEvent& e) {
  std::vector<std::string> names;
  for (int64_t i = e.launcher; i >= 0; i = events[static_cast<size_t>(i)].parent)
    names.push_back(events[static_cast<size_t>(i)].name);
  return names;
}

using Chain = std::vector<std::string>;

}  // namespace

TEST_CASE("profiler (CUDA): transfers' memcpy rows sit under kiln::copy_ / _to_copy / to and kiln::item") {
  constexpr int64_t kN = 1 << 18;  // 1 MiB of float32: one staging slice
  const Tensor x = testing::random({kN});
  const Tensor y = x.to(kGpu);
  const Tensor scalar = full({1}, 2.5, kGpu);
  Tensor dst = empty({kN}, kGpu);
  // Warm-up: the first copies' set-up and the pinned cache's first segments stay out.
  (void)x.to(kGpu, true);
  (void)y.cpu();
  (void)y.to(Device::cpu(), true);
  (void)scalar.item();
  cuda::synchronize(kGpu);

  Profiler prof({.record_shapes = true});
  prof.start();
  const Tensor a = x.to(kGpu);                      // HtoD (pageable, blocking)
  const Tensor b = x.to(kGpu, true);                // HtoD (staged through the pinned cache)
  const Tensor h = y.cpu();                         // DtoH (blocking)
  const Tensor hp = y.to(Device::cpu(), true);      // DtoH (into a pinned result)
  const double v = scalar.item<double>();           // DtoH of one element
  dst.copy_(x);                                     // HtoD straight into dst
  cuda::synchronize(kGpu);
  prof.stop();
  CHECK(v == 2.5);
  if (!traced(prof)) return;
  CHECK(prof.dropped_device_records() == 0);

  const std::vector<ProfileEvent>& events = prof.events();
  std::vector<Chain> htod, dtoh;
  for (const ProfileEvent& e : events) {
    if (e.kind != EventKind::Memcpy) continue;
    INFO(e.name);
    if (e.detail == "HtoD") {
      CHECK(e.transfer_bytes == kN * 4);
      htod.push_back(launcher_chain(events, e));
    } else if (e.detail == "DtoH") {
      dtoh.push_back(launcher_chain(events, e));
    }
  }
  const Chain to_chain{"kiln::copy_", "kiln::_to_copy", "kiln::to"};
  CHECK(htod == std::vector<Chain>{to_chain, to_chain, Chain{"kiln::copy_"}});
  CHECK(dtoh == std::vector<Chain>{to_chain, to_chain, Chain{"kiln::_local_scalar_dense", "kiln::item"}});

  const std::string table = prof.key_averages().table();
  for (const char* row : {"kiln::to ", "kiln::_to_copy ", "kiln::copy_ ", "kiln::item ", "kiln::_local_scalar_dense ",
                          "Memcpy HtoD", "Memcpy DtoH"}) {
    INFO(row);
    CHECK(table.find(row) != std::string::npos);
  }
  MESSAGE(table);
  CHECK(a.to_vector<float>() == x.to_vector<float>());
  CHECK(b.to_vector<float>() == x.to_vector<float>());
  CHECK(h.to_vector<float>() == hp.to_vector<float>());
}

#endif  // KILN_WITH_CUDA
