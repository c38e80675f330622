// Parameter initialisation, as torch.nn.init: in-place fills from the default generator.
#pragma once

#include <utility>

#include "../tensor/tensor.h"

namespace kiln::nn::init {

/// (fan_in, fan_out) of a weight: for [out, in, k...] fan_in = in * prod(k), fan_out = out * prod(k).
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& weight);
/// Fills with U(low, high).
Tensor& uniform_(Tensor& t, double low, double high);
/// He/Kaiming uniform for a leaky-ReLU slope `a` over fan_in: U(-b, b) with
/// b = sqrt(6 / ((1 + a^2) * fan_in)). With a = sqrt(5), b = 1 / sqrt(fan_in) (nn.Linear's default).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0);
/// Fills with zeros.
Tensor& zeros_(Tensor& t);
/// Fills with ones.
Tensor& ones_(Tensor& t);

}  // namespace kiln::nn::init
