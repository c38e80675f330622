// nn::Embedding.
#include "embedding.h"

#include "../ops/grad_mode.h"

#include "../ops/factory.h"
#include "../ops/indexing.h"

namespace kiln::nn {

Embedding::Embedding(int64_t num, int64_t dim) : Module("Embedding"), num_embeddings(num), embedding_dim(dim) {
  KILN_CHECK(num >= 0 && dim >= 0, "Embedding: num_embeddings and embedding_dim must be non-negative, got {} and {}",
             num, dim);
  weight = register_parameter("weight", empty({num, dim}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  NoGradGuard no_grad;  // the weight is a leaf that requires grad (PyTorch's init runs under no_grad too)
  weight.normal_(0.0, 1.0);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices); }

std::string Embedding::extra_repr() const { return fmt::format("{}, {}", num_embeddings, embedding_dim); }

}  // namespace kiln::nn
