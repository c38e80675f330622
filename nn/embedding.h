// nn::Embedding: a lookup table of num_embeddings vectors of embedding_dim values.
#pragma once

#include "module.h"

namespace kiln::nn {

/// weight [num_embeddings, embedding_dim]; forward(indices) picks rows (embedding()).
class Embedding : public Module {
 public:
  /// Creates the table on the CPU in float32 with N(0, 1) weights, as torch.nn.Embedding
  /// does; move it with to().
  Embedding(int64_t num_embeddings, int64_t embedding_dim);

  /// embedding(weight, indices): integer indices of any shape -> indices.shape + [embedding_dim].
  Tensor forward(const Tensor& indices) override;
  /// Re-draws the weight from N(0, 1).
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t num_embeddings;
  int64_t embedding_dim;
  Tensor weight;
};

}  // namespace kiln::nn
