// MLP: the article's block. Linear layers of the given sizes with an activation (and
// optional dropout) between them, built as a Sequential so it prints and iterates like one.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sequential.h"

namespace kiln::nn {

/// The activation between an MLP's linear layers.
enum class Activation { ReLU, GELU, GELUTanh, Tanh };

/// How to build an MLP with every option: nn::MLP({.sizes = {1024, 4096, 1024},
/// .activation = Activation::GELU, .dropout = 0.1}).
struct MLPOptions {
  std::vector<int64_t> sizes;               ///< in, hidden..., out (at least two entries)
  Activation activation = Activation::ReLU;  ///< applied after every linear layer but the last
  bool bias = true;                          ///< whether the linear layers have a bias
  double dropout = 0.0;                      ///< dropout after each activation (0 adds none)
};

// Note [MLP's two forms]
// ~~~~~~~~~~~~~~~~~~~~~~
// nn::MLP({.sizes = {...}, .activation = ...}) and nn::MLP({1024, 4096, 1024}) must both
// compile. In the standard a designated list only initialises an aggregate, so a plain
// MLP(std::vector<int64_t>) overload could not compete with MLPOptions; but GCC 12 lets a
// designated list initialise a vector or an initializer_list too and calls the two forms
// ambiguous. The short forms therefore take what a designated list cannot become: an array
// of at least two sizes (a list whose one element is the braced `.sizes = {...}` gives N = 1,
// or fails to convert), and a std::vector only when one is passed as such (a template
// parameter is never deduced from a braced list). tests/nn/test_mlp.cpp compiles every form.

/// Linear -> activation [-> Dropout] -> ... -> Linear.
class MLP : public Sequential {
 public:
  /// An MLP from all its options (designated initialisers: {.sizes = {...}, ...}).
  explicit MLP(const MLPOptions& options);
  /// The short form: nn::MLP({1024, 4096, 1024}) or nn::MLP({1024, 4096, 1024}, Activation::GELU),
  /// with bias and without dropout (Note [MLP's two forms]).
  template <size_t N>
    requires(N >= 2)
  explicit MLP(const int64_t (&sizes)[N], Activation activation = Activation::ReLU)
      : MLP(MLPOptions{.sizes = std::vector<int64_t>(sizes, sizes + N), .activation = activation}) {}
  /// The short form with sizes known at run time: nn::MLP(sizes, Activation::GELU).
  template <typename Sizes>
    requires std::same_as<Sizes, std::vector<int64_t>>
  explicit MLP(const Sizes& sizes, Activation activation = Activation::ReLU)
      : MLP(MLPOptions{.sizes = sizes, .activation = activation}) {}
  const MLPOptions& options() const { return options_; }

 private:
  MLPOptions options_;
};

}  // namespace kiln::nn
