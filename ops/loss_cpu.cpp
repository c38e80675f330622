// CPU loss kernels over [rows, C] (ops/kernels.h has the contract): nll_loss and the fused
// cross entropy (log-sum-exp, gather and mean in one pass per row), and their gradients.
// Row statistics and sums run in double, as the CPU softmax does; the mean adds the rows in
// order, so the result does not depend on the thread count. Every target is checked before
// any row is computed: an out-of-range one is an error naming the op, never a read outside
// the row, and the parallel loops below never throw.
#include <cmath>
#include <limits>
#include <vector>

#include "../tensor/dtype_dispatch.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Rows x classes at which the row loops are split over the OpenMP threads.
constexpr int64_t kParallelElements = int64_t{1} << 16;

// Throws for the first target (in row order) outside [0, classes) that is not ignore_index.
void check_targets(const char* op, const int64_t* t, int64_t rows, int64_t classes, int64_t ignore_index) {
  for (int64_t i = 0; i < rows; ++i)
    KILN_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < classes),
               "{}: target {} is out of bounds for {} classes (at row {})", op, t[i], classes, i);
}

template <typename T>
double wide(T v) {
  return static_cast<double>(static_cast<acc_t<T>>(v));
}

// The mean over the rows that count (NaN when none does) into out (T) and count (int64).
template <typename T>
void write_mean(const Tensor& out, const Tensor& count, double total, int64_t counted) {
  const double v = counted == 0 ? kNaN : total / static_cast<double>(counted);
  *static_cast<T*>(out.data_ptr()) = static_cast<T>(static_cast<acc_t<T>>(v));
  *count.data_ptr<int64_t>() = counted;
}

void nll_loss_cpu(const Tensor& out, const Tensor& count, const Tensor& logp, const Tensor& target,
                  int64_t ignore_index) {
  const int64_t rows = logp.sizes()[0], classes = logp.sizes()[1];
  const int64_t* t = target.data_ptr<int64_t>();
  check_targets("nll_loss", t, rows, classes, ignore_index);
  dispatch_floating(logp.dtype(), "nll_loss", [&]<typename T>() {
    const T* lp = static_cast<const T*>(logp.data_ptr());
    double total = 0;
    int64_t counted = 0;
    for (int64_t i = 0; i < rows; ++i) {
      if (t[i] == ignore_index) continue;
      total -= wide(lp[i * classes + t[i]]);
      ++counted;
    }
    write_mean<T>(out, count, total, counted);
  });
}

// -grad / count at each counted row's target, 0 elsewhere.
void nll_loss_backward_cpu(const Tensor& grad, const Tensor& grad_out, const Tensor& target, const Tensor& count,
                           int64_t ignore_index) {
  const int64_t rows = grad.sizes()[0], classes = grad.sizes()[1];
  const int64_t* t = target.data_ptr<int64_t>();
  check_targets("nll_loss_backward", t, rows, classes, ignore_index);
  const int64_t counted = *count.data_ptr<int64_t>();
  dispatch_floating(grad.dtype(), "nll_loss_backward", [&]<typename T>() {
    T* g = static_cast<T*>(grad.data_ptr());
    const double scale = wide(*static_cast<const T*>(grad_out.data_ptr())) / static_cast<double>(counted);
    const T zero = static_cast<T>(0.0f), hit = static_cast<T>(static_cast<acc_t<T>>(-scale));
    for (int64_t i = 0; i < rows * classes; ++i) g[i] = zero;
    for (int64_t i = 0; i < rows; ++i)
      if (t[i] != ignore_index) g[i * classes + t[i]] = hit;
  });
}

// log(sum_c exp(x[c])) of one row, as ops/softmax_cpu.cpp computes it: the max ignores NaN,
// an all -inf row uses max 0 (its log-sum-exp is -inf), NaN or +inf make it NaN.
template <typename T>
double row_logsumexp(const T* x, int64_t classes) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < classes; ++c) m = std::fmax(m, wide(x[c]));
  if (std::isinf(m) && m < 0) m = 0;
  double total = 0;
  for (int64_t c = 0; c < classes; ++c) total += std::exp(wide(x[c]) - m);
  return m + std::log(total);
}

void cross_entropy_cpu(const Tensor& loss, const Tensor& lse, const Tensor& count, const Tensor& logits,
                       const Tensor& target, int64_t ignore_index) {
  const int64_t rows = logits.sizes()[0], classes = logits.sizes()[1];
  const int64_t* t = target.data_ptr<int64_t>();
  check_targets("cross_entropy", t, rows, classes, ignore_index);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using L = acc_t<T>;  // lse's element type: float, or double for float64
    const T* x = static_cast<const T*>(logits.data_ptr());
    L* out_lse = static_cast<L*>(lse.data_ptr());
    std::vector<double> row_loss(static_cast<size_t>(rows));
    [[maybe_unused]] const bool parallel = rows * classes >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t i = 0; i < rows; ++i) {
      const T* row = x + i * classes;
      const double v = row_logsumexp(row, classes);
      out_lse[i] = static_cast<L>(v);
      if (t[i] != ignore_index) row_loss[static_cast<size_t>(i)] = v - wide(row[t[i]]);
    }
    double total = 0;
    int64_t counted = 0;
    for (int64_t i = 0; i < rows; ++i) {
      if (t[i] == ignore_index) continue;
      total += row_loss[static_cast<size_t>(i)];
      ++counted;
    }
    write_mean<T>(loss, count, total, counted);
  });
}

// grad_out * (exp(x - lse) - onehot(target)) / count on counted rows, 0 on ignored rows.
void cross_entropy_backward_cpu(const Tensor& grad, const Tensor& grad_out, const Tensor& logits,
                                const Tensor& target, const Tensor& lse, const Tensor& count, int64_t ignore_index) {
  const int64_t rows = logits.sizes()[0], classes = logits.sizes()[1];
  const int64_t* t = target.data_ptr<int64_t>();
  check_targets("cross_entropy_backward", t, rows, classes, ignore_index);
  const int64_t counted = *count.data_ptr<int64_t>();
  dispatch_floating(logits.dtype(), "cross_entropy_backward", [&]<typename T>() {
    using L = acc_t<T>;
    const T* x = static_cast<const T*>(logits.data_ptr());
    const L* row_lse = static_cast<const L*>(lse.data_ptr());
    T* g = static_cast<T*>(grad.data_ptr());
    const double scale = wide(*static_cast<const T*>(grad_out.data_ptr())) / static_cast<double>(counted);
    [[maybe_unused]] const bool parallel = rows * classes >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t i = 0; i < rows; ++i) {
      T* out = g + i * classes;
      const T* row = x + i * classes;
      if (t[i] == ignore_index) {
        for (int64_t c = 0; c < classes; ++c) out[c] = static_cast<T>(0.0f);
        continue;
      }
      const double m = static_cast<double>(row_lse[i]);
      for (int64_t c = 0; c < classes; ++c) {
        const double p = std::exp(wide(row[c]) - m) - (c == t[i] ? 1.0 : 0.0);
        out[c] = static_cast<T>(static_cast<acc_t<T>>(scale * p));
      }
    }
  });
}

}  // namespace

void register_loss_kernels() {
  dispatch::nll_loss_kernels.set(DeviceType::CPU, &nll_loss_cpu);
  dispatch::nll_loss_backward_kernels.set(DeviceType::CPU, &nll_loss_backward_cpu);
  dispatch::cross_entropy_kernels.set(DeviceType::CPU, &cross_entropy_cpu);
  dispatch::cross_entropy_backward_kernels.set(DeviceType::CPU, &cross_entropy_backward_cpu);
}

}  // namespace kiln::cpu
