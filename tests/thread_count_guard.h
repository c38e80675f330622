// ThreadCountGuard: the CPU determinism tests change the process's OpenMP thread count
// (omp_set_num_threads) and must give it back when a test ends, pass or fail. Only in OpenMP
// builds (without OpenMP everything runs on one thread and there is nothing to compare).
#pragma once

#ifdef _OPENMP
#include <omp.h>

namespace kiln::testing {

/// Restores the process's OpenMP thread count when it goes out of scope.
class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(omp_get_max_threads()) {}
  ~ThreadCountGuard() { omp_set_num_threads(saved_); }
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;

 private:
  int saved_;
};

}  // namespace kiln::testing
#endif
