// MLP: the article's block. Linear layers of the given sizes with an activation (and
// optional dropout) between them, built as a Sequential so it prints and iterates like one.
#pragma once

#include <vector>

#include "sequential.h"

namespace kiln::nn {

/// The activation between an MLP's linear layers.
enum class Activation { ReLU, GELU, GELUTanh, Tanh };

/// How to build an MLP: nn::MLP({.sizes = {1024, 4096, 1024}, .activation = Activation::GELU}).
struct MLPOptions {
  std::vector<int64_t> sizes;               ///< in, hidden..., out (at least two entries)
  Activation activation = Activation::ReLU;  ///< applied after every linear layer but the last
  bool bias = true;                          ///< whether the linear layers have a bias
  double dropout = 0.0;                      ///< dropout after each activation (0 adds none)
};

/// Linear -> activation [-> Dropout] -> ... -> Linear.
class MLP : public Sequential {
 public:
  explicit MLP(const MLPOptions& options);
  const MLPOptions& options() const { return options_; }

 private:
  MLPOptions options_;
};

}  // namespace kiln::nn
